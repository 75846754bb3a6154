"""Store faults at every store call of a paging step or a recall, through a compiled agent.

For steps that form pages, evict, fold into clusters, and recall: the k-th store call of the turn
fails, for every k. The turn fails loudly, the checkpoint keeps nothing of the failed step, the
failed run resumes (``invoke(None)``) and the next turn goes on as if nothing had failed: the same
history as a run without faults, nothing lost, no page id reused, every prompt within budget.
With the default retries a transient fault is absorbed; with ``on_store_error="continue"`` the
turn goes on unpaged, with a RuntimeWarning, and the next turn pages again.

``python -m tests.integration.test_faults`` runs the 10%-flaky 150-turn campaign and prints its table.
"""

from __future__ import annotations

import asyncio
import copy
import warnings
from dataclasses import dataclass, field

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PageStore, PagingState
from langmem_paging.core.errors import PageStoreError
from langmem_paging.testing import FaultInjectingStore, StoreFault
from tests.support.scenario import (
    MAX_TOKENS,
    build_agent,
    check_branch,
    prompt_tokens,
    turn_message,
    turn_text,
)

THREAD = "t"
CONFIG = {"configurable": {"thread_id": THREAD}}
TURNS = 36


@dataclass
class CleanRun:
    """A run without faults: per turn, the state before it, its store calls, and the history after it."""

    before: list[tuple[InMemorySaver, InMemoryStore]] = field(default_factory=list)
    phases: list[list[str]] = field(default_factory=list)
    kinds: list[set[str]] = field(default_factory=list)
    after: list[list[tuple[str, str]]] = field(default_factory=list)

    def first(self, kind: str) -> int:
        """The first turn that forms and evicts pages, folds bookmarks into clusters, or recalls
        (before paging: the recall reads pages evicted in earlier turns; the turn's first model call
        is quiet, its one store call the lifecycle read)."""
        for turn, (kinds, phases) in enumerate(zip(self.kinds, self.phases, strict=False)):
            if kind == "form and evict" and {"form", "evict"} <= kinds:
                return turn
            if kind == "fold" and "fold" in kinds and "step" in phases:
                return turn
            if (
                kind == "recall"
                and "recall" in kinds
                and "recall" in phases
                and phases[: phases.index("recall")] == ["step"]  # (the quiet step's lifecycle read)
                and turn > self.first("fold")
            ):
                return turn
        raise AssertionError(f"the scenario never does {kind!r} with a store call: adjust it")

    def calls(self, turn: int, **options) -> list[str]:
        """The store calls of `turn` when restarted before it (a fresh process: a cold search index)."""
        agent, _, _, store, _ = _restart(self, turn, **options)
        store.arm()
        agent.invoke({"messages": [turn_message(turn)]}, CONFIG)
        return store.phases


def _kinds(before_value: dict | None, after_value: dict, text: str) -> set[str]:
    kinds = {"recall"} if "recall it" in text else set()
    if before_value:
        # parsed: the channel value leaves out keys at their default
        before, after = PagingState.from_value(before_value), PagingState.from_value(after_value)
        if after.next["p"] > before.next["p"]:
            kinds.add("form")
        if set(after.shown) - set(before.shown) or set(before.pages) - set(after.pages):
            kinds.add("evict")
        if after.next["c"] > before.next["c"]:
            kinds.add("fold")
    return kinds


def _contents(history) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in history]


@pytest.fixture(scope="module")
def clean():
    saver, inner = InMemorySaver(), InMemoryStore()
    store = FaultInjectingStore(inner)
    agent, paging, model = build_agent(store, saver)
    run, previous = CleanRun(), None
    for n in range(TURNS):
        run.before.append(copy.deepcopy((saver, inner)))
        store.arm()
        values = agent.invoke({"messages": [turn_message(n)]}, CONFIG)
        run.phases.append(store.phases)
        run.kinds.append(_kinds(previous, values.get("paging") or {}, turn_text(n)))
        previous = values.get("paging")
        history = check_branch(PageStore(inner), THREAD, values, [turn_text(i) for i in range(n + 1)])
        run.after.append(_contents(history))
    assert all(prompt_tokens(p, paging) <= MAX_TOKENS for p in model.prompts)
    return run


def _restart(clean: CleanRun, turn: int, **options):
    """The agent as it stood before `turn` of the clean run, over a fault-injecting store."""
    saver, inner = copy.deepcopy(clean.before[turn])
    store = FaultInjectingStore(inner)
    agent, paging, model = build_agent(store, saver, **options)
    return agent, paging, model, store, inner


