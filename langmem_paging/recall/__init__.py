"""Recall: the service behind the `recall` tool (`langmem_paging.integrations.recall_tool`), as
plan -> read -> size -> render, and the whole history rebuilt from the pages.

- `plan`: what the model asked for, normalized;
- `service`: reads what the branch may see, sizes and renders the result (a flow of requests);
- `spec`: the typed, versioned record of what a result showed (kept in its artifact);
- `render`: how recalled text reads, and how a shrunk result is rebuilt exactly;
- `passages`: search hits with their neighbours, packed into the room;
- `feedback`: the second hop's follow-up query, from the first hits' distinctive terms;
- `history`: `reconstruct_history`, the whole history from the paging state and the pages.
"""
