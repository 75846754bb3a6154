"""What can be swapped: where pages are cut (`boundaries`), what leaves (`policies`, `stae`,
`kmeans`), hot/warm/cold tiers (`tiers`), how a page is named (`bookmarks`, `keywords`, `llm`),
how bookmarks fold into clusters (`clusters`), and the embedders and vectors semantic choices use
(`embeddings`, `vectors`, `wordpiece`). Each answers one question; none does I/O of its own.
"""
