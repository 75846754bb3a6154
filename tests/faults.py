"""Fault injection for LangGraph stores: fail (or kill the process at) chosen `batch`/`abatch` calls."""

from __future__ import annotations

import os
import random
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.store.base import BaseStore, Op, Result

from langmem_paging.store import abatch_any


class StoreFault(ConnectionError):
    """The injected failure (a ConnectionError, as a dropped database connection raises)."""


class FaultyStore(BaseStore):
    """Delegates every call to `store`, counting `batch`/`abatch` calls; the calls numbered in
    `fail_at` (1-based, counted since the last `arm`) raise `StoreFault` before reaching the store, and
    so does each call with probability `p` (seeded).

    `on_call(n)`, if given, runs before call `n` reaches the store (e.g. to SIGKILL the process there).
    """

    def __init__(self, store: BaseStore, *, fail_at: Iterable[int] = (), p: float = 0.0, seed: int = 0,
                 on_call: Callable[[int], None] | None = None) -> None:
        self.store = store
        self.fail_at = set(fail_at)
        self.p = p
        self.rng = random.Random(seed)
        self.on_call = on_call
        self.calls = 0
        self.failures = 0
        self.phases: list[str] = []
        """For each call since `arm`: ``recall`` if a recall made it, else ``step`` (a paging step)."""

    @property
    def supports_ttl(self) -> bool:  # type: ignore[override]
        return getattr(self.store, "supports_ttl", False)

    def arm(self, *, fail_at: Iterable[int] = (), p: float = 0.0) -> None:
        """Restart the call count and fail the calls numbered `fail_at` (and each with probability p)."""
        self.calls, self.fail_at, self.p, self.phases = 0, set(fail_at), p, []

    def _tick(self) -> None:
        self.calls += 1
        self.phases.append(_phase())
        if self.on_call is not None:
            self.on_call(self.calls)
        if self.calls in self.fail_at or (self.p and self.rng.random() < self.p):
            self.failures += 1
            raise StoreFault(f"injected store failure at call {self.calls}")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        self._tick()
        return self.store.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self._tick()
        return await abatch_any(self.store, list(ops))  # a sync-only store: one counted call either way


_RECALL_FRAMES = {"recall", "arecall", "members"}


def _phase() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in _RECALL_FRAMES and "langmem_paging" in frame.f_code.co_filename:
            return "recall"
        frame = frame.f_back
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

        def wrapped(*args, _original=original, **kwargs):
            count["n"] += 1
            on_put(count["n"])
            return _original(*args, **kwargs)

        setattr(saver, name, wrapped)
    return saver
