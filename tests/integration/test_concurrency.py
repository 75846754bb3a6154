"""Many threads at once, and two runs at once on one thread, through one compiled agent.

50 threads (asyncio.gather of their conversations, or a thread pool of sync invokes) on SQLite files
and on PostgreSQL: no thread reads another's pages (a recall of an id only another thread has says
there is no such page, and no other thread's text ever appears), nothing is lost per thread, page
ids are unique per thread. Two runs at once on one thread make two branches: neither loses a page,
and no page number means two different pages on one branch.

``python -m tests.integration.test_concurrency`` runs the larger campaign (more threads and turns) and prints it.
"""

from __future__ import annotations

import asyncio
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langmem_paging import InMemoryBM25Index, Pager, PageStore, PagingConfig, PagingState
from tests.support.postgres_server import fresh_database
from tests.support.scenario import (
    MAX_TOKENS,
    build_agent,
    check_branch,
    probe_text,
    prompt_tokens,
    turn_message,
    turn_text,
)

THREADS = 50
_SAID_BY = re.compile(r"\[(user\d\d)\] Turn")  # every user message starts so; a probe only names another


def thread_name(i: int) -> str:
    return f"user{i:02d}"


def turns_of(i: int, base: int) -> int:
    """Threads of different lengths: every tenth is long, and owns page numbers the others never reach."""
    return base + i % 7 + (2 * base if i % 10 == 9 else 0)


def _config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


# -- 50 threads at once ------------------------------------------------------------------------------


async def _open(backend: str, tmp_path: Path, postgres_uri: str | None, stack):
    """(store, checkpointer) for `backend`, entered on `stack` (an AsyncExitStack)."""
    if backend == "sqlite-async":
        import sqlite3

        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.store.sqlite import SqliteStore

        store = SqliteStore(
            sqlite3.connect(tmp_path / "store.sqlite", check_same_thread=False, isolation_level=None)
        )
        store.setup()
        saver = await stack.enter_async_context(
            AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite"))
        )
        return store, saver
    if backend == "postgres-async":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres import AsyncPostgresStore

        uri = fresh_database(postgres_uri, "concurrency")
        pool = {"min_size": 2, "max_size": 10}
        store = await stack.enter_async_context(AsyncPostgresStore.from_conn_string(uri, pool_config=pool))
        saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(uri))
        await store.setup()
        await saver.setup()
        return store, saver
    raise ValueError(backend)


def assert_own_history(name: str, history: list, probe: tuple[str, str] | None) -> None:
    """No text of another thread in `name`'s history; its probe for another thread's page id (`probe`:
    page id, other thread) was answered that no such page exists here."""
    for message in history:
        leaked = set(_SAID_BY.findall(str(message.content))) - {name}
        assert not leaked, f"{name} holds text of {leaked}: {str(message.content)[:200]}"
    if probe is not None:
        answer = next(m for m in reversed(history) if isinstance(m, ToolMessage))
        assert f"No such page or cluster in this conversation: {probe[0]}" in str(answer.content), (
            f"{name}: {str(answer.content)[:300]}"
        )


