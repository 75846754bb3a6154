"""Failures, reports and the errors a case may raise."""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langmem_paging.core.errors import StorageError


class InjectedStoreError(RuntimeError):
    """The flaky store's failure (what a dropped connection looks like to the library)."""


INJECTED = (InjectedStoreError, StorageError)
"""An injected failure as the caller sees it: the store's own error, or the `PageStoreError` /
`SearchIndexError` the library reports it as once retries are spent."""


class FuzzFailure(Exception):
    """Raised inside a case to stop it after a failure was recorded."""


# -- failures and reports --------------------------------------------------------------------


@dataclass
class Failure:
    """One invariant violation."""

    invariant: str
    """Which invariant broke (a short name)."""
    detail: str
    """What was seen."""
    case: str
    """The case that found it (mode and parameters)."""
    seed: int
    """Seed that reproduces the case."""
    where: str = ""
    """Library frame where an exception was raised (for exceptions)."""

    @property
    def flags(self) -> str:
        """What happened in the case before the failure (spoofed metadata, reused ids, removals, ...)."""
        return self.invariant.split(" [", 1)[1].rstrip("]") if " [" in self.invariant else ""

    @property
    def signature(self) -> str:
        """Failures with the same signature are one distinct bug (probably): the invariant and,
        for exceptions, where they were raised. Flags are left out (see `flags`)."""
        name = self.invariant.split(" [", 1)[0]
        return f"{name} | {self.where}" if self.where else name


@dataclass
class Report:
    """Counts and failures of a campaign."""

    cases: Counter = field(default_factory=Counter)
    turns: Counter = field(default_factory=Counter)
    steps: Counter = field(default_factory=Counter)
    checks: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    notes: Counter = field(default_factory=Counter)

    def fail(
        self, invariant: str, detail: str, case: str, seed: int, error: BaseException | None = None
    ) -> None:
        where = _library_frame(error) if error is not None else ""
        self.failures.append(Failure(invariant, detail[:2000], case, seed, where))

    def distinct(self) -> dict[str, list[Failure]]:
        out: dict[str, list[Failure]] = {}
        for failure in self.failures:
            out.setdefault(failure.signature, []).append(failure)
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "cases": dict(self.cases),
            "turns": dict(self.turns),
            "model_calls": dict(self.steps),
            "checks": dict(self.checks),
            "notes": dict(self.notes),
            "distinct_failures": {sig: _describe(fs) for sig, fs in self.distinct().items()},
        }


def _describe(failures: list[Failure]) -> dict[str, Any]:
    simplest = min(failures, key=lambda f: (len(f.flags.split(",")) if f.flags else 0, len(f.case)))
    return {
        "count": len(failures),
        "seeds": sorted({f.seed for f in failures})[:12],
        "flag_sets": dict(Counter(f.flags or "-" for f in failures).most_common(8)),
        "simplest_seed": simplest.seed,
        "simplest_case": simplest.case,
        "detail": simplest.detail[:600],
    }


def _library_frame(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "langmem_paging" in f.filename]
    frame = (ours or frames or [None])[-1]
    name = type(error).__name__
    if frame is None:
        return name
    return f"{name} at {Path(frame.filename).name}:{frame.lineno} {frame.name}"


def failure_key(failure: Failure | None) -> str | None:
    """What must stay the same while shrinking: the invariant, without the flags."""
    return None if failure is None else failure.invariant.split(" [")[0]
