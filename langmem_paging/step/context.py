"""The step context: what every phase of a paging step reads and writes.

A step starts from the *view* (the messages the model would receive) and the branch's paging
state; each phase changes the context: the state, the messages it replaces (`replace`: a message
key -> its stand-in, or None to drop it), the running token total, and the result. Nothing in
the input is mutated: the state is a fresh copy and messages are replaced, never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langmem_paging.core.messages import Unit, library_mark, message_keys
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import message_text
from langmem_paging.step.options import StepOptions
from langmem_paging.step.repair import repair_unanswered
from langmem_paging.step.result import PagingResult, PagingValue
from langmem_paging.strategies.policy import PolicyContext

__all__ = ["StepContext", "start"]


@dataclass
class StepContext:
    """One paging step in progress."""

    options: StepOptions
    """What the step decides with."""
    messages: list[BaseMessage]
    """The view the step started from (never mutated)."""
    state: PagingState
    """The branch's new paging state (a copy of the input state)."""
    result: PagingResult
    """What the step reports."""
    keys: list[str]
    """Each message's key (its id, or a key derived from its predecessor's)."""
    position: dict[str, int]
    """Index of each key in `messages`."""
    counts: list[int]
    """Tokens of each message."""
    total: int
    """Tokens of the view as the step has left it so far (a running estimate)."""
    replace: dict[str, BaseMessage | None] = field(default_factory=dict)
    """Messages the step replaced (by a bookmark, stub, digest or shrunk copy) or dropped (None)."""
    newest_user: int | None = None
    """Index of the newest user message (a human message that is not one of our bookmarks)."""
    recalled_now: set[str] = field(default_factory=set)
    """Keys of the recall results the last recall added (kept resident, paged to the budget)."""
    units: list[Unit] = field(default_factory=list)
    """The view cut into units (a tool-call message with its results is one unit)."""
    protected: dict[int, str] = field(default_factory=dict)
    """Indexes into `units` of what nothing may evict, each with why (as `protect` found it)."""
    latest_group: int | None = None
    """Index into `units` of the turn's latest tool group (an AI message with its results), if any."""
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tool calls in the view by call id (a result paged late still names its call)."""
    orphans: list[str] = field(default_factory=list)
    """Shown pages whose bookmark left the context (replaced or removed by the app)."""
    orphan_clusters: list[str] = field(default_factory=list)
    """Cluster roots whose bookmark left the context."""
    inserted: dict[str, list[str]] = field(default_factory=dict)
    """Stand-ins shown again just before the message at a key (that key -> their keys, each shown
    through `replace`): a new message took their id (`step.displaced`)."""
    rewritten: bool = False
    """The step inserted messages (error results of calls left unanswered): its updates rewrite the
    list (``REMOVE_ALL_MESSAGES`` and the new view) instead of patching it."""

    @property
    def target(self) -> int:
        """Where eviction stops: the budget after a recall (its result stays), else the low-water mark."""
        return self.options.budget if self.recalled_now else self.options.low_water

    def current(self, key: str) -> BaseMessage | None:
        """The message at `key` as the step has left it (None: dropped)."""
        return self.replace.get(key, self.messages[self.position[key]])

    def library_keys(self) -> set[str]:
        """Keys of the messages the state says are ours (bookmarks, digests, cluster bookmarks)."""
        return {s.anchor for s in self.state.shown.values()} | {
            c.anchor for c in self.state.clusters.values()
        }

    def tokens_now(self, i: int) -> int:
        """Tokens of the view's message `i` as the step has left it (0 when dropped): its count when
        unchanged, else its replacement measured."""
        current = self.replace.get(self.keys[i], self.messages[i])
        if current is None:
            return 0
        return self.counts[i] if current is self.messages[i] else self.options.count_message(current)

    def measured_total(self) -> int:
        """Tokens of the view as the step has left it, measured (not the running estimate)."""
        if not self.replace:  # nothing replaced, dropped or inserted: the view as it was given
            return sum(self.counts)
        inserted = (self.replace.get(k) for keys in self.inserted.values() for k in keys)
        return sum(self.tokens_now(i) for i in range(len(self.messages))) + sum(
            self.options.count_message(m) for m in inserted if m is not None
        )

    def policy_context(self) -> PolicyContext:
        """What a policy may know besides its candidates: the turn and the recent context."""
        end = len(self.messages)
        start = max(
            0, (self.newest_user if self.newest_user is not None else end) - self.options.recent_messages
        )
        recent = "\n".join(message_text(m) for m in self.messages[start:end])
        return PolicyContext(turn=self.state.turn, recent_text=recent)

    def cluster_in_view(self) -> bool:
        """True when a cluster bookmark is in the view as the step has left it: a page can join it
        at no cost."""
        return any(
            c.anchor in self.position
            and (m := self.current(c.anchor)) is not None
            and library_mark(m).get("cluster") == cid
            for cid, c in self.state.clusters.items()
        )


def start(view: Sequence[BaseMessage], state_value: PagingValue, options: StepOptions) -> StepContext:
    """A step's context: the view measured, the state copied, the newest user message found."""
    repaired = repair_unanswered(view, in_flight=not options.before_model)
    messages = repaired if repaired is not None else list(view)
    state = PagingState.from_value(state_value)
    keys = message_keys(messages)
    counts = [options.count_message(m) for m in messages]
    total = sum(counts)
    ctx = StepContext(
        options=options,
        messages=messages,
        state=state,
        result=PagingResult(view=messages, state=state, tokens_before=total, tokens=total),
        keys=keys,
        position={k: i for i, k in enumerate(keys)},
        counts=counts,
        total=total,
        rewritten=repaired is not None,
    )
    library = ctx.library_keys()
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage) and keys[i] not in library:
            ctx.newest_user = i
            break
    return ctx
