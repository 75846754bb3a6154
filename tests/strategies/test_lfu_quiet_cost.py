"""A quiet call (the view fits) costs what is new, whatever the policy and whatever other branches
share the counter.

`tools/bench_scale.py` grows one thread per configuration on one history: the threads share every
message id, and one process-wide token counter. The count cache kept one version per id, so a
configuration whose view differs (tiers:utility shows other bookmarks under the same ids) overwrote
the versions the next configuration in the round needed, and that one re-encoded them: the
configuration listed first (lfu, after tiers in the rotation) paid ~5 tiktoken encodes a call more
than the same work listed elsewhere (its 50k/1k ratio 1.30, fifo's 1.08). Forks of a thread, and
threads whose app gives its own ids, share ids the same way.
"""

from __future__ import annotations

from collections import Counter

from langchain_core.messages import HumanMessage

from langmem_paging import page_messages
from langmem_paging.strategies.policies import LFUPolicy
from tests.support.scenario_helpers import scripted_agent


class CountingCounter:
    """Five tokens per message; remembers which messages (id, text) it was asked about."""

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, str]] = []

    def __call__(self, messages):
        self.asked += [(m.id, str(m.content)) for m in messages]
        return 5 * len(messages)


def _ask(i: int) -> HumanMessage:
    return HumanMessage(
        f"Fact {i}: Zarko{i} keeps beehives near Bled{i} and sells honey in Kranj{i}.", id=f"h{i}"
    )


def test_branches_of_a_fork_do_not_recount_each_others_messages_on_quiet_calls():
    """Two branches of one thread through create_agent + PagingMiddleware (lfu), taking turns: the
    paged branch shows a bookmark under the id of its first page's first message, the other branch
    the message itself. Each version is counted once; a quiet turn counts its new messages only."""
    counter = CountingCounter()
    agent, paging, _ = scripted_agent(
        300, policy="lfu", token_counter=counter, responses=[f"Noted {i}." for i in range(40)]
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [_ask(0)]}, config)
    fork_at = agent.get_state(config).config
    for i in range(1, 30):
        if agent.get_state(config).values["paging"].get("shown"):
            break
        agent.invoke({"messages": [_ask(i)]}, config)
    heads = {"paged": agent.get_state(config).config}
    agent.invoke({"messages": [_ask(100)]}, fork_at)
    heads["fork"] = agent.get_state(config).config
    views = {name: agent.get_state(head).values["messages"] for name, head in heads.items()}
    fork_text = {m.id: m.content for m in views["fork"]}
    assert any(m.id in fork_text and m.content != fork_text[m.id] for m in views["paged"]), (
        "the branches must show different messages under one id"
    )

    counter.asked.clear()
    for turn in range(3):  # the branches take turns, as a server serving both does
        for name, n in (("paged", 200 + turn), ("fork", 300 + turn)):
            agent.invoke({"messages": [_ask(n)]}, heads[name])
            heads[name] = agent.get_state(heads[name]).config
    again = {k: n for k, n in Counter(counter.asked).items() if n > 1}
    assert not again, f"counted more than once: {again}"


def test_threads_sharing_ids_take_turns_without_recounting():
    """The pure function with one counter for two views under the same ids (one paged, one not):
    after each has been counted once, alternate quiet calls count nothing."""
    counter = CountingCounter()
    history = [_ask(i) for i in range(8)]
    paged = page_messages(history, max_tokens=25, boundary="fixed_2", token_counter=counter, policy="lfu")
    assert paged.evicted and paged.view[0].id == history[0].id and paged.view[0].content != history[0].content
    whole = page_messages(history, max_tokens=10_000, token_counter=counter, policy="lfu")
    assert whole.view == history
    states = {"paged": paged.state.to_value(), "whole": whole.state.to_value()}
    views = {"paged": paged.view, "whole": history}
    counter.asked.clear()
    for _ in range(3):
        for name in ("paged", "whole"):
            result = page_messages(
                views[name],
                max_tokens=25 if name == "paged" else 10_000,
                boundary="fixed_2",
                token_counter=counter,
                policy="lfu",
                state=states[name],
            )
            assert not result.changed
    assert counter.asked == []


def test_a_quiet_call_never_asks_the_policy():
    """A call whose view fits evicts nothing: the policy (lfu's ranking over every resident page,
    its access statistics) is not consulted, however many pages the thread has."""
    asked = []

    class Watching(LFUPolicy):
        def victim(self, candidates, context):
            asked.append(len(candidates))
            return super().victim(candidates, context)

    policy = Watching()
    history = [_ask(i) for i in range(40)]
    paged = page_messages(history, max_tokens=20, boundary="fixed_2", token_counter=len, policy=policy)
    assert asked and paged.evicted
    asked.clear()
    quiet = page_messages(
        [*paged.view, _ask(999)],
        max_tokens=20,
        boundary="fixed_2",
        token_counter=len,
        policy=policy,
        state=paged.state.to_value(),
    )
    assert not quiet.evicted and asked == []


def test_lfu_evicts_the_same_pages_whatever_else_the_counter_counted():
    """The count cache changes what is encoded again, never a count: lfu pages a history the same
    with a fresh counter as with one a differently paged branch of the same ids took turns with."""
    history = [_ask(i) for i in range(12)]
    fresh = page_messages(
        history, max_tokens=25, boundary="fixed_2", token_counter=CountingCounter(), policy="lfu"
    )
    shared = CountingCounter()
    page_messages(history, max_tokens=10_000, token_counter=shared, policy="lfu")
    page_messages(history[:8], max_tokens=25, boundary="fixed_2", token_counter=shared, policy="lfu")
    again = page_messages(history, max_tokens=25, boundary="fixed_2", token_counter=shared, policy="lfu")
    assert fresh.evicted and again.evicted == fresh.evicted
    assert [(m.id, m.content) for m in again.view] == [(m.id, m.content) for m in fresh.view]
