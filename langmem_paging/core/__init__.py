"""The lowest layer: what every other layer reads and writes, and nothing above it.

Messages and the library's marks on them (`messages`, `library_messages`, `blocks`), token counts
(`tokens`), words and terms (`text`, `background`), page and cluster records (`records`), the cluster
forest walked over them (`forest`), the checkpointed paging state (`state`) and its view-mode
rendering (`view`), hooks and tracing (`hooks`, `tracing`), errors (`errors`) and the typed request
protocol flows are written in (`effects`).
"""