def _invoke(agent, inputs, mode: str):
    if mode == "sync":
        return agent.invoke(inputs, CONFIG)
    return asyncio.run(agent.ainvoke(inputs, CONFIG))


def _assert_recovered(clean: CleanRun, turn: int, agent, paging, model, inner, mode: str, where: str) -> None:
    """Resume the failed run, take the next turn; the branch must match the clean run's."""
    _invoke(agent, None, mode)
    values = _invoke(agent, {"messages": [turn_message(turn + 1)]}, mode)
    history = check_branch(PageStore(inner), THREAD, values, [turn_text(i) for i in range(turn + 2)])
    assert _contents(history) == clean.after[turn + 1], (
        f"{where}: history differs from the run without faults"
    )
    over = [prompt_tokens(p, paging) for p in model.prompts if prompt_tokens(p, paging) > MAX_TOKENS]
    assert not over, f"{where}: prompts over the {MAX_TOKENS}-token budget after the failure: {over}"


def _assert_recall_failed_softly(values, turn: int, inner, paging, model, where: str) -> None:
    """A store fault inside `recall`: the model got an error tool message (never an exception out of
    the tools node), nothing was lost, and every prompt stayed within budget."""
    from langchain_core.messages import ToolMessage

    results = [m for m in values["messages"] if isinstance(m, ToolMessage) and m.name == "recall"]
    assert results and results[-1].status == "error", f"{where}: no error result for the failed recall"
    assert "unavailable right now" in str(results[-1].content), where
    check_branch(PageStore(inner), THREAD, values, [turn_text(i) for i in range(turn + 1)])
    over = [prompt_tokens(p, paging) for p in model.prompts if prompt_tokens(p, paging) > MAX_TOKENS]
    assert not over, f"{where}: prompts over the {MAX_TOKENS}-token budget: {over}"


KINDS = ["form and evict", "fold", "recall"]


def test_the_scenario_forms_evicts_folds_and_recalls(clean):
    turns = {kind: clean.first(kind) for kind in KINDS}
    assert all(turn + 1 < TURNS for turn in turns.values()), turns
    for kind, turn in turns.items():
        assert len(clean.calls(turn)) >= 2, f"{kind} at turn {turn} makes {clean.calls(turn)} store calls"
    assert len(set(turns.values())) == len(KINDS), turns


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_fault_at_any_store_call_fails_the_turn_and_the_next_turn_recovers(clean, kind, mode):
    turn = clean.first(kind)
    phases = clean.calls(turn)
    for k, phase in enumerate(phases, start=1):
        where = f"{kind} turn {turn}, fault at {phase} call {k} of {len(phases)} ({mode})"
        agent, paging, model, store, inner = _restart(clean, turn, retries=0)
        before = agent.get_state(CONFIG).values
        store.arm(fail_at=[k])
        if phase == "recall":  # a recall's store error comes back to the model; the turn goes on
            values = _invoke(agent, {"messages": [turn_message(turn)]}, mode)
            assert store.failures == 1, where
            _assert_recall_failed_softly(values, turn, inner, paging, model, where)
            continue
        with pytest.raises(PageStoreError) as raised:
            _invoke(agent, {"messages": [turn_message(turn)]}, mode)
        assert isinstance(raised.value.__cause__, StoreFault), where
        assert store.failures == 1, where
        failed = agent.get_state(CONFIG)
        assert failed.next, f"{where}: the failed run should be pending, to resume"
        if failed.values["messages"][-1].id == turn_message(turn).id:  # failed paging the turn's first call
            assert failed.values.get("paging") == before.get("paging"), f"{where}: paging state changed"
            assert failed.values["messages"] == [*before["messages"], turn_message(turn)], where
        check_branch(
            PageStore(inner),
            THREAD,
            failed.values,
            [turn_text(i) for i in range(turn)],
            in_flight=turn_text(turn),
        )
        store.arm()
        _assert_recovered(clean, turn, agent, paging, model, inner, mode, where)


