"""Is a store ready for paging: the store answers, and its search index and number claims can be
used (their tables exist, or were just created: the library creates them on first use)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph.store.base import BaseStore, ListNamespacesOp, MatchCondition

from langmem_paging.index.defaults import default_index
from langmem_paging.storage.claims import claims_for
from langmem_paging.storage.page_store import NAMESPACE_ROOT, abatch_any

__all__ = ["Check", "Readiness", "acheck_ready"]

PROBE_THREAD = "langmem-paging-readiness-probe"
"""The thread id the probes read (nothing is ever written under it)."""


@dataclass
class Check:
    """One part of the store paging needs."""

    name: str
    """``store``, ``index`` or ``claims``."""
    ok: bool
    """It answered."""
    kind: str
    """Its class (``PostgresStore``, ``SqliteSearchIndex``, ``InProcessClaims``, ...)."""
    detail: str
    """What was checked, or why it failed (the error)."""


@dataclass
class Readiness:
    """The result of `acheck_ready`."""

    ready: bool
    """Every check passed."""
    checks: list[Check] = field(default_factory=list)
    """One per part, in the order checked."""

    @property
    def missing(self) -> list[str]:
        """The names of the parts that failed."""
        return [c.name for c in self.checks if not c.ok]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: ``{"ready", "missing", "checks": {name: {ok, kind, detail}}}``."""
        checks = {c.name: {k: v for k, v in asdict(c).items() if k != "name"} for c in self.checks}
        return {"ready": self.ready, "missing": self.missing, "checks": checks}


async def acheck_ready(store: BaseStore, *, timeout: float = 5.0) -> Readiness:
    """Check the store, its default search index and its number claims, each with one read (the
    claims: an empty claim, which creates their table where it is missing, as the first page would).

    Args:
        store: The store the agent pages into.
        timeout: Seconds each check may take before it counts as failed.

    Returns:
        A `Readiness`: ``ready`` when all three answered; a failed check holds the error (a store
        whose ``setup()`` was never run: ``relation "store" does not exist``).
    """
    probes: list[tuple[str, str, Callable[[], Any], Callable[[Any], Awaitable[Any]]]] = [
        (
            "store",
            "answers a read",
            lambda: store,
            lambda s: abatch_any(
                s,
                [ListNamespacesOp(match_conditions=(MatchCondition("prefix", (NAMESPACE_ROOT,)),), limit=1)],
            ),
        ),
        ("index", "answers a read", lambda: default_index(store), lambda i: i.aindexed_through(PROBE_THREAD)),
        (
            "claims",
            "answers an empty claim",
            lambda: claims_for(store),
            lambda c: c.aclaim(PROBE_THREAD, "p", [], []),
        ),
    ]
    checks = [await _check(name, detail, part, probe, timeout) for name, detail, part, probe in probes]
    return Readiness(ready=all(c.ok for c in checks), checks=checks)


async def _check(
    name: str, detail: str, part: Callable[[], Any], probe: Callable[[Any], Awaitable[Any]], timeout: float
) -> Check:
    kind = name
    try:
        made = part()  # an index or claims object may fail to open its tables
        kind = type(made).__name__
        await asyncio.wait_for(probe(made), timeout)
    except TimeoutError:
        return Check(name, False, kind, f"no answer within {timeout:g}s")
    except Exception as error:  # noqa: BLE001 - what failed is the answer
        text = str(error).strip()
        return Check(
            name, False, kind, f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:300]
        )
    return Check(name, True, kind, detail)
