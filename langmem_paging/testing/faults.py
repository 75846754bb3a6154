"""Fault injection for LangGraph stores: see what paging does when the store fails.

`FaultInjectingStore` wraps any `BaseStore` and fails chosen `batch`/`abatch` calls: by number
(``fail_at``, counted since the last `arm`), or each with a seeded probability ``p``; a failure
happens before the call reaches the store, or (a share ``landed`` of them) after it landed, as a
connection dropped on the way back does. It counts calls, notes for each whether a recall or a
paging step made it (``phases``), runs an ``on_call`` hook before each call (a crash test kills
the process there), and records page and cluster records written again with other content
(``rewrites``: records must never change once written, but by `forget`).

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from langmem_paging import PageStore
    >>> from langmem_paging.core.errors import PageStoreError
    >>> store = FaultInjectingStore(InMemoryStore(), fail_at=[1])
    >>> pages = PageStore(store, retries=0)
    >>> try:
    ...     pages.get("t", "p1")
    ... except PageStoreError as error:
    ...     print(type(error.__cause__).__name__, store.failures)
    StoreFault 1
    >>> pages.get("t", "p1") is None, store.calls
    (True, 2)
"""

from __future__ import annotations

import os
import random
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.store.base import BaseStore, Op, PutOp, Result

from langmem_paging.storage.page_store import NAMESPACE_ROOT, abatch_any

__all__ = ["FaultInjectingStore", "StoreFault", "kill_at", "wrap_checkpointer_puts"]


class StoreFault(ConnectionError):
    """The injected failure (a ConnectionError, as a dropped database connection raises)."""


class FaultInjectingStore(BaseStore):
    """Delegates every call to `store`, failing the calls it is told to (see the module docstring).

    Args:
        store: The store to wrap.
        fail_at: Call numbers (1-based, counted since the last `arm`) that fail.
        p: Probability that any call fails (drawn from a generator seeded with `seed`).
        seed: Seed of the draws.
        landed: Share of failures raised after the call reached the store (its writes landed).
        on_call: Run with the call's number before it reaches the store.
        error: The exception type raised.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        fail_at: Iterable[int] = (),
        p: float = 0.0,
        seed: int = 0,
        landed: float = 0.0,
        on_call: Callable[[int], None] | None = None,
        error: type[Exception] = StoreFault,
    ) -> None:
        self.store = store
        self.fail_at = set(fail_at)
        self.p = p
        self.landed = landed
        self.rng = random.Random(seed)
        self.on_call = on_call
        self.error = error
        self.enabled = True
        """False: no call fails (the counts go on)."""
        self.calls = 0
        """Calls since the last `arm`."""
        self.failures = 0
        """Calls failed so far."""
        self.phases: list[str] = []
        """For each call since `arm`: ``recall`` if a recall made it, ``forget`` if `forget` did, else ``step``."""
        self.rewrites: list[str] = []
        """Page and cluster records written again with other content, but by `forget` (never should
        happen)."""
        self.written: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
        """Every page and cluster record written, by (namespace, key)."""

    @property
    def supports_ttl(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.store, "supports_ttl", False))

    @property
    def ttl_config(self) -> Any:  # type: ignore[override]
        return getattr(self.store, "ttl_config", None)

    def arm(self, *, fail_at: Iterable[int] = (), p: float = 0.0) -> None:
        """Restart the call count and fail the calls numbered `fail_at` (and each with probability p)."""
        self.calls, self.fail_at, self.p, self.phases = 0, set(fail_at), p, []

    def _failing(self) -> tuple[bool, bool]:
        """Count a call; whether it fails, and whether after landing."""
        self.calls += 1
        self.phases.append(_phase())
        if self.on_call is not None:
            self.on_call(self.calls)
        fails = self.enabled and (self.calls in self.fail_at or bool(self.p and self.rng.random() < self.p))
        if not fails:
            return False, False
        self.failures += 1
        return True, bool(self.landed and self.rng.random() >= 1 - self.landed)

    def _raise(self, landed: bool) -> None:
        where = " (after the call landed)" if landed else ""
        raise self.error(f"injected store failure at call {self.calls}{where}")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        fails, landed = self._failing()
        if fails and not landed:
            self._raise(False)
        self._record(ops)
        results = self.store.batch(ops)
        if fails:
            self._raise(True)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        fails, landed = self._failing()
        if fails and not landed:
            self._raise(False)
        self._record(ops)
        results = await abatch_any(self.store, ops)  # a sync-only store: one counted call either way
        if fails:
            self._raise(True)
        return results

    def _record(self, ops: list[Op]) -> None:
        for op in ops:
            if (
                isinstance(op, PutOp)
                and op.namespace[:1] == (NAMESPACE_ROOT,)
                and op.namespace[-1] in ("pages", "clusters")
                and op.value is not None
            ):
                key = (op.namespace, op.key)
                old = self.written.get(key)
                if old is not None and old != op.value and _phase() != "forget":
                    was, now = old.get("digest", ""), op.value.get("digest", "")
                    change = f"{was} -> {now}" if was != now else f"{now} (same messages, other content)"
                    self.rewrites.append(f"{op.namespace[1]}/{op.namespace[2]}/{op.key}: {change}")
                self.written[key] = dict(op.value)


_PHASES = {"recall": "recall", "arecall": "recall", "members": "recall", "amembers": "recall"}
_PHASES.update({"forget": "forget", "aforget": "forget"})


def _phase() -> str:
    """``recall``, ``forget`` (the one path that rewrites a record) or ``step``: who made this call."""
    frame = sys._getframe(2)
    while frame is not None:
        phase = _PHASES.get(frame.f_code.co_name)
        if phase is not None and "langmem_paging" in frame.f_code.co_filename:
            return phase
        frame = frame.f_back  # type: ignore[assignment]
    return "step"


def kill_at(n: int, *, before: Callable[[], None] | None = None) -> Callable[[int], None]:
    """An `on_call` that SIGKILLs this process just before call `n` (nothing after it runs); `before`
    runs first (to note where it died)."""

    def maybe_kill(call: int) -> None:
        if call == n:
            if before is not None:
                before()
            os.kill(os.getpid(), signal.SIGKILL)

    return maybe_kill


def wrap_checkpointer_puts(saver: Any, on_put: Callable[[int], None]) -> Any:
    """Call `on_put(n)` before the n-th checkpoint write of `saver` (`put` and `put_writes`)."""
    count = {"n": 0}
    for name in ("put", "put_writes"):
        original = getattr(saver, name)

        def wrapped(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            count["n"] += 1
            on_put(count["n"])
            return _original(*args, **kwargs)

        setattr(saver, name, wrapped)
    return saver
