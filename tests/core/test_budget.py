"""The budget holds: paging never makes the context bigger, a prompt is over budget only with
`over_budget` reported (and one warning per thread), and what could free tokens is evicted."""

from __future__ import annotations

import warnings

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware, page_messages
from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.testing import ScriptedChatModel
from tests.support.harness import COUNTER, replay
from tests.support.scenario_helpers import FACTS, page_at_user_turns


def test_the_over_budget_warning_comes_once_per_thread_and_matches_what_is_sent():
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=320, store=store)
    model = ScriptedChatModel(responses=["ok"] * 6)
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "big"}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            agent.invoke({"messages": ["word " * 400]}, config)  # the newest user message alone is over
    over = [w for w in caught if "needs" in str(w.message) and issubclass(w.category, RuntimeWarning)]
    assert len(over) == 1
    state = agent.get_state(config).values
    assert state["paging"]["tokens"] == COUNTER(model.prompts[-1])  # the count is of what was sent


def test_eviction_never_makes_the_context_bigger():
    tiny = [HumanMessage("ok", id=f"h{i}") if i % 2 == 0 else AIMessage("k", id=f"a{i}") for i in range(40)]
    run = replay(tiny, max_tokens=60, boundary="fixed_1", text_counter=COUNTER)
    for result in run.steps:
        assert result.tokens <= max(result.tokens_before, 60)


def test_a_warm_digest_never_puts_the_context_over_budget():
    """Promotion to warm was sized by the digest text alone: the digest's header line and message
    framing put the context a few tokens over (406 for 400 with 164 protected; seen as 2,004 for
    2,000 in the scale benchmark)."""
    from langmem_paging.strategies.tiers import UtilityScoring
    from tests.support.conversations import conversation

    over = []
    for seed in (1, 4):
        for budget in (400, 700, 1200):
            out = replay(
                conversation(60, seed=seed, tools=False, system=False),
                max_tokens=budget,
                boundary="fixed_4",
                tiers=UtilityScoring(digest_ratio=0.5),
            )
            over += [
                (seed, budget, k, s.tokens)
                for k, s in enumerate(out.steps)
                if s.tokens > budget and s.protected_tokens <= budget
            ]
    assert not over


def test_a_page_whose_recall_result_this_step_shrank_can_still_be_evicted():
    """Shrinking a recall result inside a page formed later in the step took the page out of the
    candidates: the prompt stayed over budget while an 800-token page could go."""
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
    assert not result.over_budget and not result.state.pages


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


def test_eviction_never_grows() -> None:
    """Short messages are never replaced by longer bookmarks."""
    history = []
    for i in range(60):
        history += [HumanMessage("ok", id=f"h{i}"), AIMessage("k", id=f"a{i}")]
    for result in page_at_user_turns(history, max_tokens=100, boundary="fixed_1"):
        assert result.tokens_before <= 100 or result.tokens <= result.tokens_before, (
            f"{result.tokens_before} -> {result.tokens}"
        )
