"""LangGraph-facing: the `create_agent` middleware (`middleware`), the graph node (`node`),
`create_paging_agent` (`agents`), the recall tool (`recall_tool`), and what they share: the
graph-facing step (`graph_step`, `graph_state`, `graph_stores`), the `Pager` that gives each call its
resources (`pager`), the engine that runs the step under the thread's lock and commits it
(`engine`), and token-count calibration from usage metadata (`calibration`).
"""
