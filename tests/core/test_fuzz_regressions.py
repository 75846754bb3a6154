"""Regression scenarios a fuzzing campaign found in the paging step (`page_messages`, the `Pager`) and the
rebuilt history: one deterministic test per bug.

Each was a `tools/fuzz.py` targeted scenario; the random campaigns are `python tools/fuzz.py`.
"""

from __future__ import annotations

import time

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    PagingConfig,
    PagingState,
    TokenCounter,
    page_messages,
    reconstruct_history,
)
from langmem_paging.messages import METADATA_KEY
from langmem_paging.pager import Pager
from langmem_paging.store import PageStore
from tests.support.scenario_helpers import FACTS, page_at_user_turns, pure_thread, step_exchanges
from tools.fuzzing.oracles import same_messages
from tools.fuzzing.vocabulary import COUNTER, VOCAB


def test_over_budget_flag() -> None:
    """Prompts over budget only with over_budget reported (pinned and huge user turns)."""
    history = [SystemMessage("sys " * 50, id="sys")]
    for i in range(10):
        history.append(
            HumanMessage(
                FACTS[i] * (1 + i % 3),
                id=f"h{i}",
                additional_kwargs={METADATA_KEY: {"pinned": True}} if i % 4 == 0 else {},
            )
        )
        history.append(AIMessage("ok", id=f"a{i}"))
    for result in page_at_user_turns(history, max_tokens=120, boundary="fixed_1"):
        assert result.tokens <= 120 or result.over_budget, f"{result.tokens} > 120 with over_budget=False"


def test_unanswered_call_keeps_paging() -> None:
    """One unanswered tool call does not stop paging for the rest of the thread."""
    history = [SystemMessage("sys", id="sys")]
    for i in range(30):
        history.append(HumanMessage(FACTS[i], id=f"h{i}"))
        if i == 3:
            history.append(
                AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "open"}], id="dangling")
            )
        history.append(AIMessage(f"ok {i}", id=f"a{i}"))
    steps = page_at_user_turns(history, max_tokens=150, boundary="fixed_2")
    over = sum(result.tokens > 150 for result in steps)
    assert not over, f"{over} steps over budget after the unanswered call"


def test_eviction_never_grows() -> None:
    """Short messages are never replaced by longer bookmarks."""
    history = []
    for i in range(60):
        history += [HumanMessage("ok", id=f"h{i}"), AIMessage("k", id=f"a{i}")]
    for result in page_at_user_turns(history, max_tokens=100, boundary="fixed_1"):
        assert result.tokens_before <= 100 or result.tokens <= result.tokens_before, (
            f"{result.tokens_before} -> {result.tokens}"
        )

def test_bookmark_linear_time() -> None:
    """Bookmarking a 200 KB message is not quadratic (it takes seconds at most)."""
    big = HumanMessage(" ".join(VOCAB[i % len(VOCAB)] + str(i % 97) for i in range(30_000)), id="big")
    msgs = [big, AIMessage("ok", id="a0"), HumanMessage("next", id="h1")]
    t0 = time.perf_counter()
    page_messages(msgs, max_tokens=200, boundary="fixed_1", text_counter=COUNTER)
    elapsed = time.perf_counter() - t0
    assert elapsed <= 20, f"{elapsed:.1f} s for a {len(big.content) // 1000} KB message"

def test_spoofed_bookmark_metadata() -> None:
    """A user message carrying bookmark metadata does not make reconstruct_history raise or lose it."""
    store = InMemoryStore()
    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
    exchanges = [
        [HumanMessage(FACTS[i], id=f"h{i}",
                      additional_kwargs={METADATA_KEY: {"bookmark": "p1"}} if i in (9, 12) else {}),
         AIMessage("ok", id=f"a{i}")]
        for i in range(14)
    ]
    full: list[BaseMessage] = [m for exchange in exchanges for m in exchange]
    value, msgs = step_exchanges(pager, exchanges)
    rebuilt = reconstruct_history(
        msgs,
        lambda p: pager.page_store.get("t", p),
        COUNTER,
        clusters=lambda c: pager.page_store.get_cluster("t", c),
        state=value,
    )
    diff = same_messages(rebuilt, full)
    assert not diff, f"not lossless: {diff}"


def test_small_pages_still_evicted() -> None:
    """Pages no smaller than their bookmark are still paged out (into a cluster) when no cluster exists yet:
    the context stays within budget unless what is protected explains it."""
    for result, *_ in pure_thread(60, max_tokens=400, boundary="fixed_1"):
        assert not result.over_budget or result.protected_tokens > 400 * 0.5, (
            f"{result.tokens} tokens > 400 with {result.protected_tokens} protected; "
            f"{len(result.state.pages)} resident pages, none evicted"
        )

