"""Recall: the service behind the `recall` tool (`langmem_paging.integrations.recall_tool`), as
plan -> read -> size -> render, and the whole history rebuilt from the pages.

- `plan`: what the model asked for, normalized;
- `request`: a recall's `RecallRequest` and `RecallAnswer`, one shape from the tool to the composer;
- `service`: reads what the branch may see and sizes the room (a flow of requests);
- `compose`: the result within that room: pages, parts, cluster listings, passages, a second hop;
- `spec`: the typed, versioned record of what a result showed (kept in its artifact);
- `render`: how recalled text reads, and how a shrunk result is rebuilt exactly;
- `passages`: search hits with their neighbours, packed into the room;
- `feedback`: the second hop's follow-up query, from the first hits' distinctive terms;
- `history`: `reconstruct_history`, the whole history from the paging state and the pages.
"""
