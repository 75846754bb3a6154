"""`verify` on a thread two runs wrote at once: LangGraph's last write wins, so one run's turns
leave the latest branch. The branch itself rebuilds lossless; verify warns, naming the ids that
only checkpoints off the branch held (library and CLI). Serialized by the per-thread advisory lock
(tools/deploy/thread_lock.py), the same two runs lose nothing and verify warns of nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging import PageStore, create_paging_agent
from langmem_paging.cli import main
from langmem_paging.ops import load_branches, verify_thread
from langmem_paging.testing import ScriptedChatModel
from tests.support.postgres_server import fresh_database
from tools.deploy.thread_lock import thread_lock

THREAD = "shared"


def _model(barrier: threading.Barrier) -> ScriptedChatModel:
    """Answers each turn; a concurrent turn waits (in the model, between its input checkpoint and
    its answer) until the other run is there too, or 2 s."""

    def answer(messages):
        if str(messages[-1].content).startswith("together"):
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return AIMessage(f"Noted: {str(messages[-1].content)[:30]}")

    return ScriptedChatModel(responses=[answer] * 100)


async def _two_runs_at_once(uri: str, locked: bool) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore

    async with (
        AsyncPostgresStore.from_conn_string(uri) as store,
        AsyncPostgresSaver.from_conn_string(uri) as saver,
    ):
        await store.setup()
        await saver.setup()
        barrier = threading.Barrier(2, timeout=2)
        agent = create_paging_agent(
            _model(barrier), store=store, checkpointer=saver, max_tokens=400, boundary="fixed_2"
        )
        config = {"configurable": {"thread_id": THREAD}}

        async def turn(text: str, key: str) -> None:
            async with thread_lock(uri, THREAD) if locked else contextlib.nullcontext():
                await agent.ainvoke({"messages": [HumanMessage(text, id=key)]}, config)

        for i in range(8):  # enough for pages to form first
            await turn(f"turn {i}: Mirela keeps {100 + i} beehives near Bled{i}.", f"h{i}")
        await asyncio.gather(turn("together A: the orchard", "a"), turn("together B: the meadow", "b"))


@pytest.mark.parametrize("locked", [False, True], ids=["no-lock", "advisory-lock"])
def test_verify_warns_of_turns_lost_to_a_concurrent_run(postgres_uri, locked, capsys):
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    uri = fresh_database(postgres_uri, f"verify_off_branch_{locked}")
    asyncio.run(_two_runs_at_once(uri, locked))
    with PostgresStore.from_conn_string(uri) as store, PostgresSaver.from_conn_string(uri) as saver:
        branches = load_branches(saver, THREAD)
        result = verify_thread(PageStore(store), THREAD, branches.latest, others=branches.others)
    assert result.lossless, result.issues  # the latest branch itself rebuilds whole
    on_branch = {m.id for s in branches.latest for m in s.messages}
    assert result.pages_used, "pages formed before the concurrent turns"
    if locked:
        assert {"a", "b"} <= on_branch
        assert result.off_branch == [] and result.warnings == []
    else:
        lost = [key for key in ("a", "b") if key not in on_branch]
        assert lost, "one run's turn left the latest branch (both runs waited in the model together)"
        assert set(lost) <= set(result.off_branch)
        assert [w.code for w in result.warnings] == ["off-branch"]
        assert all(key in result.warnings[0].detail for key in lost)
    code = main(["verify", THREAD, "--store", uri, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["off_branch"] == result.off_branch
    main(["verify", THREAD, "--store", uri])
    text = capsys.readouterr().out
    assert ("warning: off-branch:" in text) is (not locked), text


def test_verify_after_forgetting_a_message_a_recall_result_showed():
    """A recall result that showed a page is shrunk by `forget` and rebuilt from the scrubbed page:
    it differs from what the checkpoint held by the forgotten text only, which is no loss (found by
    tools/bench_deploy.py: verify said NOT LOSSLESS, 'changed: message recall-...')."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from graphs.deploy_graph import build
    from langmem_paging.ops import load_snapshots

    store, saver = InMemoryStore(), InMemorySaver()
    agent = build(True, store=store, checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    texts = [
        f"turn {i}: Mirela keeps {100 + i} beehives near Bled{i}." for i in range(14)
    ]  # p1 formed by turn 12
    texts[1] += " My locker code is Kestrel42."
    for i, text in enumerate([*texts, "RECALL p1", "one more turn"]):
        agent.invoke({"messages": [HumanMessage(text, id=f"h{i}")]}, config)
    held = [m for s in load_snapshots(saver, "t") for m in s.messages]
    assert any(m.type == "tool" and "Kestrel42" in str(m.content) for m in held), "the recall showed it"
    PageStore(store).forget("t", "h1", graph=agent)
    result = verify_thread(PageStore(store), "t", load_snapshots(saver, "t"))
    assert result.lossless, result.issues
    assert "h1" in result.forgotten
