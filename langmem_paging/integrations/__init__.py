"""The LangGraph adapters: the `create_agent` middleware (`middleware`), the graph node (`node`),
`create_paging_agent` (`agents`), the recall tool (`recall_tool`), what they share (the graph-facing
step: `graph_step`, `graph_state`), and token-count calibration from usage metadata
(`calibration`). What runs a step or a recall for a thread is `langmem_paging.runtime`'s.
"""