async def many_threads(
    store, saver, *, threads: int, base_turns: int, sync_pool: bool = False, max_tokens: int = MAX_TOKENS
) -> dict:
    """Drive `threads` conversations at once, then a probe turn each; check every thread."""
    agent, paging, model = build_agent(store, saver, max_tokens=max_tokens)
    names = [thread_name(i) for i in range(threads)]
    lengths = {name: turns_of(i, base_turns) for i, name in enumerate(names)}

    def sync_conversation(name: str) -> None:
        for n in range(lengths[name]):
            agent.invoke({"messages": [turn_message(n, name)]}, _config(name))

    async def conversation(name: str) -> None:
        for n in range(lengths[name]):
            await agent.ainvoke({"messages": [turn_message(n, name)]}, _config(name))

    if sync_pool:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(sync_conversation, names))
    else:
        await asyncio.gather(*(conversation(name) for name in names))

    async def values_of(name: str) -> dict:
        if sync_pool:  # a sync checkpointer (SqliteSaver) has no async methods
            return (await asyncio.to_thread(agent.get_state, _config(name))).values
        return (await agent.aget_state(_config(name))).values

    # Each thread asks for a page number that exists only in other threads, and for another thread's words.
    heads = {name: await values_of(name) for name in names}
    next_page = {name: PagingState.from_value(v.get("paging")).next["p"] for name, v in heads.items()}
    probes = {}
    for i, name in enumerate(names):
        other = max(names, key=lambda o: next_page[o])
        if next_page[other] - 1 >= next_page[name] + 4:  # beyond what the probe turn's own paging takes
            probes[name] = (f"p{next_page[other] - 1}", names[(i + 1) % threads])
    assert len(probes) >= threads // 3, f"too few threads lack another's page ids: {next_page}"

    async def probe(name: str) -> None:
        page_id, other = probes[name]
        text = probe_text(lengths[name], name, page_ids=[page_id], query=f"Zarko3-{other} beehives")
        message = HumanMessage(text, id=f"{name}-probe")
        if sync_pool:
            await asyncio.to_thread(agent.invoke, {"messages": [message]}, _config(name))
        else:
            await agent.ainvoke({"messages": [message]}, _config(name))

    await asyncio.gather(*(probe(name) for name in probes))

    page_store = PageStore(store)
    pages_per_thread = {}
    for name in names:
        values = await values_of(name)
        said = [turn_text(n, name) for n in range(lengths[name])]
        if name in probes:
            page_id, other = probes[name]
            said.append(probe_text(lengths[name], name, page_ids=[page_id], query=f"Zarko3-{other} beehives"))
        history = await asyncio.to_thread(check_branch, page_store, name, values, said)
        assert_own_history(name, history, probes.get(name))
        stored = await page_store.alist_pages(name)
        ids = [p.id for p in stored]
        assert len(ids) == len(set(ids))
        pages_per_thread[name] = len(stored)
    over = [t for p in model.prompts if (t := prompt_tokens(p, paging)) > max_tokens]
    assert not over, f"prompts over budget: {over[:5]}"
    return {
        "threads": threads,
        "turns": sum(lengths.values()) + len(probes),
        "probes": len(probes),
        "pages": sum(pages_per_thread.values()),
        "min pages per thread": min(pages_per_thread.values()),
        "model calls": len(model.prompts),
    }


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite-async", "sqlite-sync-pool", "postgres-async"])
async def test_fifty_threads_at_once_never_read_each_others_pages(backend, tmp_path, request):
    from contextlib import AsyncExitStack

    postgres_uri = request.getfixturevalue("postgres_uri") if backend.startswith("postgres") else None
    async with AsyncExitStack() as stack:
        if backend == "sqlite-sync-pool":
            import sqlite3

            from langgraph.checkpoint.sqlite import SqliteSaver
            from langgraph.store.sqlite import SqliteStore

            store = SqliteStore(
                sqlite3.connect(tmp_path / "s.sqlite", check_same_thread=False, isolation_level=None)
            )
            store.setup()
            saver = SqliteSaver(sqlite3.connect(tmp_path / "c.sqlite", check_same_thread=False))
            summary = await many_threads(
                store, saver, threads=8, base_turns=6, max_tokens=560, sync_pool=True
            )
        else:
            store, saver = await _open(backend, tmp_path, postgres_uri, stack)
            summary = await many_threads(store, saver, threads=THREADS, base_turns=6, max_tokens=560)
    print(summary)
    assert summary["min pages per thread"] > 0, summary


# -- two runs at once on one thread ------------------------------------------------------------------


def _branch_message(n: int, branch: str) -> HumanMessage:
    return HumanMessage(f"{turn_text(n)} ({branch})", id=f"t-h{n}-{branch}")


