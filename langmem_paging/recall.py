"""The `recall` tool the model calls to bring evicted pages back."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool

from langmem_paging.pager import Pager

__all__ = ["RECALL_DESCRIPTION", "make_recall_tool"]

RECALL_DESCRIPTION = (
    "Bring back the full text of earlier parts of this conversation. Older messages were "
    "paged out and replaced by bookmarks like [p3:Caroline,adoption,May 2023]: pN is the page "
    "id, the words are its keywords. Call recall(page_ids=['p3']) when a bookmark looks "
    "relevant to the question; you may ask for several pages. If no bookmark fits, call "
    "recall(query='words to search for') to search all paged-out text."
)


def _thread_id(config: RunnableConfig) -> str | None:
    thread_id = (config or {}).get("configurable", {}).get("thread_id")
    return str(thread_id) if thread_id not in (None, "") else None


_NO_THREAD = "recall is unavailable: this run has no thread_id, so there is no paged-out history."


def make_recall_tool(pager: Pager, *, name: str = "recall") -> StructuredTool:
    """A `StructuredTool` (sync and async) reading only the calling thread's pages.

    Bad arguments and unknown page ids come back as a tool message that lists the
    valid ids; the tool never raises for what the model sends.
    """

    def recall(
        page_ids: list[str | int] | str | int | None = None, query: str | None = None, *, config: RunnableConfig
    ) -> tuple[str, dict]:
        thread_id = _thread_id(config)
        if thread_id is None:
            return _NO_THREAD, {}
        return pager.recall(thread_id, page_ids, query)

    async def arecall(
        page_ids: list[str | int] | str | int | None = None, query: str | None = None, *, config: RunnableConfig
    ) -> tuple[str, dict]:
        thread_id = _thread_id(config)
        if thread_id is None:
            return _NO_THREAD, {}
        return await pager.arecall(thread_id, page_ids, query)

    return StructuredTool.from_function(
        func=recall,
        coroutine=arecall,
        name=name,
        description=RECALL_DESCRIPTION,
        response_format="content_and_artifact",
    )
