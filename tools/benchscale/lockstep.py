"""Threads driven like the middleware drives them, grown in lockstep on one shared history."""

from __future__ import annotations

import cProfile
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, trim_messages
from langgraph.graph.message import add_messages

from langmem_paging import TokenCounter
from langmem_paging.integrations.graph_state import GraphCall
from langmem_paging.runtime.pager import Pager

from .settings import MAX_TOKENS, TRIM_KWARGS
from .stats import summary


@dataclass
class Runner:
    """One thread driven like `PagingMiddleware.wrap_model_call` drives it."""

    name: str
    mode: str
    policy: str
    pager: Pager
    history: list[BaseMessage]
    """The thread's full history (shared by all runners: append-only)."""
    thread_id: str
    messages: list[BaseMessage] = field(default_factory=list)
    """Replace mode: the graph state's messages (bookmarks in place of pages)."""
    paging: dict[str, Any] = field(default_factory=dict)
    """The checkpointed paging state (``state["paging"]``)."""
    build_step_s: float = 0.0
    build_steps: int = 0
    curve: dict[int, list[float]] = field(default_factory=dict)

    def feed(self, segment: list[BaseMessage]) -> None:
        """What the graph's reducer does with new input (replace mode keeps its own state)."""
        if self.mode == "replace":
            self.messages = add_messages(self.messages, segment)

    def step(self) -> tuple[dict[str, float], Any]:
        """One model call's paging work; returns its timings (ms) and the `PagingResult`."""
        source = self.messages if self.mode == "replace" else self.history
        t0 = time.perf_counter()
        call = GraphCall.prepare(source, self.paging, self.mode, self.thread_id)
        t1 = time.perf_counter()
        result = self.pager.step(call.view, call.state, call.thread_id, overhead=0)
        t2 = time.perf_counter()
        update = call.update(result)
        t3 = time.perf_counter()
        if "messages" in update:
            self.messages = add_messages(self.messages, update["messages"])
        self.paging = update.get("paging", self.paging)
        t4 = time.perf_counter()
        return {
            "prepare": (t1 - t0) * 1e3,
            "pager": (t2 - t1) * 1e3,
            "update": (t3 - t2) * 1e3,
            "middleware": (t3 - t0) * 1e3,
            "reducer": (t4 - t3) * 1e3,
        }, result


def pages_of(result) -> bool:
    return bool(result.pages or result.evicted or result.nodes)


def time_trim(history: list[BaseMessage], counter) -> tuple[float, int]:
    t0 = time.perf_counter()
    kept = trim_messages(history, max_tokens=MAX_TOKENS, token_counter=counter, **TRIM_KWARGS)
    return (time.perf_counter() - t0) * 1e3, len(kept)


@dataclass
class Lockstep:
    """Runners fed the same history one chat segment at a time (the history is shared, append-only)."""

    stream: Iterator[list[BaseMessage]]
    history: list[BaseMessage]
    runners: list[Runner]
    bucket: int
    """Width (messages) of a build-curve bucket."""
    calls: int = 0
    """Model calls made while building (paging happens every `build_every`)."""
    build_wall: float = 0.0
    max_seen: dict[str, int] = field(
        default_factory=lambda: {"tokens": 0, "over_budget_calls": 0, "calls": 0}
    )
    """Most tokens any measured call received, and the over-budget and measured call counts."""

    def next_segment(self) -> None:
        segment = next(self.stream)
        self.history.extend(segment)
        for runner in self.runners:
            runner.feed(segment)

    def build_to(self, size: int, build_every: int) -> None:
        """Step every `build_every` model calls until the history has `size` messages."""
        t_build = time.perf_counter()
        while len(self.history) < size:
            self.next_segment()
            self.calls += 1
            if self.calls % build_every:
                continue
            for runner in self.runners:
                timing, _ = runner.step()
                runner.build_step_s += timing["middleware"] / 1e3
                runner.build_steps += 1
                runner.curve.setdefault(len(self.history) // self.bucket * self.bucket, []).append(
                    timing["middleware"]
                )
        self.build_wall += time.perf_counter() - t_build

    def window(self, repeats: int, tiktoken_counter: TokenCounter) -> tuple[dict[str, list], dict[str, Any]]:
        """Measure `repeats` model calls of every runner, then trim_messages on each history those
        calls saw (side by side: the same lengths).

        trim_messages runs apart from the calls: run right before them, its pass over the whole
        history left the CPU's caches cold for the call after it, a cost that grows with the history
        and is not the library's (fifo, with trim before it, 0.48 ms a call at 1k messages and 0.88 ms
        at 10k). The runners go in a shuffled order each round (seeded), so none always follows the
        same one."""
        samples: dict[str, list] = {r.name: [] for r in self.runners}
        order = random.Random(len(self.history))
        lengths = []
        for _ in range(repeats):
            self.next_segment()
            lengths.append(len(self.history))
            for runner in order.sample(self.runners, len(self.runners)):
                samples[runner.name].append(self._measured_step(runner))
        trims: dict[str, list[float]] = {"approximate": [], "tiktoken": []}
        trim_kept = []
        for length in lengths:
            history = self.history[:length]
            ms, kept = time_trim(history, "approximate")
            trims["approximate"].append(ms)
            trim_kept.append(kept)
            trims["tiktoken"].append(time_trim(history, tiktoken_counter)[0])
        trim: dict[str, Any] = {k: summary(v) for k, v in trims.items()}
        trim["raw_ms"] = trims
        trim["kept_messages_mean"] = statistics.fmean(trim_kept) if trim_kept else 0
        return samples, trim

    def _measured_step(self, runner: Runner) -> dict[str, Any]:
        timing, result = runner.step()
        self.max_seen["tokens"] = max(self.max_seen["tokens"], result.tokens)
        self.max_seen["over_budget_calls"] += int(result.over_budget)
        self.max_seen["calls"] += 1
        return {
            **timing,
            "pages": pages_of(result),
            "tokens": result.tokens,
            "over_budget": result.over_budget,
            "view": len(result.view),
        }

    def profile(self, runner: Runner, steps: int) -> cProfile.Profile:
        """`steps` more calls of every runner, `runner`'s own under cProfile."""
        profile = cProfile.Profile()
        for _ in range(steps):
            self.next_segment()
            for other in self.runners:
                if other is runner:
                    profile.enable()
                    other.step()
                    profile.disable()
                else:
                    other.step()
        return profile
