"""Policy specs for the ablation and the needle benchmark: a name, options, and a tier mode.

A spec is ``NAME`` or ``NAME:key=value,key=value`` (options passed to the policy's class),
optionally joined with ``+tiers:MODE`` (the `tiers` option of `PagingConfig`; ``tiers:MODE``
alone is FIFO with tiers) and ``+bookmarks:NAME`` (the `bookmarker`: a name in
`langmem_paging.strategies.bookmarks.BOOKMARKERS`, or ``frequent``, the ablation's heuristic without
specificity, `FrequentBookmarker`). Values read as booleans (``true``/``false``), ``none``, integers,
floats, or else strings. Examples: ``lfu``, ``stae:beta=0.5,redundancy=knn,grouping=kmeans,
inverted=false``, ``tiers:importance``, ``stae:beta=0.7+tiers:utility``.

The spec string itself is the policy's label in result rows.

Example:
    >>> split_specs("fifo,stae:beta=0.5,grouping=kmeans,lru")
    ['fifo', 'stae:beta=0.5,grouping=kmeans', 'lru']
    >>> parse_spec("stae:beta=0.5,inverted=false+tiers:utility")
    PolicySpec(label='stae:beta=0.5,inverted=false+tiers:utility', name='stae', options={'beta': 0.5, 'inverted': False}, tiers='utility', bookmarker=None)
    >>> parse_spec("tiers:importance").name
    'fifo'
    >>> parse_spec("lfu+bookmarks:discriminative").bookmarker
    'discriminative'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from langmem_paging.strategies.bookmarks import BOOKMARKERS, BookmarkContext, KeywordBookmarker
from langmem_paging.strategies.keywords import PageTerms, score_terms

__all__ = [
    "ABLATION_BOOKMARKERS",
    "FrequentBookmarker",
    "PolicySpec",
    "paging_options",
    "parse_spec",
    "split_specs",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_OPTION = re.compile(r"^[a-z_][a-z0-9_]*=.*$")


@dataclass(frozen=True)
class PolicySpec:
    """A parsed policy spec."""

    label: str
    """The spec as written: the policy's name in result rows."""
    name: str
    """Policy name (`langmem_paging.strategies.policies.POLICIES`, or ``stae``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the policy's class."""
    tiers: str | None = None
    """`PagingConfig(tiers=...)` value, or None for no tiers."""
    bookmarker: str | None = None
    """`PagingConfig(bookmarker=...)` name, or None for the library's default."""


class FrequentBookmarker(KeywordBookmarker):
    """The ablation's heuristic: a page's most frequent words, with no weight for how rare they are
    in the thread (every term's thread frequency is taken as zero). Beside the default bookmarker
    it measures what keyword specificity is worth, so it shows its words in the default's form
    (``separator=" "``, the compact bookmark, counting terms linearly as it does); it is not meant
    for use."""

    name = "frequent"

    def __init__(self, **options: Any) -> None:
        super().__init__(**{"separator": " ", **options})

    def _scored(self, terms: PageTerms, context: BookmarkContext) -> list[tuple[str, float]]:
        return score_terms(terms, {}, context.n_docs, background=False, linear_tf=self.separator == " ")


ABLATION_BOOKMARKERS = {**BOOKMARKERS, "frequent": FrequentBookmarker}
"""Bookmark strategies a spec may name: the library's, and the ablation's heuristic."""


def split_specs(text: str) -> list[str]:
    """Split a comma-separated list of specs; ``key=value`` pieces belong to the spec before."""
    out: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if _OPTION.match(piece) and out and ":" in out[-1]:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_spec(spec: str) -> PolicySpec:
    """Parse one spec (syntax only; `paging_options` checks that the library has it).

    Raises:
        ValueError: For a malformed spec, naming what is wrong.
    """
    label = spec.strip()
    parts = label.split("+")
    bookmarker = _bookmarker_part(spec, parts)
    policy_part, tiers = _tier_part(spec, parts)
    name, _, raw = policy_part.partition(":")
    if not _NAME.match(name):
        raise ValueError(f"Policy spec {spec!r}: {name!r} is not a policy name.")
    return PolicySpec(label, name, _options(spec, raw), tiers, bookmarker)