@pytest.mark.parametrize("kind", KINDS)
def test_transient_faults_are_absorbed_by_the_default_retries(clean, kind):
    turn = clean.first(kind)
    for k in range(1, len(clean.calls(turn)) + 1):
        agent, _, _, store, inner = _restart(clean, turn)  # retries=2
        store.arm(fail_at=[k])
        values = agent.invoke({"messages": [turn_message(turn)]}, CONFIG)
        assert store.failures == 1
        history = check_branch(PageStore(inner), THREAD, values, [turn_text(i) for i in range(turn + 1)])
        assert _contents(history) == clean.after[turn], f"{kind} turn {turn}, retried call {k}"
    agent, paging, model, store, inner = _restart(clean, turn)
    store.arm(fail_at=[1, 2, 3])  # three failures in a row outlast two retries
    if clean.calls(turn)[0] == "recall":  # the recall's error comes back to the model
        values = agent.invoke({"messages": [turn_message(turn)]}, CONFIG)
        _assert_recall_failed_softly(values, turn, inner, paging, model, f"{kind} turn {turn}, three faults")
        return
    with pytest.raises(PageStoreError) as raised:
        agent.invoke({"messages": [turn_message(turn)]}, CONFIG)
    assert isinstance(raised.value.__cause__, StoreFault)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_on_store_error_continue_goes_on_unpaged_and_the_next_turn_pages(clean, kind, mode):
    turn = clean.first(kind)
    for k, phase in enumerate(clean.calls(turn), start=1):
        where = f"{kind} turn {turn}, fault at {phase} call {k} ({mode})"
        agent, paging, model, store, inner = _restart(clean, turn, retries=0, on_store_error="continue")
        store.arm(fail_at=[k])
        if phase == "recall":  # a recall's store error comes back to the model, whatever the option
            values = _invoke(agent, {"messages": [turn_message(turn)]}, mode)
            _assert_recall_failed_softly(values, turn, inner, paging, model, where)
            continue
        with pytest.warns(RuntimeWarning, match="this turn is not paged"):
            values = _invoke(agent, {"messages": [turn_message(turn)]}, mode)
        check_branch(PageStore(inner), THREAD, values, [turn_text(i) for i in range(turn + 1)])
        store.arm()
        model.prompts.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # the next turn pages again, without a warning
            values = _invoke(agent, {"messages": [turn_message(turn + 1)]}, mode)
        history = check_branch(PageStore(inner), THREAD, values, [turn_text(i) for i in range(turn + 2)])
        assert [c for c in _contents(history) if c[0] == "human"] == [
            c for c in clean.after[turn + 1] if c[0] == "human"
        ], where
        assert all(prompt_tokens(p, paging) <= MAX_TOKENS for p in model.prompts), where


# -- the flaky-store campaign (a script: python -m tests.integration.test_faults) -------------------------------


def flaky_campaign(
    *, turns: int = 150, p: float = 0.1, retries: int, on_store_error: str, seed: int = 7, mode: str = "sync"
) -> dict:
    """Drive `turns` turns over a store failing each call with probability `p`; count what happened."""
    saver, inner = InMemorySaver(), InMemoryStore()
    store = FaultInjectingStore(inner, p=p, seed=seed)
    agent, paging, model = build_agent(store, saver, retries=retries, on_store_error=on_store_error)
    failed_turns = unpaged_turns = over_budget = over_budget_after = 0
    sent: list[str] = []
    failing, total_calls = False, 0
    for n in range(turns):
        text, first_prompt = turn_text(n), len(model.prompts)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            try:
                if failing:  # resume the failed run first, as a client retrying would
                    _invoke(agent, None, mode)
                    failing = False
                sent.append(text)
                _invoke(agent, {"messages": [turn_message(n)]}, mode)
            except PageStoreError:
                failed_turns += 1
                failing = True
        unpaged = any("this turn is not paged" in str(w.message) for w in caught)
        unpaged_turns += unpaged
        for prompt in model.prompts[first_prompt:]:
            if prompt_tokens(prompt, paging) > MAX_TOKENS:
                over_budget += 1
                over_budget_after += not unpaged and not failing
    total_calls, _ = store.calls, store.arm()
    if failing:
        _invoke(agent, None, mode)
    values = agent.get_state(CONFIG).values
    check_branch(PageStore(inner), THREAD, values, sent)
    return {
        "retries": retries,
        "on_store_error": on_store_error,
        "mode": mode,
        "turns": turns,
        "store calls": total_calls + store.calls,
        "store calls failed": store.failures,
        "turns failed": failed_turns,
        "turns unpaged": unpaged_turns,
        "prompts": len(model.prompts),
        "prompts over budget": over_budget,
        "over budget in paged turns": over_budget_after,
        "history lossless": True,
    }


def test_a_flaky_store_loses_nothing_over_many_turns():
    result = flaky_campaign(turns=40, p=0.1, retries=0, on_store_error="raise")
    assert result["store calls failed"] > 0 and result["turns failed"] > 0
    assert result["over budget in paged turns"] == 0


if __name__ == "__main__":
    rows = [
        flaky_campaign(retries=r, on_store_error=e, mode=m)
        for r in (0, 2)
        for e in ("raise", "continue")
        for m in ("sync", "async")
    ]
    keys = list(rows[0])
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(str(row[k]) for k in keys))
