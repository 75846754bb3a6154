"""A conformance suite any policy, bookmarker or store can run against itself.

Each check replays generated conversations through the real paging step (or the page
store) and raises `AssertionError` naming the broken rule. Use them in your own tests:

    def test_my_policy_conforms():
        validate_policy(MyPolicy())

Example:
    >>> from langmem_paging.strategies.policies import LRUPolicy
    >>> validate_policy(LRUPolicy())
    >>> from langgraph.store.memory import InMemoryStore
    >>> validate_store(InMemoryStore())
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.store.base import BaseStore

from langmem_paging.core.library_messages import BOOKMARK_PATTERN
from langmem_paging.core.messages import METADATA_KEY, merge_messages, tool_call_ids
from langmem_paging.core.records import ClusterNode, Page, messages_digest
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter
from langmem_paging.recall.history import reconstruct_history
from langmem_paging.step.pure import page_messages
from langmem_paging.storage.page_store import PageStore
from langmem_paging.strategies.bookmarks import BookmarkContext, Bookmarker, PageDraft
from langmem_paging.strategies.policy import EvictionPolicy

__all__ = [
    "model_call_points",
    "sample_conversation",
    "valid_chat",
    "validate_bookmarker",
    "validate_policy",
    "validate_store",
]

_COUNTER = TokenCounter()


def sample_conversation(n_turns: int = 40, *, seed: int = 0) -> list[BaseMessage]:
    """A seeded chat with a system prompt, a pinned message, tool groups (parallel calls included),
    timestamps and sessions: what the checks replay."""
    rng = random.Random(seed)
    words = [
        "lisbon",
        "kyoto",
        "violin",
        "pottery",
        "marathon",
        "puppy",
        "garden",
        "harvest",
        "museum",
        "concert",
        "bicycle",
        "chess",
    ]
    out: list[BaseMessage] = [SystemMessage("You are helpful.", id="sys")]
    for turn in range(n_turns):
        meta = {"timestamp": f"2024-01-01T{turn % 24:02d}:00:00+00:00", "session_id": f"s{turn // 8}"}
        topic = rng.sample(words, 3)
        out.append(
            HumanMessage(
                f"Turn {turn}: tell me about {' '.join(topic)}.", id=f"h{turn}", additional_kwargs=dict(meta)
            )
        )
        if turn == 3:
            out.append(
                HumanMessage(
                    "Remember: my name is Ada.", id="pin", additional_kwargs={METADATA_KEY: {"pinned": True}}
                )
            )
        if rng.random() < 0.4:
            calls = [
                {"name": "lookup", "args": {"q": topic[k]}, "id": f"c{turn}_{k}"}
                for k in range(rng.randint(1, 2))
            ]
            out.append(AIMessage("", tool_calls=calls, id=f"t{turn}"))
            out += [
                ToolMessage(f"{topic[k]} facts #{turn}", tool_call_id=f"c{turn}_{k}", id=f"rc{turn}_{k}")
                for k in range(len(calls))
            ]
        out.append(AIMessage(f"About {topic[0]}: noted {turn}.", id=f"a{turn}"))
    return out


def valid_chat(messages: list[BaseMessage]) -> None:
    """Assert what the OpenAI and Anthropic chat APIs need: each tool result right after the AI
    message that called it, every call answered before anything else comes, a system message
    only first."""
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"message {i}: a tool result without its call"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"message {i}: tool calls {sorted(open_calls)} left unanswered"
        assert not isinstance(message, SystemMessage) or i == 0, f"message {i}: a system message not first"
        if isinstance(message, AIMessage):
            open_calls = set(tool_call_ids(message))


def model_call_points(messages: list[BaseMessage]) -> list[int]:
    """Prefix lengths at which an agent calls the model: after a user turn, or after a tool group's results."""
    points = []
    for i, m in enumerate(messages):
        following = messages[i + 1] if i + 1 < len(messages) else None
        if isinstance(m, HumanMessage) or (
            isinstance(m, ToolMessage) and not isinstance(following, ToolMessage)
        ):
            points.append(i + 1)
    return points


def _replay(history: list[BaseMessage], max_tokens: int, **options: Any) -> Any:
    state: list[BaseMessage] = []
    paging: dict[str, Any] = {}
    pages: dict[str, Page] = {}
    nodes: dict[str, ClusterNode] = {}
    results = []
    previous = 0
    for point in model_call_points(history):
        state = merge_messages(state, history[previous:point])
        previous = point
        before, paging_before = copy.deepcopy(state), copy.deepcopy(paging)
        result = page_messages(
            state, max_tokens=max_tokens, state=paging, pages=pages, text_counter=_COUNTER, **options
        )
        assert state == before and paging == paging_before, "the step mutated its input"
        for page in result.pages:
            assert page.id not in pages or pages[page.id].digest == page.digest, f"page id {page.id} reused"
            pages[page.id] = page
        for node in result.nodes:
            assert node.id not in nodes, f"cluster id {node.id} reused"
            nodes[node.id] = node
        state = merge_messages(state, result.updates)
        assert state == result.view, "the updates must turn the messages into the view"
        paging = result.state.to_value()
        results.append(result)
    return merge_messages(state, history[previous:]), paging, pages, nodes, results


