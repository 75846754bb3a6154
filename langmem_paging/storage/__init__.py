"""Where pages live: the `PageStore` over any LangGraph `BaseStore` (`page_store`), page-number claims
(`claims`), Postgres reads by primary key (`postgres_reads`), store and checkpointer URIs
(`backends`), the I/O a thread's step and recall ask for (`thread_io`), and what forgetting a
message changes (`lifecycle`, `lifecycle_state`).
"""
