"""`reconstruct_history` gives the app's history in its order after removals, edits, rewrites and
forks (issue 23, "History order from one rule").

Each test drives `create_agent` + `PagingMiddleware` (replace mode) with a scripted model, changes
the thread as an app does (`update_state`), and keeps a ledger: the history as the app would have
it with no paging. The rebuilt history must equal the ledger, message for message and in order,
at every checkpoint the test looks at.
"""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langmem_paging import reconstruct_history
from langmem_paging.core.messages import library_mark
from tests.support.scenario_helpers import FACTS, agent_history, scripted_agent
from tools.fuzzing.oracles import in_history_order, same_messages
from tools.fuzzing.vocabulary import COUNTER

CONFIGS: dict[str, dict] = {
    "fixed_2-stae-importance-350": {
        "max_tokens": 350,
        "boundary": "fixed_2",
        "policy": "stae",
        "tiers": "importance",
    },
    "topic_shift-lru-500": {"max_tokens": 500, "boundary": "topic_shift", "policy": "lru"},
}
"""The two create_agent settings where an independent campaign saw two messages swapped."""


class Thread:
    """One agent thread and its ledger."""

    def __init__(self, **options) -> None:
        budget = options.pop("max_tokens")
        answers = [f"Noted {i}: {FACTS[i % len(FACTS)].split(' keeps ')[1]}" for i in range(200)]
        self.agent, self.paging, self.model = scripted_agent(budget, responses=answers, **options)
        self.config = {"configurable": {"thread_id": "t"}}
        self.ledger: list[BaseMessage] = []
        self.turns = 0

    @property
    def messages(self) -> list[BaseMessage]:
        return self.agent.get_state(self.config).values["messages"]

    def history(self, config: dict | None = None) -> list[BaseMessage]:
        return agent_history(self.paging, "t", self.agent.get_state(config or self.config).values)

    def expand(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """What kept messages stand for, in the ledger's order (a kept cluster bookmark stands for
        pages from several places in the history)."""
        store = self.paging.page_store
        rebuilt = reconstruct_history(
            messages, lambda p: store.get("t", p), COUNTER, clusters=lambda c: store.get_cluster("t", c)
        )
        return in_history_order(rebuilt, self.ledger)

    def say(self, n: int = 1) -> None:
        for _ in range(n):
            i = self.turns
            self.turns += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = self.agent.invoke(
                    {"messages": [HumanMessage(FACTS[i % len(FACTS)], id=f"h{i}")]}, self.config
                )
            known = {m.id for m in self.ledger}
            self.ledger += [m for m in values["messages"] if m.id not in known]

    def update(self, messages: list) -> None:
        self.agent.update_state(self.config, {"messages": messages})

    def check(self, what: str) -> None:
        got = self.history()
        assert same_messages(got, self.ledger) is None, f"{what}: {same_messages(got, self.ledger)}"


def _older(messages: list[BaseMessage], k: int) -> BaseMessage:
    """A resident message of the app's but the newest (an AI message when there is one)."""
    older = [m for m in messages[:-1] if not library_mark(m)]
    answers = [m for m in older if isinstance(m, AIMessage)]
    return (answers or older)[-1 - k % max(1, len(answers or older))]


@pytest.mark.parametrize("config", CONFIGS)
def test_removed_messages_leave_the_rest_in_order(config: str) -> None:
    thread = Thread(**CONFIGS[config])
    for round_ in range(6):
        thread.say(3)
        victim = _older(thread.messages, round_)
        thread.update([RemoveMessage(id=victim.id)])
        thread.ledger = [m for m in thread.ledger if m.id != victim.id]
        thread.check(f"right after removing {victim.id}")
    thread.say(6)
    thread.check("six turns later")


@pytest.mark.parametrize("config", CONFIGS)
def test_edited_messages_keep_their_place(config: str) -> None:
    thread = Thread(**CONFIGS[config])
    for _ in range(5):
        thread.say(3)
        target = _older(thread.messages, 0)
        edited = target.model_copy(update={"content": f"{target.content} (corrected)"})
        thread.update([edited])
        thread.ledger = [edited if m.id == target.id else m for m in thread.ledger]
        thread.check("right after an edit")
    thread.say(6)
    thread.check("six turns later")


@pytest.mark.parametrize("config", CONFIGS)
def test_a_summary_put_first_rebuilds_first_every_time(config: str) -> None:
    """Each summary goes before everything, an earlier summary already paged included, also on
    the checkpoint right after the rewrite (before a step numbered the new summary)."""
    thread = Thread(**CONFIGS[config])
    for k in range(3):
        thread.say(8)
        summary = HumanMessage(f"Summary {k}: beekeepers and their lakes so far.", id=f"summary{k}")
        kept = thread.messages
        thread.update([RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *kept])
        thread.ledger = [summary, *thread.expand(kept)]
        thread.check(f"right after summary {k}")
    thread.say(6)
    thread.check("six turns later")


@pytest.mark.parametrize("config", CONFIGS)
def test_a_summary_keeping_the_last_messages_and_a_cluster_bookmark(config: str) -> None:
    """SummarizationMiddleware's rewrite: a summary and the last few messages; a kept cluster
    bookmark stands for pages from before and after messages kept beside it."""
    thread = Thread(**CONFIGS[config])
    thread.say(14)
    messages = thread.messages
    keep = [m for m in messages if library_mark(m).get("cluster")][:1] + messages[-3:]
    summary = HumanMessage("Summary: fourteen beekeepers.", id="summary")
    thread.update([RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *keep])
    thread.ledger = [summary, *thread.expand(keep)]
    thread.check("right after the rewrite")
    thread.say(8)
    thread.check("eight turns later")


@pytest.mark.parametrize("config", CONFIGS)
def test_a_message_a_rewrite_put_between_older_ones_stays_there_once_paged(config: str) -> None:
    thread = Thread(**CONFIGS[config])
    thread.say(6)
    messages = thread.messages
    note = HumanMessage("A note the app inserted about the beehives.", id="note")
    before, after = messages[:-2], messages[-2:]
    thread.update([RemoveMessage(id=REMOVE_ALL_MESSAGES), *before, note, *after])
    thread.ledger = [*thread.expand(before), note, *thread.expand(after)]
    thread.check("right after the insertion")
    for _ in range(30):
        thread.say()
        if "note" not in {m.id for m in thread.messages}:
            break
    assert "note" not in {m.id for m in thread.messages}  # paged by now
    thread.check("once the note is paged")


@pytest.mark.parametrize("config", CONFIGS)
def test_a_fork_rebuilds_its_own_order_and_the_original_branch_keeps_its(config: str) -> None:
    thread = Thread(**CONFIGS[config])
    thread.say(6)
    fork_point = thread.agent.get_state(thread.config).config
    ledger_at_fork = list(thread.ledger)
    thread.say(6)
    original = list(thread.ledger)
    head = thread.agent.get_state(thread.config).config
    # the fork: from the earlier checkpoint, a removal, then new turns
    victim = [
        m
        for m in thread.agent.get_state(fork_point).values["messages"]
        if isinstance(m, AIMessage) and not library_mark(m)
    ][-1]
    forked = thread.agent.update_state(fork_point, {"messages": [RemoveMessage(id=victim.id)]})
    thread.config = {"configurable": {**forked["configurable"]}}
    thread.ledger = [m for m in ledger_at_fork if m.id != victim.id]
    thread.check("right after the fork")
    thread.config = {"configurable": {"thread_id": "t"}}
    thread.turns = 100
    thread.say(6)
    thread.check("six turns into the fork")
    rebuilt = thread.history(head)
    assert same_messages(rebuilt, original) is None, same_messages(rebuilt, original)
