"""One worker process of a deployment: a compiled agent with paging on a shared Postgres store and
checkpointer, running turns on its threads; it records the pages it formed (for
tests/integration/test_workers.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore

from langmem_paging import PageStore, PagingHooks, PagingMiddleware
from langmem_paging.testing import ScriptedChatModel


class _Formed(PagingHooks):
    """The pages this worker formed, with the digest of the record right after it was written."""

    def __init__(self) -> None:
        self.pages: list[tuple[str, str, str]] = []
        self.page_store: PageStore | None = None

    def on_formed(self, event) -> None:
        assert self.page_store is not None
        for page_id in event.page_ids:
            page = self.page_store.get(event.thread_id, page_id)
            self.pages.append((event.thread_id, page_id, page.digest if page else ""))


def run(uri: str, worker: int, threads: list[str], turns: int, out: str) -> None:
    formed = _Formed()
    with PostgresStore.from_conn_string(uri) as store, PostgresSaver.from_conn_string(uri) as saver:
        formed.page_store = PageStore(store)
        paging = PagingMiddleware(max_tokens=400, boundary="fixed_2", hooks=[formed])
        agent = create_agent(
            ScriptedChatModel(responses=["Noted."] * (turns * len(threads) + 5)),
            middleware=[paging],
            store=store,
            checkpointer=saver,
        )
        sent = []
        for turn in range(turns):
            for thread in threads:
                text = f"W{worker} turn {turn}: Zarko{worker}x{turn} keeps {100 + turn} beehives near Bled{worker}."
                agent.invoke(
                    {"messages": [HumanMessage(text, id=f"w{worker}-{thread}-{turn}")]},
                    {"configurable": {"thread_id": thread}},
                )
                sent.append(text)
    Path(out).write_text(json.dumps({"formed": formed.pages, "sent": sent}))


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5])
