"""Every paging option, in one validated object shared by the middleware, the node and the tool.

`PagingMiddleware(max_tokens=4000, policy="lfu")` and `PagingNode(...)` take these
options as keywords (or a ready `PagingConfig` as ``config=``). Bad values fail at
construction with a message naming the option and the fix.

Example:
    >>> PagingConfig(max_tokens=4000).effective_low_water
    3000
    >>> PagingConfig(max_tokens=4000, policy="lfuu")
    Traceback (most recent call last):
    ...
    ValueError: Invalid paging option `policy`: Unknown policy 'lfuu'. Available: 'fifo', 'lru', 'lfu', 'semantic', 'stae' (or an EvictionPolicy instance).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SkipValidation,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from langmem_paging.core.hooks import PagingHooks
from langmem_paging.core.tokens import get_encoding, resolve_token_counter
from langmem_paging.strategies.bookmarks import Bookmarker, as_bookmarker
from langmem_paging.strategies.boundaries import BoundaryStrategy, get_boundary
from langmem_paging.strategies.policies import get_policy
from langmem_paging.strategies.policy import EvictionPolicy
from langmem_paging.strategies.tiers import TierMode, get_tiers

if TYPE_CHECKING:  # imported for typing only: the embeddings module imports numpy
    from langmem_paging.strategies.embeddings import Embedder

__all__ = [
    "RECALL_BUDGET_SHARE",
    "RECALL_MIN_TOKENS",
    "Budget",
    "BasePagingOptions",
    "BookmarkFn",
    "MessageCounter",
    "PagingConfig",
    "PagingOptions",
    "check_call_options",
    "check_embedder",
    "check_thread_id",
    "resolve_max_tokens",
]

Fraction = tuple[Literal["fraction"], float]
Budget = int | tuple[Literal["tokens"], int] | Fraction
"""A token budget as LangChain's middleware take one: ``4000``, ``("tokens", 4000)`` or
``("fraction", 0.5)`` of the model's context window."""

MessageCounter = Callable[[Sequence[BaseMessage]], int]
"""A user's token counter: messages -> tokens."""

BookmarkFn = Callable[[str, Sequence[BaseMessage], Any], tuple[str, Sequence[str]]]
"""A user's bookmark function: ``(page_id, messages, context) -> (text, keywords)``."""

RECALL_MIN_TOKENS = 64
"""A recall result's room before any step measured the context: at least this many tokens..."""
RECALL_BUDGET_SHARE = 0.5
"""...or this share of the message budget, when `recall_max_tokens` is not set."""

_KNOWN: dict[str, Callable[[Any], object]] = {
    "boundary": get_boundary,
    "policy": get_policy,
    "bookmarker": lambda value: value is None or as_bookmarker(value),
    "encoding": lambda name: name is None or get_encoding(name),
    "search_embedder": lambda value: check_embedder(value),  # defined below
    "tiers": get_tiers,
}
"""The options a resolver checks, each kept as given: its error names the choices."""


class BasePagingOptions(TypedDict, total=False):
    """The paging options as keyword arguments but `max_tokens` and `model` (`create_paging_agent`
    names its chat model `model`): what `PagingOptions` and `AgentPagingOptions` share. Defaults
    and documentation live on `PagingConfig` (``PagingConfig.fields()``); a test keeps the two in step."""

    low_water_tokens: Budget | None
    boundary: str | BoundaryStrategy
    policy: str | EvictionPolicy
    mode: Literal["replace", "view"]
    encoding: str | None
    token_counter: MessageCounter | BaseChatModel | Literal["approximate"] | None
    bookmarker: Bookmarker | BookmarkFn | str | None
    recall_max_tokens: int | None
    recent_messages: int
    search_results: int
    passage_neighbours: int
    bookmark_share: float
    large_result_share: float | None
    cluster_threshold: float
    max_clusters: int | None
    hooks: Sequence[PagingHooks]
    search_embedder: Embedder | Embeddings | str | None
    tiers: TierMode | str | None
    tool_name: str
    calibrate: bool


