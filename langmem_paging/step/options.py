"""What one paging step needs to decide, resolved from a `PagingConfig`: one builder for the pure
function, the middleware and the node alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from langmem_paging.core.tokens import TokenCounter, cached_message_counter
from langmem_paging.strategies.bookmarks import Bookmarker, as_bookmarker
from langmem_paging.strategies.boundaries import BoundaryStrategy, get_boundary
from langmem_paging.strategies.clusters import ClusterOptions
from langmem_paging.strategies.policies import get_policy
from langmem_paging.strategies.policy import EvictionPolicy
from langmem_paging.strategies.tiers import TierMode, TierPolicy, get_tiers

if TYPE_CHECKING:
    from langmem_paging.config import PagingConfig

__all__ = ["Components", "StepOptions", "step_options"]


@dataclass(frozen=True)
class Components:
    """The strategy objects a configuration names, resolved once and kept by whoever runs the steps
    (policies and digesters keep their own bookkeeping across steps)."""

    boundary: BoundaryStrategy
    """Where pages are cut."""
    policy: EvictionPolicy
    """Which page goes next (a `TierPolicy` when tiers are on)."""
    bookmarker: Bookmarker
    """Makes bookmarks for new pages."""
    tiers: TierMode | None
    """Hot/warm/cold tier scoring, or None."""

    @classmethod
    def resolve(cls, config: PagingConfig) -> Components:
        """The objects `config` names (tier scoring, when set, is the eviction policy)."""
        tiers = get_tiers(config.tiers)
        policy = TierPolicy(tiers) if tiers is not None else get_policy(config.policy)
        return cls(
            boundary=get_boundary(config.boundary),
            policy=policy,
            bookmarker=as_bookmarker(config.bookmarker),
            tiers=tiers,
        )


@dataclass(frozen=True)
class StepOptions:
    """Everything one step needs to decide."""

    budget: int
    """Tokens the message list may take (``max_tokens`` minus the system prompt and tools)."""
    low_water: int
    """When over budget, page down to this many tokens."""
    boundary: BoundaryStrategy
    """Where pages are cut."""
    policy: EvictionPolicy
    """Which page goes next."""
    bookmarker: Bookmarker
    """Makes bookmarks for new pages."""
    clusters: ClusterOptions
    """How old bookmarks fold into clusters."""
    count_message: Callable[[BaseMessage], int]
    """Tokens of one message."""
    count_text: Callable[[str], int]
    """Tokens of a string."""
    large_result_tokens: int | None = None
    """A tool result larger than this is paged on arrival (None: never)."""
    recent_messages: int = 6
    """Messages before the newest user message that count as recent context for policies."""
    tiers: TierMode | None = None
    """Hot/warm/cold tier scoring (its warm digests are shown by the step), or None."""
    encoding: str | None = None
    """The tiktoken encoding counting the step (kept in the state for the branch's recalls)."""
    overhead: int = 0
    """Tokens the system prompt and tool schemas take (sent with every call; may exceed ``max_tokens``)."""
    max_tokens: int = 0
    """The whole budget: the messages' `budget` plus `overhead` (unless the overhead alone exceeds it)."""
    tool_name: str = "recall"
    """The name of paging's recall tool, which texts the model reads tell it to call."""
    before_model: bool = False
    """The step runs right before a model call: no tool call is in flight (`repair_unanswered`)."""


def step_options(
    config: PagingConfig,
    components: Components,
    *,
    max_tokens: int,
    counter: TokenCounter,
    overhead: int = 0,
    before_model: bool = False,
) -> StepOptions:
    """The options of a step under `max_tokens`, of which `overhead` (system prompt, tool schemas)
    is already taken; shares (bookmarks, large results) are shares of the whole `max_tokens`
    (`before_model`: see `StepOptions.before_model`).

    Raises:
        ValueError: If `max_tokens` is not positive.
    """
    if max_tokens <= 0:
        raise ValueError("`max_tokens` must be a positive number of tokens.")
    budget = max(1, max_tokens - overhead)
    custom = config.token_counter
    count_message = counter.count_message if custom is None else cached_message_counter(custom)
    large = config.large_result_share
    return StepOptions(
        budget=budget,
        overhead=overhead,
        max_tokens=max_tokens,
        low_water=config.low_water_for(budget),
        boundary=components.boundary,
        policy=components.policy,
        bookmarker=components.bookmarker,
        clusters=ClusterOptions.for_share(
            max(1, int(max_tokens * config.bookmark_share)),
            threshold=config.cluster_threshold,
            max_clusters=config.max_clusters,
        ),
        count_message=count_message,
        count_text=counter.count_text,
        large_result_tokens=None if large is None else max(1, int(max_tokens * large)),
        recent_messages=config.recent_messages,
        tiers=components.tiers,
        encoding=counter.encoding.name,
        tool_name=config.tool_name,
        before_model=before_model,
    )