def test_direct_eviction_keeps_a_pointer() -> None:
    """A page smaller than its bookmark, evicted straight into a cluster, is in the cluster right away:
    the history rebuilds losslessly after every step."""
    long = (
        "My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}, and he sells honey "
        "every Sunday at the market in Radovljica{i}."
    )
    state, paging, pages, nodes, full = [], None, {}, {}, []
    for i in range(8):
        new = [
            HumanMessage(long.format(i=i) if i < 6 else f"ok {i}", id=f"h{i}"),
            AIMessage(f"Noted {i}.", id=f"a{i}"),
        ]
        full += new
        state = add_messages(state, new)
        result = page_messages(
            state, max_tokens=120, boundary="fixed_1", state=paging, bookmark_share=0.7, text_counter=COUNTER
        )
        state, paging = result.apply(state), result.state.to_value()
        pages.update({p.id: p for p in result.pages})
        nodes.update({n.id: n for n in result.nodes})
        rebuilt = reconstruct_history(state, pages, COUNTER, clusters=nodes, state=paging)
        assert rebuilt == full, (
            f"turn {i}: missing {[m.id for m in full if m not in rebuilt]} (evicted {result.evicted})"
        )


def test_tool_result_stub_never_longer() -> None:
    """A tool result paged on arrival never grows the context (the stub is shorter than the result)."""
    call = {"name": "lookup", "args": {"q": "bicycle saffron recipe cobalt oslo orchard"}, "id": "c1"}
    msgs = [
        HumanMessage("look it up", id="h1"),
        AIMessage("", tool_calls=[call], id="t1"),
        ToolMessage(
            "orchard lake camping garden sunrise copper cobalt festival orchard mountain bicycle garden "
            "tundra adoption violin puppy quito lake meadow harbor glacier canyon tundra saffron cobalt",
            tool_call_id="c1",
            name="lookup",
            id="r1",
        ),
    ]
    result = page_messages(msgs, max_tokens=60, text_counter=COUNTER)
    assert result.tokens <= result.tokens_before, f"{result.tokens_before} -> {result.tokens}"


def test_rebuild_keeps_state_order() -> None:
    """With nothing paged out, reconstruct_history returns the state's messages as they are, also after
    the list was rewritten with REMOVE_ALL_MESSAGES (a summary before the kept messages)."""
    msgs = [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1")]
    result = page_messages(msgs, max_tokens=1000, text_counter=COUNTER)
    msgs = add_messages(
        msgs, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("Summary so far", id="s"), *msgs]
    )
    msgs = add_messages(msgs, [HumanMessage("q2", id="h2")])
    result = page_messages(msgs, max_tokens=1000, state=result.state, text_counter=COUNTER)
    rebuilt = reconstruct_history(result.view, {}, COUNTER, state=result.state)
    assert rebuilt == result.view, f"{[m.id for m in rebuilt]} != {[m.id for m in result.view]}"


def test_fork_keeps_other_branch_pages() -> None:
    """A resident page re-stored after an edit on one branch does not change what another branch rebuilds."""
    pager = Pager(PagingConfig(max_tokens=600, boundary="fixed_2"), PageStore(InMemoryStore()))
    long = (
        "Fact {i}: Zarko{i} keeps {i} beehives near Lake Bled{i}. "
        + "He sells the honey at the Sunday market "
        "in Radovljica{i} and teaches beekeeping to children every summer. " * 3
    )

    def turn(msgs, value, full, i):
        new = [HumanMessage(long.format(i=i), id=f"h{i}"), AIMessage(f"Noted fact {i}.", id=f"a{i}")]
        msgs, full = add_messages(msgs, new[:1]), full + new
        result = pager.step(msgs, value, "t")
        return add_messages(result.apply(msgs), new[1:]), result.state.to_value(), full

    def rebuilt(msgs, value):
        return reconstruct_history(
            msgs,
            lambda p: pager.page_store.get("t", p),
            COUNTER,
            clusters=lambda c: pager.page_store.get_cluster("t", c),
            state=value,
        )

    msgs, value, full, i = [], {}, [], 0
    while not PagingState.from_value(value).pages and i < 40:
        msgs, value, full = turn(msgs, value, full, i)
        i += 1
    page_id, page = next(iter(PagingState.from_value(value).pages.items()))
    fork = (list(msgs), value, list(full))
    victim = page.ids[0]
    msgs_a, value_a, full_a = (
        add_messages(msgs, [RemoveMessage(id=victim)]),
        value,
        [m for m in full if m.id != victim],
    )
    for j in range(i, i + 8):
        msgs_a, value_a, full_a = turn(msgs_a, value_a, full_a, j)
    msgs_b, value_b, full_b = fork
    for j in range(i + 100, i + 108):
        msgs_b, value_b, full_b = turn(msgs_b, value_b, full_b, j)
    got = rebuilt(msgs_b, value_b)
    assert got == full_b, (
        f"branch B lost {[m.id for m in full_b if m not in got]} ({page_id} re-stored by branch A)"
    )