class PagingOptions(BasePagingOptions, total=False):
    """The paging options as keyword arguments (everything but `max_tokens`), for typing
    ``**options`` of `page_messages`, `PagingMiddleware` and `PagingNode`."""

    model: str | BaseChatModel | None


class PagingConfig(BaseModel):
    """Paging options, validated once, frozen.

    Args: the options, keyword-only (``max_tokens`` required): one list, the fields below, each
    documented, listed with types and defaults by `PagingConfig.documented()` and docs/options.md
    (generated from it).

    Raises:
        ValueError: For an unknown option or a bad value, naming the option.
        TypeError: For an option of the wrong type.
    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True, extra="forbid", frozen=True, use_attribute_docstrings=True
    )

    max_tokens: int | Fraction
    """Budget for everything the model receives: messages, bookmarks, recalled text, and (with
    `PagingMiddleware`) the system prompt and tool schemas. An int, ``("tokens", 4000)``, or
    ``("fraction", 0.5)`` of the model's context window (read from the chat model's profile)."""
    low_water_tokens: Budget | None = None
    """When over budget, page down to this (default 75% of the message budget), so paging
    happens in steps rather than every turn: an int, ``("tokens", 3000)``, or ``("fraction", 0.6)``
    of the message budget."""
    boundary: SkipValidation[str | BoundaryStrategy] = "fixed_20"
    """How pages are cut: `fixed_N`, `tokens_N`, `exchange`, `session`, `topic_shift`, or a
    `BoundaryStrategy`."""
    policy: SkipValidation[str | EvictionPolicy] = "fifo"
    """Which page goes next: `fifo`, `lru`, `lfu`, `semantic`, `stae` (or a spec such as
    ``"stae:beta=0.7,grouping=kmeans"``), or an `EvictionPolicy`."""
    mode: Literal["replace", "view"] = "replace"
    """`replace`: bookmarks replace pages in state. `view`: state keeps the full history and
    the model is shown the paged view."""
    model: SkipValidation[str | BaseChatModel | None] = None
    """A model name (``"openai:gpt-4o-mini"``) or chat model, to choose the tiktoken encoding
    (default: the model the agent calls)."""
    encoding: str | None = None
    """tiktoken encoding name (``cl100k_base`` or ``o200k_base``); overrides `model`."""
    token_counter: SkipValidation[MessageCounter | None] = None
    """How to count a message list instead of tiktoken: a callable ``messages -> int``,
    ``"approximate"`` (langchain_core's `count_tokens_approximately`), or a chat model (its
    `get_num_tokens_from_messages`: the provider's own tokenizer where the integration has one)."""
    bookmarker: SkipValidation[Bookmarker | BookmarkFn | str | None] = None
    """A `Bookmarker`, a function ``(page_id, messages, context) -> (text, keywords)``, or a name:
    ``"compact"`` (the default, ``[p3:Bailey adopted dog,May]``: words space-separated, the date
    after a comma, about twice the words of the comma form in the same tokens), ``"keywords"``
    (the comma form, ``[p3:Bailey,adopted,dog,May]``), ``"discriminative"``."""
    recall_max_tokens: int | None = Field(default=None, gt=0)
    """Size cap of one recall result. By default a result may fill the room the budget leaves
    beside what nothing may evict (the next step pages the rest out)."""
    recent_messages: int = Field(default=6, ge=0)
    """Messages before the newest user message that policies treat as recent context."""
    search_results: int = Field(default=8, ge=1)
    """Passages a `recall(query=...)` returns at most (each a matching message with its neighbours)."""
    passage_neighbours: int = Field(default=2, ge=0)
    """Messages on each side of a matching message that a search passage includes, for the best 8
    hits; the others get at most 1 (a hit comes alone when its window does not fit)."""
    bookmark_share: float = Field(default=0.2, gt=0, le=1)
    """Share of `max_tokens` page and cluster bookmarks may take before old ones fold into
    clusters."""
    large_result_share: float | None = Field(default=0.5, gt=0, le=1)
    """A tool result larger than this share of `max_tokens` is paged as it arrives (None: never)."""
    cluster_threshold: float = Field(default=0.2, ge=0, le=1)
    """A page joins a cluster when the cosine similarity of their terms reaches this."""
    max_clusters: int | None = Field(default=None, ge=1)
    """Cluster roots at most (default: what half the bookmark share holds, at least 2)."""
    hooks: SkipValidation[tuple[PagingHooks, ...]] = ()
    """`PagingHooks` told when pages form, are evicted, are recalled."""
    search_embedder: Any = None  # an Embedder | Embeddings | str | None: `Embedder`'s module imports numpy
    """An `Embedder`, a LangChain ``Embeddings`` (e.g. ``OpenAIEmbeddings``), or an embedder's name
    (``"default"``: local MiniLM int8 on onnxruntime, the ``embeddings`` extra; ``"hashing"``;
    ``"minilm"``: the ``minilm`` extra; ``"openai:<model>"``) to rank search passages by meaning too:
    BM25 over the best BM25 score plus the cosine. None: BM25 only."""
    tiers: SkipValidation[TierMode | str | None] = None
    """Hot/warm/cold tiers: ``TierScoring(...)``, ``UtilityScoring(...)``, or ``"importance"`` /
    ``"utility"``; a tier score then decides what leaves the context (instead of `policy`) and
    which evicted pages stay shown as digests. None: no warm tier."""
    tool_name: str = "recall"
    """The name of the tool the model calls to bring pages back (rename it when your agent has a
    tool of that name already: ``tool_name="memory_recall"``)."""
    calibrate: bool = False
    """`PagingMiddleware` only: correct the count with the provider's ``usage_metadata`` (its
    input-token count of each call): the ratio of the provider's count to the estimate, kept in the
    thread's state (``paging_calibration``, between 0.5 and 2), scales the next call's budget."""

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        return _budget(value, "the model's context window")

    @field_validator("low_water_tokens", mode="before")
    @classmethod
    def _low_water(cls, value: Any) -> Any:
        return None if value is None else _budget(value, "the message budget")

    @field_validator("calibrate", mode="before")
    @classmethod
    def _calibrate(cls, value: Any) -> Any:
        if not isinstance(value, bool):  # pydantic would read "yes", "no", 1 and 0 as booleans
            raise ValueError(f"must be True or False; got {value!r} ({type(value).__name__})")
        return value

    @field_validator(*_KNOWN)
    @classmethod
    def _known(cls, value: Any, info: ValidationInfo) -> Any:
        _KNOWN[str(info.field_name)](value)
        return value

    @field_validator("token_counter")
    @classmethod
    def _counter(cls, value: Any) -> Any:
        return resolve_token_counter(value)

    @field_validator("tool_name")
    @classmethod
    def _tool_name(cls, value: Any) -> Any:
        if not isinstance(value, str) or not _TOOL_NAME.fullmatch(value):
            raise ValueError(
                f"must be 1-64 letters, digits, '_' or '-' (what chat APIs accept); got {value!r}"
            )
        return value

    @field_validator("hooks")
    @classmethod
    def _hooks(cls, value: Any) -> Any:
        for hook in value:
            if not isinstance(hook, PagingHooks):
                raise ValueError(f"must be PagingHooks instances; got {type(hook).__name__}")
        return tuple(value)

    @model_validator(mode="after")
    def _consistent(self) -> PagingConfig:
        if (
            isinstance(self.max_tokens, int)
            and isinstance(self.low_water_tokens, int)
            and self.low_water_tokens > self.max_tokens
        ):
            raise _OptionError(
                "low_water_tokens",
                f"{self.low_water_tokens} is above `max_tokens` "
                f"({self.max_tokens}); it must be at most `max_tokens` (default: 75% of it)",
            )
        return self

    if TYPE_CHECKING:  # typed like the middleware: mypy catches a misspelled or missing option

        def __init__(self, *, max_tokens: Budget, **options: Unpack[PagingOptions]) -> None: ...

    else:  # at run time the errors name the option at fault

        def __init__(self, **options: Any) -> None:
            _check_names(options)
            try:
                super().__init__(**options)
            except ValidationError as error:
                first = error.errors()[0]
                cause = (first.get("ctx") or {}).get("error")
                name = (
                    cause.option
                    if isinstance(cause, _OptionError)
                    else ".".join(str(p) for p in first["loc"]) or "options"
                )
                message = first["msg"].removeprefix("Value error, ")
                raise ValueError(f"Invalid paging option `{name}`: {message}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("PagingConfig is immutable; build a new one with `replace(...)`.")

    def __repr__(self) -> str:
        fields = self.model_dump(exclude_defaults=True)
        return f"PagingConfig({', '.join(f'{k}={v!r}' for k, v in fields.items())})"

    __str__ = __repr__

    def replace(self, **changes: Any) -> PagingConfig:
        """A copy with some options changed."""
        current = {name: getattr(self, name) for name in self.model_fields_set}
        return PagingConfig(**{**current, **changes})

    @staticmethod
    def fields() -> dict[str, str]:
        """Option name -> its documentation."""
        return {name: doc for name, (doc, _) in PagingConfig.documented().items()}

    @staticmethod
    def documented() -> dict[str, tuple[str, Any]]:
        """Option name -> (its documentation, its default): the one option list the docs derive from."""
        return {
            name: (field.description or "", field.default)
            for name, field in PagingConfig.model_fields.items()
        }

    # -- resolved values ---------------------------------------------------------------------
    def low_water_for(self, budget: int) -> int:
        """`low_water_tokens` (capped at the budget; a fraction of it), or 75% of the message budget."""
        low = self.low_water_tokens
        if isinstance(low, int):
            return max(1, min(low, budget))
        return max(1, int(budget * (0.75 if low is None else low[1])))

    @property
    def effective_low_water(self) -> int:
        """The low-water mark for the whole `max_tokens` (an int budget)."""
        if not isinstance(self.max_tokens, int):
            raise ValueError(
                "`effective_low_water` needs an int `max_tokens`; resolve a fraction with "
                "`low_water_for(resolve_max_tokens(max_tokens, model))`."
            )
        return self.low_water_for(self.max_tokens)

    def recall_cap_for(self, budget: int) -> int:
        """Before any step measured the context: `recall_max_tokens`, or half the message budget
        (at least 64). Afterwards `Pager.room_for` sizes results from what is protected."""
        return self.recall_max_tokens or max(RECALL_MIN_TOKENS, int(budget * RECALL_BUDGET_SHARE))


def _check_names(options: dict[str, Any]) -> None:
    """Refuse an unknown option (pointing SummarizationMiddleware's to the migration table) and a
    missing `max_tokens`."""
    unknown = sorted(set(options) - set(PagingConfig.model_fields))
    if migrating := [name for name in unknown if name in _SUMMARIZATION_OPTIONS]:
        raise TypeError(
            f"{' and '.join(f'`{name}`' for name in migrating)} {'are' if len(migrating) > 1 else 'is'} "
            "SummarizationMiddleware's; paging takes "
            "`max_tokens` (when to act) and `low_water_tokens` (how much stays), e.g. trigger=('tokens', "
            "4000), keep=('tokens', 3000) -> max_tokens=4000, low_water_tokens=3000. The migration "
            "table: docs/choosing.md#migrating-from-summarizationmiddlewaretrigger-keep."
        )
    if unknown:
        available = ", ".join(f"`{name}`" for name in PagingConfig.model_fields)
        raise TypeError(
            f"Unknown paging option {', '.join(f'`{u}`' for u in unknown)}. Available: {available}."
        )
    if "max_tokens" not in options:
        raise TypeError("Paging needs `max_tokens`: the token budget of the model's context (e.g. 4000).")


def _budget(value: Any, whole: str) -> int | Fraction:
    """A token budget as LangChain's middleware take one (`Budget`), normalised: an int, or
    ``("fraction", x)`` of `whole`. Checked before pydantic's coercion: True would become a
    1-token budget, "4000" an int."""
    if isinstance(value, bool) or not isinstance(value, (int, tuple, list)):
        raise ValueError(
            f"must be an int number of tokens (e.g. 4000), ('tokens', n) or ('fraction', x); "
            f"got {value!r} ({type(value).__name__})"
        )
    if isinstance(value, (tuple, list)):
        number = value[1] if len(value) == 2 and isinstance(value[1], (int, float)) else None
        if value[0] == "tokens" and number is not None and float(number).is_integer() and number > 0:
            return int(number)
        if value[0] != "fraction" or number is None or not 0 < number <= 1:
            raise ValueError(
                f"use an int, ('tokens', n) with n > 0, or ('fraction', x) with 0 < x <= 1 of {whole}"
            )
        return ("fraction", float(number))
    if value <= 0:
        raise ValueError("must be a positive number of tokens")
    return value


class _OptionError(ValueError):
    """A check across options that names the option at fault (pydantic's error has no field)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


_SUMMARIZATION_OPTIONS = ("trigger", "keep")
"""`SummarizationMiddleware`'s names for `max_tokens` and `low_water_tokens` (docs/choosing.md)."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_embedder(value: Any) -> None:
    """A `search_embedder` names an embedder without building it (a model or a client would load).

    Raises:
        ValueError: For an unknown name, naming the known ones; for a named embedder whose extra is
            not installed (``"default"``: ``embeddings``; ``"minilm"``; ``"openai:..."``), naming it.
    """
    from langmem_paging.strategies.embeddings import EMBEDDERS, Embedder, missing_packages

    if value is None or isinstance(value, (Embedder, Embeddings)):
        return
    if not isinstance(value, str):
        raise ValueError(
            f"must be an Embedder, a LangChain Embeddings or an embedder name; got {type(value).__name__}"
        )
    family, _, model = value.partition(":")
    if family == "openai" or (value in EMBEDDERS and not model):
        if missing := missing_packages(family):
            raise ValueError(f"{value!r} {missing}")
        return
    available = ", ".join(repr(name) for name in EMBEDDERS)
    raise ValueError(
        f"Unknown embedder {value!r}. Available: {available} (or 'openai:<model>'), "
        "an Embedder instance or a LangChain Embeddings"
    )


def check_call_options(*, ttl: Any, index: Any) -> None:
    """The options `PagingMiddleware` and `PagingNode` take beside a `PagingConfig`, checked when
    they are built (the store they apply to comes with each call, later).

    Raises:
        ValueError, TypeError: Naming the option.
    """
    from langmem_paging.index.base import SearchIndex

    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0):
        raise ValueError(
            f"Invalid paging option `ttl`: must be a positive number of minutes, or None; got {ttl!r}."
        )
    if index is not None and not isinstance(index, SearchIndex):
        hint = (
            " The SQLite index is the default for a SqliteStore: drop `index=`, or pass "
            "`SqliteSearchIndex(path)`."
            if isinstance(index, str)
            else ""
        )
        raise TypeError(
            f"Invalid paging option `index`: must be a SearchIndex (InMemoryBM25Index, "
            f"SqliteSearchIndex, PostgresSearchIndex), got {index!r}.{hint}"
        )


def check_thread_id(thread_id: str) -> str:
    """A thread id the stores can key: no NUL character (PostgreSQL rejects it in text; retrying
    cannot help, so it fails here, at once).

    Raises:
        ValueError: Naming the thread id.
    """
    if "\x00" in thread_id:
        raise ValueError(
            f"Invalid thread_id {thread_id!r}: it contains a NUL character, which stores cannot "
            "key. Use printable thread ids (config={'configurable': {'thread_id': '...'}})."
        )
    return thread_id


def resolve_max_tokens(max_tokens: int | tuple[str, float], model: Any) -> int:
    """An int budget from `max_tokens`, reading the model's context window for a fraction."""
    if isinstance(max_tokens, int):
        return max_tokens
    window = None
    profile = getattr(model, "profile", None)
    if isinstance(profile, dict):
        window = profile.get("max_input_tokens")
    if not window:
        name = getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__
        raise ValueError(
            f"`max_tokens=('fraction', {max_tokens[1]})` needs the model's context window, but {name!r} "
            "has no profile with `max_input_tokens`. Pass an int `max_tokens` instead."
        )
    return max(1, int(window * max_tokens[1]))
