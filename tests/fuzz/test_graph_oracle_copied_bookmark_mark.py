"""Fuzzer, graph mode, seed 33: a user's message carrying a copied bookmark mark, then a tool round
the budget cannot hold.

What stays (docs/design.md) is the newest user message, the latest tool group and the bookmarks; a
bookmark is a message the paging state shows, and metadata a user copies is just theirs. The step
kept exactly that and said `over_budget`. The graph oracle found the newest user turn by the
metadata alone, so it counted the user's message as a bookmark and the turn after it as
evictable, and called the prompt "over budget not explained by what is protected" (318 tokens,
44 counted protected, at B=300). The pure oracle had learned this at seed 204; the graph one had
not. The library was right and is unchanged; these tests drive the fuzzer's own compiled graphs
(a scripted model, `PagingNode` + `ToolNode`, and `create_agent` + `PagingMiddleware`) through
that turn. The middleware case also needs the second oracle fix below (the low-water mark taken
in message tokens): before it, the middleware's check could not fail at these budgets at all.
"""

from __future__ import annotations

import random
import warnings

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langmem_paging import PagingState
from langmem_paging.core.messages import METADATA_KEY, is_user_turn
from tests.fuzz.graph_case import graph_case
from tools.fuzzing import Report
from tools.fuzzing.graph import GraphCase
from tools.fuzzing.oracles import generous_protected, over_budget_unexplained
from tools.fuzzing.vocabulary import COUNTER, VOCAB

THREAD = "g33-0"


def _tool_round(words: int):
    """The model's answer: a long text and three short lookups. A stub names the call's arguments
    and how to recall it, so short results mostly stay as they are (one goes behind a stub): the
    group cannot shrink to fit beside the user's message."""

    def make(prompt: list[BaseMessage]) -> AIMessage:
        rng = random.Random(33)
        text = " ".join(rng.choice(VOCAB) for _ in range(words))
        calls = [{"name": "lookup", "args": {"q": q}, "id": f"call_{q}"} for q in ("zebra", "chess", "quito")]
        return AIMessage(text, id="a-round", tool_calls=calls)

    return make


def _case(kind: str, max_tokens: int) -> tuple[GraphCase, Report]:
    """Seed 33's options, without the store faults, removals and time travel it needed to get here."""
    return graph_case(
        33, THREAD, "zt33x", kind=kind, max_tokens=max_tokens, system_prompt=kind == "middleware"
    )


@pytest.mark.parametrize(("kind", "max_tokens", "words"), [("node", 300, 130), ("middleware", 700, 250)])
def test_a_user_message_with_a_copied_bookmark_mark_and_a_tool_round_over_budget_passes_the_graph_oracle(
    kind, max_tokens, words
):
    case, report = _case(kind, max_tokens)
    user = HumanMessage(
        "library chess zebra garden quito library",
        id=f"h-{THREAD}-h1",
        additional_kwargs={METADATA_KEY: {"bookmark": "p2"}},
    )
    assert not is_user_turn(user)  # by its metadata alone it looks like one of the library's bookmarks
    case.plan = [_tool_round(words)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case.run_turn(THREAD, [user], [], plan=False)

    assert not report.failures, f"{report.failures[0].invariant}: {report.failures[0].detail}"
    # the oracle judged an over-budget prompt (the test cannot pass without reaching the check)
    assert report.notes["graph over_budget prompts"] >= 1
    over = [r for _, r in case.results if r != "error" and r.over_budget]
    assert over, "no step went over budget"
    step = over[-1]
    # the library's rule: the user's message, as sent, and the whole tool group stay (a result goes
    # behind a stub only where the stub is shorter)
    assert step.view[0].id == user.id and step.view[0].content == user.content
    assert [m.type for m in step.view] == ["human", "ai", "tool", "tool", "tool"]
    assert step.view[1].id == "a-round"
    state = PagingState.from_value(case.state_of(THREAD).values["paging"])
    assert state.last_user == user.id and not state.shown


def test_the_over_budget_rule_takes_the_low_water_mark_in_message_tokens():
    """The middleware's prompt counts the system prompt and tool schemas (`overhead`); the library
    pages the messages down to 75% of what the budget leaves them. The graph oracle took the
    overhead off the low-water mark a second time, so with schemas of 419 tokens at B=700 no
    middleware prompt could fail the check."""
    overhead, max_tokens = 419, 700  # 281 tokens for messages, low water 210
    assert over_budget_unexplained(overhead + 300, 0, max_tokens, None, overhead)
    assert not over_budget_unexplained(overhead + 300, 240, max_tokens, None, overhead)  # 240 > 210
    assert not over_budget_unexplained(overhead + 300, 240, max_tokens, 600, overhead)  # capped at 281
    assert over_budget_unexplained(300, 0, 281, None)  # the pure step: no overhead


def test_the_protected_count_keeps_the_tool_group_of_a_result_without_id():
    """Graph seed 23 (create_agent, a store error failed the run that made a malformed call): the
    next run's error result for that call has no id again, so no update can remove it and the step
    keeps its whole group (`step.protect`); the oracle counted the result alone."""
    view = [
        HumanMessage("[c1:x|p1-p2]", id="c", additional_kwargs={METADATA_KEY: {"cluster": "c1"}}),
        AIMessage(
            "",
            id="a",
            tool_calls=[{"name": "lookup", "args": {"q": "chess oslo " * 20}, "id": "ok"}],
            invalid_tool_calls=[{"name": "lookup", "args": '{"q": "tr', "id": "bad", "error": "malformed"}],
        ),
        ToolMessage("Tool call lookup with id bad could not be executed", tool_call_id="bad"),
        ToolMessage("lookup chess oslo: violin painting garden " * 5, tool_call_id="ok", id="r"),
        HumanMessage("a question", id="u"),
    ]
    everything = sum(COUNTER.count_message(m) for m in view)
    assert generous_protected(view, COUNTER.count_message, library={"c"}) == everything
