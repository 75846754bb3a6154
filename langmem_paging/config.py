"""Paging options as one validated pydantic model (the keyword arguments of the middleware and node)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from langmem_paging.boundaries import BoundaryStrategy, get_boundary
from langmem_paging.policies import EvictionPolicy, get_policy

__all__ = ["PagingConfig"]


class PagingConfig(BaseModel):
    """Every paging option, validated once at construction."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    max_tokens: int = Field(gt=0)
    """Budget for the message list the model receives, bookmarks and recalled pages included."""
    low_water_tokens: int | None = None
    """When over budget, page down to this many tokens (default 75% of `max_tokens`), so
    paging happens in steps rather than every turn."""
    boundary: str | BoundaryStrategy = "fixed_20"
    """How pages are cut: `fixed_N`, `tokens_N`, `exchange`, `session`, `topic_shift`, or an object."""
    policy: str | EvictionPolicy = "fifo"
    """Which page goes next: `fifo`, `lru`, `lfu`, `semantic`, or an `EvictionPolicy`."""
    mode: Literal["replace", "view"] = "replace"
    """`replace`: bookmarks replace pages in state. `view`: state keeps the full history and
    the model is shown the paged view."""
    model: str | None = None
    """Model name, to choose the tiktoken encoding (o200k_base for gpt-4o-family)."""
    encoding: str | None = None
    """tiktoken encoding name; overrides `model`."""
    token_counter: Any = None
    """Callable counting a message list; default: tiktoken, cached per message."""
    bookmarker: Any = None
    """Callable making bookmark text; default `KeywordBookmarker`."""
    recall_max_tokens: int | None = None
    """Size cap of one recall result (default a third of `max_tokens`, at least 256)."""
    recent_messages: int = Field(default=6, ge=0)
    """Messages before the current turn that the semantic policy treats as recent context."""
    search_results: int = Field(default=2, ge=1)
    """Pages a `recall(query=...)` search returns at most."""

    @field_validator("boundary")
    @classmethod
    def _known_boundary(cls, value):
        get_boundary(value)
        return value

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value):
        get_policy(value)
        return value

    @model_validator(mode="after")
    def _consistent_budgets(self):
        if self.low_water_tokens is not None and not 0 < self.low_water_tokens <= self.max_tokens:
            raise ValueError("`low_water_tokens` must be positive and at most `max_tokens`.")
        if self.recall_max_tokens is not None and self.recall_max_tokens <= 0:
            raise ValueError("`recall_max_tokens` must be positive.")
        if self.token_counter is not None and not callable(self.token_counter):
            raise ValueError("`token_counter` must be callable: messages -> int.")
        return self

    @property
    def effective_low_water(self) -> int:
        """`low_water_tokens`, or 75% of `max_tokens`."""
        return self.low_water_tokens or max(1, int(self.max_tokens * 0.75))

    @property
    def effective_recall_max_tokens(self) -> int:
        """`recall_max_tokens`, or a third of `max_tokens` (at least 256)."""
        return self.recall_max_tokens or max(256, self.max_tokens // 3)