def test_library_metadata_user_turn_protected() -> None:
    """A user message carrying `langmem_paging` metadata (say, copied from another thread's state) is still
    the newest user message: a tool loop does not page it out."""
    question = "What did Zarko3 say about the honey market in Radovljica and the beekeeping lessons? " * 2
    spoofed = HumanMessage(question, id="q", additional_kwargs={METADATA_KEY: {"bookmark": "p1"}})
    history = [HumanMessage(FACTS[0], id="h0"), AIMessage("ok", id="a0"), spoofed]
    for k in range(6):  # the model looks things up before answering
        history += [
            AIMessage(
                "", tool_calls=[{"name": "lookup", "args": {"q": f"Zarko{k}"}, "id": f"c{k}"}], id=f"t{k}"
            ),
            ToolMessage(
                f"Zarko{k} keeps bees near Lake Bled{k}. " * 5,
                tool_call_id=f"c{k}",
                name="lookup",
                id=f"r{k}",
            ),
        ]
    result = page_messages(history, max_tokens=200, boundary="fixed_2", text_counter=COUNTER)
    assert any(m.id == "q" and m.content == question for m in result.view), (
        f"the question was paged out: {[str(m.content)[:24] for m in result.view]}"
    )


def test_remove_all_drops_old_clusters() -> None:
    """After REMOVE_ALL_MESSAGES (a summary replaces the history), the removed history's clusters do not come
    back: reconstruct_history holds only the summary and the new turn."""
    options = {"max_tokens": 200, "boundary": "fixed_2", "bookmark_share": 0.05, "text_counter": COUNTER}
    state, paging, pages, nodes = [], None, {}, {}
    for i in range(12):
        state = add_messages(state, [HumanMessage(FACTS[i], id=f"h{i}")])
        result = page_messages(state, state=paging, **options)
        state, paging = result.apply(state), result.state.to_value()
        pages.update({p.id: p for p in result.pages})
        nodes.update({n.id: n for n in result.nodes})
        state = add_messages(state, [AIMessage(f"Noted {i}.", id=f"a{i}")])
    summary = HumanMessage(
        "Summary: the user told me about " + "neighbours who keep bees near Lake Bled, " * 14, id="s"
    )
    question = HumanMessage(
        "Now tell me about " + "glaciers and meltwater lakes in the Julian Alps, " * 6, id="q"
    )
    state = add_messages(state, [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, question])
    result = page_messages(state, state=paging, **options)
    state, paging = result.apply(state), result.state.to_value()
    pages.update({p.id: p for p in result.pages})
    nodes.update({n.id: n for n in result.nodes})
    rebuilt = [m.id for m in reconstruct_history(state, pages, COUNTER, clusters=nodes, state=paging)]
    assert rebuilt == ["s", "q"], f"rebuilt {rebuilt}; the model sees {[str(m.content)[:40] for m in state]}"


def test_tool_count_cache_follows_the_tool() -> None:
    """TokenCounter.count_tools never gives a new tool the count of a collected tool that had the same id."""
    import gc

    from langchain_core.tools import StructuredTool

    def make(words: int):
        def lookup(q: str) -> str:
            return q

        return StructuredTool.from_function(
            func=lookup, name="lookup", description="Look things up. " * words
        )

    counter = TokenCounter()
    wrong = 0
    gc.freeze()  # what exists now is not scanned: each collection below takes milliseconds
    try:
        for _ in range(60):  # about one in five lands on the freed address: 60 make a miss all but certain
            small = make(1)
            counter.count_tools([small])
            del small
            gc.collect()
            big = make(300)  # often allocated where `small` was
            wrong += counter.count_tools([big]) != TokenCounter().count_tools([big])
            del big
            gc.collect()
    finally:
        gc.unfreeze()
    assert not wrong, f"{wrong} of 60 new tools counted as the collected tool at the same address"


def test_shrunk_copy_keeps_its_page_evictable() -> None:
    """A step that shrinks a recall result inside a formed page can still evict that page: no over-budget
    prompt while an 800-token page could go."""
    recalled = ToolMessage(
        '<page id="p1">\n<message from="user">' + "old notes about bees " * 40 + "</message>\n</page>",
        tool_call_id="c1",
        name="recall",
        id="recall-1",
        artifact={METADATA_KEY: {"recalled": ["p1"], "spec": {}}},
    )
    history = [
        HumanMessage("What did I say about bees?", id="h0"),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1"]}, "id": "c1"}], id="t1"),
        recalled,
        AIMessage("Here is everything about bees. " + "Bees make honey in the summer. " * 110, id="a1"),
        HumanMessage("Thanks. Now something else.", id="h2"),
    ]
    result = page_messages(history, max_tokens=900, boundary="fixed_5", policy="lfu", text_counter=COUNTER)
    assert not result.over_budget, (
        f"{result.tokens} > 900 tokens with {result.protected_tokens} protected; resident "
        f"{ {k: v.tokens for k, v in result.state.pages.items()} }"
    )