def validate_policy(policy_factory: EvictionPolicy | Callable[[], EvictionPolicy], *, seeds: int = 2) -> None:
    """Check an eviction policy through the paging step: it frees what is asked (the context fits
    the budget whenever what nothing may evict does), never evicts the system prompt, a pinned
    message or the newest user message, never splits a tool call from its results, leaves its
    input unmutated, is deterministic, and the history stays lossless.

    Args:
        policy_factory: The policy, or a function making a fresh one (for stateful policies).
        seeds: Conversations to replay.
    """
    make = (
        policy_factory
        if callable(policy_factory) and not isinstance(policy_factory, EvictionPolicy)
        else (lambda: policy_factory)
    )
    for seed in range(seeds):
        history = sample_conversation(40, seed=seed)
        for budget, boundary in ((400, "fixed_3"), (700, "exchange")):
            final, paging, pages, nodes, results = _replay(history, budget, boundary=boundary, policy=make())
            again = _replay(history, budget, boundary=boundary, policy=make())
            assert final == again[0] and paging == again[1], "the policy is not deterministic"
            assert reconstruct_history(final, pages, _COUNTER, clusters=nodes, state=paging) == history, (
                "the history is not rebuilt exactly"
            )
            for result in results:
                valid_chat(result.view)
                ids = {m.id for m in result.view}
                assert "sys" in ids and (
                    "pin" in ids or "pin" not in {m.id for m in history[: len(result.view)]}
                )
                assert result.tokens <= budget or result.over_budget, "over budget without saying so"
                if result.over_budget:
                    assert result.protected_tokens > budget * 0.5, "over budget with room left to evict"


def validate_bookmarker(bookmarker: Bookmarker, *, max_tokens: int | None = 64) -> None:
    """Check a bookmarker: one bookmark per page, in order, naming its page (``[pN:...]``),
    within `max_tokens`, deterministic, its keywords those the bookmark shows first."""
    history = sample_conversation(12, seed=3)
    drafts = [PageDraft(f"p{i + 1}", history[i * 6 : i * 6 + 6]) for i in range(len(history) // 6)]
    context = BookmarkContext(count_text=_COUNTER.count_text)
    first = bookmarker.bookmark(drafts, context)
    assert len(first) == len(drafts), "one bookmark per page"
    for draft, mark in zip(drafts, first, strict=True):
        match = BOOKMARK_PATTERN.fullmatch(mark.text)
        assert match and match.group(1) == draft.id, f"{mark.text!r} does not name {draft.id}"
        # compared word by word: a bookmark may show several keywords between two commas
        shown = match.group(2).replace(",", " ").split()
        kept = " ".join(mark.keywords).split()
        assert kept[: len(shown)] == shown, "keywords must start with those the bookmark shows"
        if max_tokens is not None:
            assert _COUNTER.count_text(mark.text) <= max_tokens, f"{mark.text!r} is over {max_tokens} tokens"
    assert bookmarker.bookmark(drafts, context) == first, "the bookmarker is not deterministic"


def validate_store(store: BaseStore) -> None:
    """Check a LangGraph store under a `PageStore`: pages round-trip exactly, threads never see
    each other's pages, ids are reserved past other branches' records, the cluster forest and
    thread deletion work. Writes and deletes records under ``("langmem_paging", "conformance-*")``."""
    pages = PageStore(store)
    history = sample_conversation(6, seed=1)
    page = Page(
        id="p1",
        messages=history[1:6],
        bookmark="[p1:x]",
        keywords=["x"],
        token_count=20,
        boundary="fixed_5",
        created_turn=1,
        order=1,
        digest=messages_digest(history[1:6]),
    )
    for thread in ("conformance-a", "conformance-b"):
        pages.delete_thread(thread)
    state = PagingState(next={"p": 2, "c": 2}, spans={"p": [[1, 2]], "c": [[1, 2]]})
    node = ClusterNode(id="c1", children=["p1"], size=1, first_page=1, last_page=1, bookmark="[c1:x|p1]")
    pages.commit("conformance-a", pages=[page], nodes=[node], state=state)
    assert pages.get("conformance-a", "p1") == page, "a page does not round-trip exactly"
    assert pages.get("conformance-b", "p1") is None, "a thread sees another thread's page"
    assert pages.find("conformance-a", "p1") == "c1" and pages.members("conformance-a", "c1") == ["p1"]
    other = PagingState()
    assert pages.reserve("conformance-a", "p", ["another digest"], other) == [2], "reserved a taken id"
    assert pages.reserve("conformance-a", "p", [page.digest], PagingState()) == [1], "a retry lost its id"
    assert pages.delete_thread("conformance-a") >= 3 and pages.get("conformance-a", "p1") is None
