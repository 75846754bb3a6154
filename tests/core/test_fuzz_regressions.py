"""Regression scenarios a fuzzing campaign found in the paging step (`page_messages`, the `Pager`) and the
rebuilt history: one deterministic test per bug.

Each was a `tools/fuzz.py` targeted scenario; the random campaigns are `python tools/fuzz.py`. The scenarios
whose bug already had the same test in `tests/core/test_regressions.py` are tested there only:
``library_metadata_user_turn_protected`` (B4: `test_a_user_message_with_copied_bookmark_metadata_is_still_the_users`),
``tool_result_stub_never_longer`` (B6: `test_a_tool_result_just_over_the_large_share_is_not_replaced_by_a_longer_stub`),
``rebuild_keeps_state_order`` (B7: `test_reconstruct_history_keeps_the_order_of_a_rewritten_list`),
``fork_keeps_other_branch_pages`` (B8: `test_a_page_edited_on_one_branch_keeps_the_other_branchs_record`),
``recall_note_escaped`` (B10: `test_a_recall_note_echoing_what_the_model_sent_is_escaped`),
``remove_all_drops_old_clusters`` (B11: `test_remove_all_drops_the_removed_historys_clusters`),
``recall_store_failure_recovers`` (B12: `test_a_store_error_during_recall_comes_back_as_an_error_tool_message`),
``tool_count_cache_follows_the_tool`` (B13: `test_tool_token_counts_follow_the_tool_not_its_address`),
``shrunk_copy_keeps_its_page_evictable`` (B14: `test_a_page_whose_recall_result_this_step_shrank_can_still_be_evicted`).
"""

from __future__ import annotations

import time

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    PagingConfig,
    page_messages,
    reconstruct_history,
)
from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.integrations.pager import Pager
from langmem_paging.storage.page_store import PageStore
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
        [
            HumanMessage(
                FACTS[i],
                id=f"h{i}",
                additional_kwargs={METADATA_KEY: {"bookmark": "p1"}} if i in (9, 12) else {},
            ),
            AIMessage("ok", id=f"a{i}"),
        ]
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
