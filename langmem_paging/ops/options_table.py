"""The paging options as a Markdown table, derived from the one option list (`PagingConfig.fields()`
with the types of `PagingOptions`): docs/options.md is this module's output, and a test fails when
the file and the code drift apart.

Regenerate with ``python -m langmem_paging.ops.options_table > docs/options.md``.
"""

from __future__ import annotations

import sys

from langmem_paging.config import PagingConfig, PagingOptions

__all__ = ["options_markdown"]

_HEADER = """# Paging options

Every option of `PagingConfig`, which `PagingMiddleware(...)`, `PagingNode(...)`, `page_messages(...)`,
`create_paging_agent(...)` and `PagingThread(...)` take as keywords. Generated from the code by
`python -m langmem_paging.ops.options_table > docs/options.md`; `tests/integration/test_graph_step.py`
fails when this file and the code differ.

`PagingMiddleware` and `PagingNode` also take `store`, `ttl` (minutes), `index` (a `SearchIndex`) and
`on_store_error` (`"raise"` or `"continue"`), which apply to the store each call brings.

| Option | Type | Default | What it does |
|---|---|---|---|
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def options_markdown() -> str:
    """The options table (Markdown): one row per option, in the order `PagingConfig` declares them."""
    types = {
        name: getattr(kind, "__forward_arg__", str(kind))
        for name, kind in PagingOptions.__annotations__.items()
    }
    types["max_tokens"] = "Budget: int | ('tokens', int) | ('fraction', float)"
    rows = []
    for name, (doc, default) in PagingConfig.documented().items():
        shown = "required" if name == "max_tokens" else f"`{default!r}`"
        rows.append(f"| `{name}` | `{_cell(types[name])}` | {shown} | {_cell(doc)} |")
    return _HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(options_markdown())