def _bookmarker_part(spec: str, parts: list[str]) -> str | None:
    """The bookmarker's name of a trailing ``bookmarks:NAME`` part, popped from `parts`; None without one."""
    if len(parts) < 2 or not parts[-1].startswith("bookmarks:"):
        return None
    bookmarker = parts.pop().removeprefix("bookmarks:")
    if not _NAME.match(bookmarker):
        raise ValueError(
            f"Policy spec {spec!r}: the bookmark part must read 'bookmarks:NAME', e.g. "
            "'bookmarks:discriminative'."
        )
    return bookmarker


def _tier_part(spec: str, parts: list[str]) -> tuple[str, str | None]:
    """``(policy part, tier mode or None)`` of `parts` (the bookmark part popped): ``POLICY``,
    ``POLICY+tiers:MODE`` or ``tiers:MODE`` (FIFO with tiers)."""
    if len(parts) > 2:
        raise ValueError(
            f"Policy spec {spec!r}: at most one '+tiers:MODE' may follow the policy (then '+bookmarks:NAME')."
        )
    if parts[0].startswith("tiers:"):
        if len(parts) > 1:
            raise ValueError(f"Policy spec {spec!r}: write the policy first, then '+tiers:MODE'.")
        policy_part, tiers = "fifo", parts[0]
    elif len(parts) == 2:
        policy_part, tiers = parts
    else:
        return parts[0], None
    mode = tiers.removeprefix("tiers:")
    if not tiers.startswith("tiers:") or not _NAME.match(mode):
        raise ValueError(
            f"Policy spec {spec!r}: the tier part must read 'tiers:MODE', e.g. 'tiers:importance'."
        )
    return policy_part, mode


def _options(spec: str, raw: str) -> dict[str, Any]:
    """The policy's options from `raw`, ``key=value,key=value`` (empty pieces skipped)."""
    options: dict[str, Any] = {}
    for item in (i for i in raw.split(",") if i) if raw else ():
        key, eq, value = item.partition("=")
        if not eq or not _NAME.match(key.strip()):
            raise ValueError(f"Policy spec {spec!r}: option {item!r} must read key=value.")
        if key.strip() in options:
            raise ValueError(f"Policy spec {spec!r}: option {key.strip()!r} given twice.")
        options[key.strip()] = _value(value.strip())
    return options


def _policy_class(name: str):
    from langmem_paging.strategies.policies import POLICIES

    if name in POLICIES:
        return POLICIES[name]
    if name == "stae":
        try:
            from langmem_paging.strategies.stae import STAEPolicy
        except ImportError:
            raise ValueError(
                "Policy 'stae' needs langmem_paging.strategies.stae.STAEPolicy, which this version of "
                "langmem_paging does not have yet."
            ) from None
        return STAEPolicy
    available = ", ".join(repr(n) for n in [*POLICIES, *(["stae"] if "stae" not in POLICIES else [])])
    raise ValueError(f"Unknown policy {name!r}. Available: {available}.")


def paging_options(spec: str | PolicySpec) -> dict[str, Any]:
    """`PagingConfig` keyword arguments for a spec: ``policy`` (a name, or a new policy object
    when options are given) and ``tiers`` when the spec has a tier mode. Build it once per
    replayed thread: policy objects may keep per-thread state.

    Raises:
        ValueError: For an unknown policy or bookmarker, options the policy's class rejects, or tiers when
            this `PagingConfig` has no `tiers` option.
    """
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    cls = _policy_class(parsed.name)
    out: dict[str, Any] = {}
    if parsed.options:
        try:
            out["policy"] = cls(**parsed.options)
        except TypeError as error:
            raise ValueError(f"Policy spec {parsed.label!r}: {error}") from None
    else:
        out["policy"] = parsed.name if parsed.name != "stae" else cls()
    if parsed.tiers is not None:
        from langmem_paging import PagingConfig

        if "tiers" not in PagingConfig.fields():
            raise ValueError(
                f"Policy spec {parsed.label!r}: tier mode {parsed.tiers!r} needs "
                "PagingConfig(tiers=...), which this version of langmem_paging does not have yet."
            )
        out["tiers"] = parsed.tiers
    if parsed.bookmarker is not None:
        if parsed.bookmarker not in ABLATION_BOOKMARKERS:
            available = ", ".join(repr(n) for n in ABLATION_BOOKMARKERS)
            raise ValueError(
                f"Policy spec {parsed.label!r}: unknown bookmarker {parsed.bookmarker!r}. "
                f"Available: {available}."
            )
        out["bookmarker"] = ABLATION_BOOKMARKERS[parsed.bookmarker]()
    return out