async def _head_after(agent, human_id: str) -> dict:
    """The config of the newest finished checkpoint whose messages hold `human_id` (a branch's head)."""
    async for snapshot in agent.aget_state_history(_config("t")):
        if not snapshot.next and any(m.id == human_id for m in snapshot.values.get("messages", [])):
            return snapshot.config
    raise AssertionError(f"no checkpoint holds {human_id}")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_two_runs_at_once_on_one_thread_lose_no_page_and_reuse_no_id(mode):
    store, saver = InMemoryStore(), InMemorySaver()
    agent, paging, model = build_agent(store, saver, max_tokens=676)  # 800 less the recall schema's 124
    for n in range(12):  # the next turn forms and evicts the first pages
        await agent.ainvoke({"messages": [turn_message(n)]}, _config("t"))
    fork = (await agent.aget_state(_config("t"))).config
    said = [turn_text(n) for n in range(12)]

    async def branch(name: str) -> dict:
        head, values, texts = fork, None, list(said)
        for n in range(12, 24):
            message = _branch_message(n, name)
            texts.append(str(message.content))
            if mode == "async":
                values = await agent.ainvoke({"messages": [message]}, head)
            else:
                values = await asyncio.to_thread(agent.invoke, {"messages": [message]}, head)
            head = await _head_after(agent, message.id)
        return {"values": values, "said": texts}

    a, b = await asyncio.gather(branch("A"), branch("B"))
    page_store = PageStore(store)
    histories = [check_branch(page_store, "t", r["values"], r["said"]) for r in (a, b)]
    owned = [PagingState.from_value(r["values"]["paging"]) for r in (a, b)]
    shared = [p for p in await page_store.alist_pages("t") if all(o.owns("p", int(p.id[1:])) for o in owned)]
    private = [
        p for p in await page_store.alist_pages("t") if sum(o.owns("p", int(p.id[1:])) for o in owned) == 1
    ]
    assert shared and private, "the branches should share the pages formed before they split, and own others"
    assert {m.id for m in histories[0]} & {m.id for m in histories[1]}  # the common prefix
    assert all(prompt_tokens(p, paging) <= MAX_TOKENS for p in model.prompts)


# -- two processes (workers) on one thread: no lock between them -----------------------------------------


class _WritesAfterBothRead:
    """A store whose first page writes wait until two writers have both reserved (two workers racing)."""

    def __init__(self, base) -> None:
        from langmem_paging.testing import FaultInjectingStore

        self.store = FaultInjectingStore(base)
        self.barrier = threading.Barrier(2, timeout=5)
        original = self.store.batch

        def batch(ops):
            ops = list(ops)
            if any(isinstance(op, PutOp) and op.namespace[-1] == "pages" for op in ops):
                try:
                    self.barrier.wait()
                except threading.BrokenBarrierError:
                    pass  # one writer at a time after all (a store that serializes them): fine
            return original(ops)

        self.store.batch = batch


def test_two_workers_stepping_two_branches_of_one_thread_at_once_keep_both_pages():
    """Two Pagers without a shared lock (two middleware instances; for processes see
    tests/integration/test_workers.py) step two branches of one thread at once: both read p1 free;
    the numbers are claimed atomically, so the second writer takes other numbers."""
    racing = _WritesAfterBothRead(InMemoryStore())
    config = PagingConfig(max_tokens=300, boundary="fixed_2", policy="fifo")
    workers = [Pager(config, PageStore(racing.store), index=InMemoryBM25Index()) for _ in range(2)]
    views = {
        name: [
            *(
                m
                for n in range(20)
                for m in (
                    HumanMessage(
                        f"[{name}] fact {n}: Zarko{n}-{name} keeps {n} beehives near Lake Bled{n}.",
                        id=f"{name}-h{n}",
                    ),
                    AIMessage(f"Noted {n} for {name}.", id=f"{name}-a{n}"),
                )
            ),
            HumanMessage("And now?", id=f"{name}-q"),
        ]
        for name in ("A", "B")
    }  # two branches of thread "t", forked before anything was paged
    results, errors = {}, []

    def step(worker, name):
        try:
            results[name] = worker.step(views[name], None, "t")
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=step, args=(w, name)) for w, name in zip(workers, views, strict=False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and all(results[name].pages for name in views), (errors, results.keys())
    for name, result in results.items():
        for page in result.pages:
            stored = PageStore(racing.store.store).get("t", page.id)
            assert stored is not None and stored.digest == page.digest, (
                f"branch {name}'s {page.id} was replaced by another branch's page"
            )


if __name__ == "__main__":
    import contextlib
    import json
    import tempfile

    from tests.support.postgres_server import running_postgres

    async def campaign() -> None:
        for backend in ("sqlite-async", "postgres-async"):
            with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as sync_stack:
                uri = sync_stack.enter_context(running_postgres()) if backend.startswith("postgres") else None
                async with contextlib.AsyncExitStack() as stack:
                    store, saver = await _open(backend, Path(tmp), uri, stack)
                    summary = await many_threads(store, saver, threads=100, base_turns=30)
                    print(json.dumps({"backend": backend, **summary}))

    asyncio.run(campaign())
