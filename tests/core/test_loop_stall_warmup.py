"""The tokenizer, tiktoken's first encode and the stemmer load away from the event loop.

tiktoken builds its tokenizer in Rust holding the GIL (0.15-0.36 s), so a load in any thread while
an event loop runs stalls that loop; the first encode of a process sets up its regex engine (about
20 ms). An agent built before its loop runs (a server at startup) loads all three in the
constructor; one built inside a running loop loads them in a daemon thread, never on the loop's
thread. Loads are once per process, so each case runs in a fresh interpreter through the path users
take (`create_agent` + `PagingMiddleware`, a scripted chat model, `ainvoke`). The stall itself is
measured by `tools/bench_loop_stall.py`, not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent(
    """
    import asyncio, json, threading
    import tiktoken.core
    import langmem_paging.core.background as background

    events = []
    loop_running = False

    def record(kind):
        events.append({"kind": kind, "thread": threading.current_thread().name, "loop_running": loop_running})

    build = tiktoken.core.Encoding.__init__
    def init(self, *args, **kwargs):
        record("tokenizer")
        build(self, *args, **kwargs)
    tiktoken.core.Encoding.__init__ = init

    encode = tiktoken.core.Encoding.encode_ordinary  # how a TokenCounter encodes
    def first_encode(self, *args, **kwargs):
        if not any(e["kind"] == "first encode" for e in events):
            record("first encode")
        return encode(self, *args, **kwargs)
    tiktoken.core.Encoding.encode_ordinary = first_encode

    stemmer = background._english_stemmer
    def load_stemmer():
        record("stemmer")
        return stemmer()
    background._english_stemmer = load_stemmer

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore
    from langmem_paging import PagingMiddleware, PagingState
    from langmem_paging.testing import ScriptedChatModel

    def build_agent():
        store = InMemoryStore()
        paging = PagingMiddleware(max_tokens=276, boundary="fixed_2", policy="lru", store=store)
        model = ScriptedChatModel(responses=[f"Noted, item {i} about Ljubljana{i} and its beekeepers." for i in range(8)])
        return create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver(), store=store)

    async def main(agent):
        global loop_running
        loop_running = True
        if agent is None:
            agent = build_agent()
        config = {"configurable": {"thread_id": "t"}}
        for turn in range(5):  # pages form from the fourth turn: bookmarks stem
            text = (
                f"Turn {turn}: my neighbour Zarko{turn} keeps {turn + 3} beehives near Lake Bled, "
                f"and the honey harvest in September {2000 + turn} was remarkable."
            )
            await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
        for thread in threading.enumerate():
            if thread.name.startswith("langmem-paging-warm"):
                thread.join()
        state = await agent.aget_state(config)
        return PagingState.from_value(state.values["paging"]).next["p"] - 1

    agent = build_agent() if BUILD == "startup" else None
    pages = asyncio.run(main(agent))
    print(json.dumps({"events": events, "pages": pages}))
    """
)


def _probe(build: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", f"BUILD = {build!r}\n{_PROBE}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_agent_built_before_its_loop_loads_nothing_while_the_loop_runs() -> None:
    result = _probe("startup")
    events = result["events"]
    pages = result["pages"]
    assert isinstance(events, list) and isinstance(pages, int)
    assert pages >= 1  # bookmarks were made: the stemmer was used
    assert sorted(e["kind"] for e in events) == ["first encode", "stemmer", "tokenizer"]
    assert [e for e in events if e["loop_running"]] == []
    assert {e["thread"] for e in events} == {"MainThread"}


def test_agent_built_inside_a_running_loop_builds_the_tokenizer_off_the_loop_thread() -> None:
    result = _probe("in-loop")
    events = result["events"]
    assert isinstance(events, list)
    # the warm-up thread builds it, or a turn that came first waits for it in a worker thread; which
    # one first encodes is a race, and either is fine
    (tokenizer,) = [e for e in events if e["kind"] == "tokenizer"]
    assert tokenizer["thread"] != "MainThread", events
