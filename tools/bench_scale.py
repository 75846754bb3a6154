"""Scale benchmark: the paging step, recall and idle memory as a thread's history grows.

Prints Markdown tables (for the README's Overhead section) and, with ``--json PATH``, writes
every raw number with a header (git commit, dirty flag, cores, Python, date). A script, not a
test: nothing here asserts a time; the targets are reported, never enforced.

    python tools/bench_scale.py                      # sizes 1000,10000,50000; pages 1000,10000,100000
    python tools/bench_scale.py --quick              # a smoke run in seconds
    python tools/bench_scale.py --json scale.json --profile profiles/

What it measures:

1. Per model call, on one synthetic thread per configuration grown to 1k / 10k / 50k messages
   of history: the middleware's work (``GraphCall.prepare`` -> ``Pager.step`` -> ``GraphCall.update``)
   in replace and view mode on a SQLite *file* store, split into calls that page (a page formed,
   evicted or folded) and calls that do not; side by side, in the same loop on the same history,
   ``langchain_core.messages.trim_messages(strategy="last")`` at the same budget with the
   approximate counter and with the library's tiktoken `TokenCounter`.
2. ``Pager.recall`` by page id and by query at 1k / 10k / 100k pages on a SQLite file store
   (pages written directly with `PageStore.commit`); the first search in a process rebuilds the
   in-memory BM25 index from the store (reported apart, as the cold start).
3. Resident memory per idle thread (in a fresh subprocess), at two page counts per thread,
   before and after each thread was searched once.
4. The most tokens the model would have received over all measured calls.

A full run is long: on a shared 2-core machine it took ~1 h 45 min (steps 38 min, most of it view
mode at 50k; recall 66 min, of which the cold start at 100k pages took 56; memory 5 min).
``--pages 1000,10000`` skips the slowest part. Timings on a busy machine are noisy: compare the
columns of one row (measured side by side in one loop), and see ``loadavg`` in the header.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import gzip
import io
import json
import os
import platform
import pstats
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evals/ sits beside tools/ (not installed)
from evals.policy_spec import paging_options, split_specs  # noqa: E402  (specs hold commas)
from langmem_paging import InMemoryBM25Index, Page, PagingConfig, PagingState, TokenCounter
from langmem_paging.core.library_messages import format_bookmark
from langmem_paging.core.records import messages_digest
from langmem_paging.integrations.graph_state import GraphCall
from langmem_paging.integrations.pager import Pager
from langmem_paging.storage.page_store import PageStore

REPO = Path(__file__).resolve().parents[1]
MAX_TOKENS = 2000
BOUNDARY = "fixed_20"
PAGE_MESSAGES = 20
TRIM_KWARGS = {"strategy": "last", "start_on": "human", "include_system": True}
"""How `trim_messages` is called (``start_on``/``include_system`` as langchain's docs advise for chat
history: the cost is the same, the result is a valid chat)."""


# -- a synthetic conversation ----------------------------------------------------------------


class Vocabulary:
    """Words drawn by their English frequency (the package's Zipf table), plus rarer topic words.

    Common words carry the bulk of the text, so BM25 postings and token counts look like prose;
    each exchange also names a topic (two words of middling rarity), which queries ask about.
    """

    def __init__(self, *, size: int = 20_000, topics: int = 3_000) -> None:
        rows: list[tuple[float, str]] = []
        raw = resources.files("langmem_paging").joinpath("data/en_zipf.txt.gz").read_bytes()
        for line in gzip.decompress(raw).decode("utf-8").splitlines():
            if line.startswith("#") or not line.strip():
                continue
            zipf, words = line.split("\t", 1)
            rows += [(float(zipf), w) for w in words.split() if w.isalpha()]
        rows.sort(key=lambda r: -r[0])
        common = rows[:size]
        self.words = [w for _, w in common]
        weights = [10**z for z, _ in common]
        total = 0.0
        self.cumulative = []
        for w in weights:
            total += w
            self.cumulative.append(total)
        middling = [w for z, w in rows if 2.8 <= z <= 3.8 and len(w) >= 5]
        self.topics = random.Random(7).sample(middling, min(topics, len(middling)))

    def sentence(self, rng: random.Random, n: int, topic: tuple[str, ...]) -> str:
        """`n` frequency-weighted words with the topic words mixed in."""
        picks = rng.choices(self.words, cum_weights=self.cumulative, k=n)
        for word in topic:
            picks.insert(rng.randrange(len(picks) + 1), word)
        text = " ".join(picks)
        return text[:1].upper() + text[1:]


@dataclass
class Chat:
    """A deterministic stream of user / assistant exchanges with tool groups.

    User and assistant messages take ~20-60 tokens; 30% of exchanges call a tool (one or two
    parallel calls, results of ~30-80 tokens). A topic lasts a few exchanges, as in real chats.
    """

    vocabulary: Vocabulary
    seed: int = 0
    tool_share: float = 0.3
    _rng: random.Random = field(init=False)
    _turn: int = field(default=0, init=False)
    _topic: tuple[str, ...] = field(default=(), init=False)
    _topic_left: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _next_topic(self) -> tuple[str, ...]:
        if self._topic_left <= 0:
            self._topic = tuple(self._rng.sample(self.vocabulary.topics, 2))
            self._topic_left = self._rng.randint(1, 5)
        self._topic_left -= 1
        return self._topic

    def exchange(self) -> list[list[BaseMessage]]:
        """One exchange as the segments an agent adds before each model call: the user message
        (a call), then optionally a tool call with its results (another call); the assistant's
        final answer opens the next exchange's first segment (the model wrote it)."""
        rng, vocab, k = self._rng, self.vocabulary, self._turn
        self._turn += 1
        topic = self._next_topic()
        segments = [[HumanMessage(vocab.sentence(rng, rng.randint(14, 44), topic) + "?", id=f"u{k}")]]
        if rng.random() < self.tool_share:
            calls = [
                {"name": "search_notes", "args": {"query": " ".join(topic), "limit": 5}, "id": f"call{k}_{j}"}
                for j in range(rng.choice([1, 1, 2]))
            ]
            group: list[BaseMessage] = [AIMessage("", tool_calls=calls, id=f"c{k}")]
            for j, call in enumerate(calls):
                group.append(
                    ToolMessage(
                        vocab.sentence(rng, rng.randint(22, 60), topic[j : j + 1]),
                        tool_call_id=call["id"],
                        name="search_notes",
                        id=f"r{k}_{j}",
                    )
                )
            segments.append(group)
        self._answer = AIMessage(vocab.sentence(rng, rng.randint(14, 44), topic[:1]), id=f"a{k}")
        return segments

    def segments(self) -> Iterator[list[BaseMessage]]:
        """Forever: what the graph adds before each model call (the first one has the system prompt)."""
        pending: list[BaseMessage] = [
            SystemMessage("You are a helpful assistant with a notes tool.", id="sys")
        ]
        while True:
            parts = self.exchange()
            parts[0] = pending + parts[0]
            yield from parts
            pending = [self._answer]

    def messages(self, n: int) -> list[BaseMessage]:
        """The next `n` messages of the stream, flat (for pages written directly)."""
        out: list[BaseMessage] = []
        while len(out) < n:
            for part in self.exchange():
                out += part
            out.append(self._answer)
        return out[:n]


@functools.cache
def shared_vocabulary() -> Vocabulary:
    """The vocabulary, read once per process."""
    return Vocabulary()


# -- helpers ---------------------------------------------------------------------------------


def sqlite_store(path: Path) -> SqliteStore:
    """A `SqliteStore` on a file, as a server would open it."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    store = SqliteStore(conn)
    store.setup()
    return store


def make_pager(store, *, policy: str, mode: str = "replace", index: InMemoryBM25Index | None = None) -> Pager:
    """`policy`: a policy spec as the evals take it (``lfu``, ``stae:grouping=kmeans``,
    ``tiers:utility``)."""
    config = PagingConfig(max_tokens=MAX_TOKENS, boundary=BOUNDARY, mode=mode, **paging_options(policy))
    return Pager(config, PageStore(store), index=index or InMemoryBM25Index())


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": statistics.fmean(values) if values else None,
        "max": max(values) if values else None,
    }


def rss_bytes() -> int:
    """Current resident set size (VmRSS), or the peak where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def header() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    versions = {}
    packages = (
        "langmem-paging",
        "langchain-core",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "tiktoken",
        "numpy",
    )
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "benchmark": "bench_scale",
        "git_commit": git("rev-parse", "HEAD") or None,
        "git_dirty": bool(git("status", "--porcelain")),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "versions": versions,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "argv": sys.argv[1:],
    }


# -- 1. steps vs trim_messages ---------------------------------------------------------------


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


def _pages_of(result) -> bool:
    return bool(result.pages or result.evicted or result.nodes)


def _time_trim(history: list[BaseMessage], counter) -> tuple[float, int]:
    t0 = time.perf_counter()
    kept = trim_messages(history, max_tokens=MAX_TOKENS, token_counter=counter, **TRIM_KWARGS)
    return (time.perf_counter() - t0) * 1e3, len(kept)


def _profile_top(profile: cProfile.Profile, limit: int) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile, stream=io.StringIO())
    total = sum(row[2] for row in stats.stats.values()) or 1.0
    rows = []
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        short = filename.replace(str(REPO) + "/", "")
        if "site-packages/" in short:
            short = short.split("site-packages/", 1)[1]
        rows.append(
            {
                "function": f"{short}:{line}({name})",
                "ncalls": ncalls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
                "tottime_share": tottime / total,
                "cumtime_share": cumtime / total,
            }
        )
    by_tot = sorted(rows, key=lambda r: -r["tottime_s"])[:limit]
    by_cum = sorted(rows, key=lambda r: -r["cumtime_s"])[:limit]
    return [{"by": "tottime", "rows": by_tot}, {"by": "cumtime", "rows": by_cum, "total_s": total}]


@dataclass
class _Lockstep:
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
        """Measure `repeats` model calls of every runner, each next to trim_messages on the same history."""
        samples: dict[str, list] = {r.name: [] for r in self.runners}
        trims: dict[str, list[float]] = {"approximate": [], "tiktoken": []}
        trim_kept = []
        for i in range(repeats):
            self.next_segment()
            ms, kept = _time_trim(self.history, "approximate")
            trims["approximate"].append(ms)
            trim_kept.append(kept)
            trims["tiktoken"].append(_time_trim(self.history, tiktoken_counter)[0])
            # each runner in turn goes first: the call right after trim_messages over the whole
            # history found the CPU's caches cold (at 50k messages the first runner measured 1.9x
            # its own time when it came later; rotated, every runner pays it equally often)
            shift = i % len(self.runners)
            for runner in [*self.runners[shift:], *self.runners[:shift]]:
                samples[runner.name].append(self._measured_step(runner))
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
            "pages": _pages_of(result),
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


def _steps_runners(
    args, workdir: Path, history: list[BaseMessage]
) -> tuple[list[tuple[str, str]], list[Runner]]:
    """The (mode, policy) configurations and a runner on its own SQLite file for each."""
    configs = [("replace", args.policy), ("view", args.policy)] + [
        ("replace", p) for p in args.extra_policies
    ]
    runners = []
    for mode, policy in configs:
        name = f"{mode}/{policy}"
        store = sqlite_store(workdir / f"steps-{mode}-{policy}.sqlite")
        runners.append(
            Runner(
                name,
                mode,
                policy,
                make_pager(store, policy=policy, mode=mode),
                history,
                thread_id=f"bench-{mode}-{policy}",
            )
        )
    return configs, runners


def _steps_config(args, configs: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "max_tokens": MAX_TOKENS,
        "boundary": BOUNDARY,
        "policies": [c[1] for c in configs],
        "modes": [c[0] for c in configs],
        "window": args.repeats,
        "build_every": args.build_every,
        "trim": {**TRIM_KWARGS, "max_tokens": MAX_TOKENS},
        "store": "SqliteStore on a file (isolation_level=None, check_same_thread=False)",
    }


def bench_steps(args, workdir: Path) -> dict[str, Any]:
    """Grow one thread per configuration in lockstep on one history; measure a window at each size."""
    chat = Chat(shared_vocabulary(), seed=args.seed)
    history: list[BaseMessage] = []
    configs, runners = _steps_runners(args, workdir, history)
    lockstep = _Lockstep(chat.segments(), history, runners, bucket=max(100, min(args.sizes) // 2))
    tiktoken_counter = TokenCounter()
    out: dict[str, Any] = {"sizes": [], "config": _steps_config(args, configs)}
    for size in args.sizes:
        steps_before = {r.name: (r.build_step_s, r.build_steps) for r in runners}
        lockstep.build_to(size, args.build_every)
        row = _size_row(lockstep, size, steps_before)
        # Warm the trim counter's cache as a long-running agent's would be (not timed).
        _time_trim(history, tiktoken_counter)
        samples, trim = lockstep.window(args.repeats, tiktoken_counter)
        row["window_history_messages"] = [row["history_messages"], len(history)]
        row["trim"] = trim
        for runner in runners:
            row["runners"][runner.name] = _runner_summary(runner, samples[runner.name], history)
        if args.profile:
            row["profiles"] = _profiles(args, lockstep, size)
        out["sizes"].append(row)
        if args.verbose:
            print(
                f"  size {size}: history {len(history)}, build wall {lockstep.build_wall:.1f}s",
                file=sys.stderr,
                flush=True,
            )
    out["build_curve_ms"] = {
        r.name: {str(k): statistics.fmean(v) for k, v in sorted(r.curve.items())} for r in runners
    }
    out["build_curve_bucket"] = lockstep.bucket
    out["max_tokens_received"] = {
        **lockstep.max_seen,
        "max_tokens": MAX_TOKENS,
        "exceeded": lockstep.max_seen["tokens"] > MAX_TOKENS,
    }
    return out


def _size_row(lockstep: _Lockstep, size: int, steps_before: dict[str, tuple[float, int]]) -> dict[str, Any]:
    """A size's row as built so far: the history length and what building it cost each runner."""
    return {
        "history_messages": len(lockstep.history),
        "target": size,
        "build_wall_s_cumulative": lockstep.build_wall,
        "build": {
            r.name: {
                "step_s": r.build_step_s - steps_before[r.name][0],
                "steps": r.build_steps - steps_before[r.name][1],
                "step_s_cumulative": r.build_step_s,
            }
            for r in lockstep.runners
        },
        "runners": {},
    }


def _runner_summary(runner: Runner, rows: list[dict[str, Any]], history: list[BaseMessage]) -> dict[str, Any]:
    """A runner's window: latency of calls that paged and that did not, parts, state size."""
    paging = [s for s in rows if s["pages"]]
    quiet = [s for s in rows if not s["pages"]]
    state = PagingState.from_value(runner.paging)
    return {
        "all": summary([s["middleware"] for s in rows]),
        "paging": summary([s["middleware"] for s in paging]),
        "not_paging": summary([s["middleware"] for s in quiet]),
        "parts_p50": {
            k: percentile([s[k] for s in rows], 50) for k in ("prepare", "pager", "update", "reducer")
        },
        "max_tokens_received": max((s["tokens"] for s in rows), default=0),
        "view_messages_mean": statistics.fmean(s["view"] for s in rows) if rows else 0,
        "state_json_bytes": len(json.dumps(runner.paging)),
        "state_messages": len(runner.messages) if runner.mode == "replace" else len(history),
        "pages_formed": state.next["p"] - 1,
        "clusters_made": state.next["c"] - 1,
        "raw": rows,
    }


def _profiles(args, lockstep: _Lockstep, size: int) -> dict[str, Any]:
    """Profile the main policy's runners (a .prof file each, and the top functions)."""
    profiles = {}
    for runner in lockstep.runners:
        if runner.policy != args.policy:
            continue
        profile = lockstep.profile(runner, args.profile_steps)
        path = args.profile / f"{runner.mode}_{runner.policy}_{size}.prof"
        profile.dump_stats(str(path))
        profiles[runner.name] = {
            "file": str(path),
            "steps": args.profile_steps,
            "top": _profile_top(profile, args.profile_top),
        }
    return profiles


# -- 2. recall -------------------------------------------------------------------------------


def bench_recall(args, workdir: Path) -> list[dict[str, Any]]:
    vocabulary = shared_vocabulary()
    counter = TokenCounter()
    rows = []
    for n in args.pages:
        store = sqlite_store(workdir / f"recall-{n}.sqlite")
        index = InMemoryBM25Index()
        pager = make_pager(store, policy=args.policy, index=index)
        thread = f"recall-{n}"
        chat = Chat(vocabulary, seed=args.seed + n)
        state = PagingState()
        t0 = time.perf_counter()
        generate_s = 0.0
        topics: list[tuple[str, ...]] = []
        for start in range(0, n, args.commit_batch):
            g0 = time.perf_counter()
            pages = []
            numbers = state.allocate("p", min(args.commit_batch, n - start))
            for number in numbers:
                msgs = chat.messages(PAGE_MESSAGES)
                text = "\n".join(str(m.content) for m in msgs)
                topics.append(chat._topic)
                pages.append(
                    Page(
                        id=f"p{number}",
                        messages=msgs,
                        bookmark=format_bookmark(f"p{number}", list(chat._topic)),
                        keywords=list(chat._topic),
                        token_count=counter.count_text(text) + 3 * len(msgs),
                        boundary=BOUNDARY,
                        created_turn=number,
                        order=number * PAGE_MESSAGES,
                        digest=messages_digest(msgs),
                        features={"terms": dict.fromkeys(chat._topic, 1.0)},
                    )
                )
            generate_s += time.perf_counter() - g0
            pager.page_store.commit(thread, pages=pages, nodes=[], state=state)
        write_s = time.perf_counter() - t0 - generate_s
        value = state.to_value()
        rng = random.Random(args.seed)
        by_id = []
        for _ in range(args.repeats):
            pid = f"p{rng.randint(1, n)}"
            t = time.perf_counter()
            answer = pager.recall(thread, value, page_ids=[pid])
            by_id.append((time.perf_counter() - t) * 1e3)
            assert pid in answer.accessed, answer.content[:200]

        def query(topics: list = topics, rng: random.Random = rng, n: int = n) -> str:
            topic = topics[rng.randrange(n)]
            return f"what did we say about {' '.join(rng.sample(topic, rng.choice([1, 2])))}"

        gc.collect()
        rss_before = rss_bytes()
        t = time.perf_counter()
        cold_answer = pager.recall(thread, value, query=query())
        cold_ms = (time.perf_counter() - t) * 1e3
        gc.collect()
        rss_after = rss_bytes()
        searches, hits = [], 0
        for _ in range(args.repeats):
            q = query()
            t = time.perf_counter()
            answer = pager.recall(thread, value, query=q)
            searches.append((time.perf_counter() - t) * 1e3)
            hits += bool(answer.accessed)
        index_thread = index._threads.get(thread)
        rows.append(
            {
                "pages": n,
                "messages": n * PAGE_MESSAGES,
                "generate_s": generate_s,
                "write_s": write_s,
                "db_bytes": (workdir / f"recall-{n}.sqlite").stat().st_size,
                "recall_by_id_ms": summary(by_id),
                "search_cold_ms": cold_ms,
                "search_cold_found": bool(cold_answer.accessed),
                "search_warm_ms": summary(searches),
                "search_queries_with_hits": hits,
                "index_postings": index_thread.size if index_thread else 0,
                "rss_growth_cold_start_bytes": rss_after - rss_before,
                "raw": {"by_id_ms": by_id, "search_ms": searches},
            }
        )
        store.conn.close()
        del index, pager, store
        gc.collect()
        if args.verbose:
            print(
                f"  recall {n} pages: write {write_s:.1f}s, cold search {cold_ms:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    return rows


# -- 3. memory per idle thread (in a fresh process) --------------------------------------------


def rss_worker(params: dict[str, Any]) -> dict[str, Any]:
    """Grow `threads` threads to `pages` pages each through the pager, let them go idle (the
    paging state goes where a checkpointer would put it: out of this process's memory), and
    measure this process's RSS; then search each thread once and measure again."""
    workdir = Path(params["workdir"])
    vocabulary = shared_vocabulary()
    store = sqlite_store(workdir / f"rss-{params['pages']}.sqlite")
    index = InMemoryBM25Index()
    pager = make_pager(store, policy=params["policy"], index=index)
    checkpoints = workdir / f"rss-{params['pages']}-checkpoints"
    checkpoints.mkdir(exist_ok=True)

    def grow(thread: str, seed: int) -> None:
        chat = Chat(vocabulary, seed=seed)
        messages: list[BaseMessage] = []
        paging: dict[str, Any] = {}
        calls = 0
        for segment in chat.segments():
            messages = add_messages(messages, segment)
            calls += 1
            if calls % params["every"]:
                continue
            result = pager.step(list(messages), paging, thread, overhead=0)
            if result.updates:
                messages = result.apply(messages)
            paging = result.state.to_value()
            if PagingState.from_value(paging).next["p"] - 1 >= params["pages"]:
                break
        (checkpoints / f"{thread}.json").write_text(json.dumps(paging))

    grow("warmup", seed=10_000)  # the same work once first, so allocator arenas are already grown
    gc.collect()
    base = rss_bytes()
    for t in range(params["threads"]):
        grow(f"t{t}", seed=t)
    gc.collect()
    idle = rss_bytes()
    rng = random.Random(0)
    for t in range(params["threads"]):
        paging = json.loads((checkpoints / f"t{t}.json").read_text())
        pager.recall(f"t{t}", paging, query=" ".join(rng.sample(vocabulary.topics, 2)))
    gc.collect()
    searched = rss_bytes()
    counter = pager.counter_for()
    return {
        "threads": params["threads"],
        "pages_per_thread": params["pages"],
        "step_every": params["every"],
        "rss_base_bytes": base,
        "rss_idle_bytes": idle,
        "rss_searched_bytes": searched,
        "idle_bytes_per_thread": (idle - base) / params["threads"],
        "searched_bytes_per_thread": (searched - idle) / params["threads"],
        "token_cache_entries": len(counter._cache),
        "token_cache_cap": counter._cache.capacity,
        "index_threads": len(index._threads),
        "index_postings": sum(i.size for i in index._threads.values()),
        "index_max_postings": index.max_postings,
    }


def bench_rss(args, workdir: Path) -> list[dict[str, Any]]:
    rows = []
    for pages in args.rss_pages:
        params = {
            "workdir": str(workdir),
            "threads": args.rss_threads,
            "pages": pages,
            "policy": args.policy,
            "every": args.rss_every,
        }
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--rss-worker", json.dumps(params)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"rss worker failed:\n{done.stderr[-4000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


WEIGHT_WARMUP = 20
"""Checkpoints of a thread's start left out of the settled maximum: the first ones hold a message or
two, against which the state's fixed keys alone weigh ~1x."""


def bench_weight(args, workdir: Path) -> list[dict[str, Any]]:
    """Bytes the checkpoint holds per channel (the state is written at every step): the `paging`
    channel against the `messages` channel it manages, JSON as LangGraph's serializer writes them,
    replace mode, at each budget. Each row is the checkpoint at that history length, the spread
    (p50, max) of the ratio over every checkpoint since the previous row, what each key of the
    paging value weighs, and the store's keyword-sketch record (written on steps that form pages)."""
    from langmem_paging.core.messages import dump_messages
    from langmem_paging.storage.page_store import thread_namespace

    rows = []
    for budget in args.weight_budgets:
        chat = Chat(shared_vocabulary(), seed=args.seed)
        store = InMemoryStore()
        pager = Pager(
            PagingConfig(max_tokens=budget, boundary=BOUNDARY), PageStore(store), index=InMemoryBM25Index()
        )
        messages: list[BaseMessage] = []
        paging: Any = None
        seen = 0
        checkpoints = 0
        for size in args.sizes:
            ratios: list[float] = []
            settled: list[float] = []
            for segment in chat.segments():
                messages = add_messages(messages, segment)
                seen += len(segment)
                result = pager.step(messages, paging, "weight")
                messages, paging = result.apply(messages), result.state.to_value()
                ratios.append(_json_bytes(paging) / _json_bytes(dump_messages(messages)))
                checkpoints += 1
                if checkpoints > WEIGHT_WARMUP:
                    settled.append(ratios[-1])
                if seen >= size:
                    break
            paging_bytes = _json_bytes(paging)
            messages_bytes = _json_bytes(dump_messages(messages))
            sketch = store.get(thread_namespace("weight", "meta"), "sketch")
            rows.append(
                {
                    "budget": budget,
                    "history_messages": seen,
                    "paging_bytes": paging_bytes,
                    "messages_bytes": messages_bytes,
                    "ratio": round(paging_bytes / messages_bytes, 3),
                    "ratio_p50": round(statistics.median(ratios), 3),
                    "ratio_max": round(max(ratios), 3),
                    "ratio_max_settled": round(max(settled), 3) if settled else None,
                    "checkpoints": len(ratios),
                    "paging_keys": {
                        k: _json_bytes(v)
                        for k, v in sorted(paging.items(), key=lambda kv: -_json_bytes(kv[1]))
                    },
                    "store_sketch_bytes": _json_bytes(sketch.value) if sketch is not None else 0,
                }
            )
    return rows


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, default=str))


def bench_quiet(args, workdir: Path) -> dict[str, Any]:
    """CPU time of a model call that pages nothing against the floor every budget-exact method
    pays: tiktoken on the messages new at that call (encoded afresh). Side by side in one loop, on
    one conversation at `MAX_TOKENS`: the floor, `page_messages` (the pure function, its state
    passed on) and `PagingMiddleware.wrap_model_call` (a handler that answers at once, its update
    applied as the graph would). A call is quiet for a path when it formed, evicted and folded
    nothing there; ratios are per call (the same new messages), then their median."""
    from types import SimpleNamespace

    from langchain.agents.middleware import ModelRequest, ModelResponse

    from langmem_paging import PagingMiddleware, page_messages
    from langmem_paging.core.tokens import get_encoding, wire_text
    from langmem_paging.testing import ScriptedChatModel

    options = {"boundary": BOUNDARY, **paging_options(args.policy)}
    store = InMemoryStore()
    middleware = PagingMiddleware(max_tokens=MAX_TOKENS, store=store, **options)
    model = ScriptedChatModel()
    runtime = SimpleNamespace(execution_info=SimpleNamespace(thread_id="quiet"), store=store)
    answer = ModelResponse(result=[AIMessage("ok", id="answer")])
    encoding = get_encoding("cl100k_base")
    pure: dict[str, Any] = {"messages": [], "state": None}
    graph: dict[str, Any] = {"messages": [], "paging": None}

    def floor(segment: list[BaseMessage]) -> int:
        t0 = time.thread_time_ns()
        for message in segment:
            encoding.encode(wire_text(message), disallowed_special=())
        return time.thread_time_ns() - t0

    def pure_call() -> tuple[int, bool]:
        t0 = time.thread_time_ns()
        result = page_messages(pure["messages"], max_tokens=MAX_TOKENS, state=pure["state"], **options)
        spent = time.thread_time_ns() - t0
        pure["messages"], pure["state"] = result.apply(pure["messages"]), result.state
        return spent, result.changed

    def graph_call() -> tuple[int, bool]:
        request = ModelRequest(
            model=model,
            messages=graph["messages"],
            tools=[],
            runtime=runtime,
            state={"messages": graph["messages"], "paging": graph["paging"]},
        )
        t0 = time.thread_time_ns()
        response = middleware.wrap_model_call(request, lambda _: answer)
        spent = time.thread_time_ns() - t0
        update = getattr(getattr(response, "command", None), "update", None) or {}
        if "messages" in update:
            graph["messages"] = add_messages(graph["messages"], update["messages"])
        graph["paging"] = update.get("paging", graph["paging"])
        return spent, "messages" in update

    stream = Chat(shared_vocabulary(), seed=args.seed).segments()
    rows = []
    for i in range(args.quiet_warmup + args.repeats):
        segment = next(stream)
        pure["messages"] = add_messages(pure["messages"], segment)
        graph["messages"] = add_messages(graph["messages"], segment)
        base = floor(segment)
        p_ns, p_paged = pure_call()
        m_ns, m_paged = graph_call()
        if i >= args.quiet_warmup:
            rows.append(
                {
                    "new_messages": len(segment),
                    "floor_us": base / 1e3,
                    "page_messages_us": p_ns / 1e3,
                    "middleware_us": m_ns / 1e3,
                    "page_messages_paged": p_paged,
                    "middleware_paged": m_paged,
                }
            )

    def ratios(path: str) -> list[float]:
        return [r[f"{path}_us"] / r["floor_us"] for r in rows if not r[f"{path}_paged"] and r["floor_us"] > 0]

    out: dict[str, Any] = {
        "max_tokens": MAX_TOKENS,
        "options": options,
        "calls": len(rows),
        "warmup": args.quiet_warmup,
        "floor_us": summary([r["floor_us"] for r in rows]),
    }
    for path, target in (("page_messages", 10), ("middleware", 15)):
        quiet = [r[f"{path}_us"] for r in rows if not r[f"{path}_paged"]]
        r = ratios(path)
        out[path] = {
            "quiet_us": summary(quiet),
            "paging_calls": sum(x[f"{path}_paged"] for x in rows),
            "ratio_to_floor": summary(r),
            "target": target,
            "met": None if not r else statistics.median(r) <= target,
        }
    out["raw"] = rows
    return out


def render_quiet(quiet: dict[str, Any]) -> list[str]:
    lines = [
        f"### A call that pages nothing: CPU time against the tiktoken floor (budget {quiet['max_tokens']}, "
        f"{quiet['calls']} calls after {quiet['warmup']} warm-up calls)",
        "",
        "| path | quiet calls | paging calls | quiet p50 us | floor p50 us | ratio p50 | ratio p95 | target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for path in ("page_messages", "middleware"):
        q = quiet[path]
        lines.append(
            f"| {path} | {q['quiet_us']['n']} | {q['paging_calls']} | {_ms(q['quiet_us']['p50'])} | "
            f"{_ms(quiet['floor_us']['p50'])} | {_ms(q['ratio_to_floor']['p50'])} | "
            f"{_ms(q['ratio_to_floor']['p95'])} | <= {q['target']}x |"
        )
    return lines


# -- report ----------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else (f"{value:.2f}" if value < 100 else f"{value:.0f}")


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def targets(report: dict[str, Any], policy: str) -> list[dict[str, Any]]:
    """The issue's targets, computed from the measurements (reported, never asserted)."""
    out = []
    sizes = report.get("steps", {}).get("sizes", [])
    replace, view = f"replace/{policy}", f"view/{policy}"
    if len(sizes) >= 2:
        first, last = sizes[0], sizes[-1]
        for kind in ("all", "not_paging", "paging"):
            r = _ratio(last["runners"][replace][kind]["p50"], first["runners"][replace][kind]["p50"])
            out.append(
                {
                    "target": f"replace p50 ({kind}) at {last['target']} <= 1.5x p50 at {first['target']}",
                    "value": r,
                    "met": None if r is None else r <= 1.5,
                }
            )
    for row in sizes:
        if row["target"] == 10_000 or len(sizes) == 1 or row is sizes[len(sizes) // 2]:
            a, b = row["runners"][replace]["all"]["p50"], row["trim"]["approximate"]["p50"]
            out.append(
                {
                    "target": f"replace step p50 < trim approximate p50 at {row['target']}",
                    "value": _ratio(a, b),
                    "met": a < b,
                }
            )
            break
    for row in sizes:
        a, b = row["runners"][view]["all"]["p50"], row["trim"]["approximate"]["p50"]
        out.append(
            {
                "target": f"view step p50 <= trim approximate p50 at {row['target']}",
                "value": _ratio(a, b),
                "met": a <= b,
            }
        )
    for row in report.get("recall", []):
        out.append(
            {
                "target": f"recall by id p95 <= 5 ms at {row['pages']} pages",
                "value": row["recall_by_id_ms"]["p95"],
                "met": row["recall_by_id_ms"]["p95"] <= 5,
            }
        )
        out.append(
            {
                "target": f"search p95 <= 50 ms at {row['pages']} pages (warm)",
                "value": row["search_warm_ms"]["p95"],
                "met": row["search_warm_ms"]["p95"] <= 50,
            }
        )
    if "steps" in report:
        m = report["steps"]["max_tokens_received"]
        out.append(
            {
                "target": f"the model never receives more than max_tokens={m['max_tokens']}",
                "value": m["tokens"],
                "met": not m["exceeded"],
            }
        )
    return out


def _section_table(title: str, columns: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a Markdown section: a heading and a table."""
    return [
        "",
        f"### {title}",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join(["---"] * len(columns)) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render(report: dict[str, Any], policy: str) -> str:
    """The Markdown report: a header line, then one section per part that ran."""
    steps = report.get("steps")
    lines = _render_header(report["header"])
    if steps:
        lines += _render_steps(steps)
    if report.get("recall"):
        lines += _render_recall(report["recall"])
    if report.get("rss"):
        lines += _render_rss(report["rss"])
    if report.get("weight"):
        lines += _render_weight(report["weight"])
    if report.get("quiet"):
        lines += ["", *render_quiet(report["quiet"])]
    if report.get("targets"):
        lines += _render_targets(report["targets"])
    lines += _render_profiles(steps or {})
    return "\n".join(lines)


def _render_header(h: dict[str, Any]) -> list[str]:
    return [
        f"Scale benchmark (`tools/bench_scale.py {' '.join(h['argv'])}`), commit {str(h['git_commit'])[:10]}"
        f"{' (dirty)' if h['git_dirty'] else ''}, {h['cores']} cores, Python {h['python']}, {h['date']}, "
        f"load average {' / '.join(f'{x:.1f}' for x in h.get('loadavg_at_start') or [])}.",
        "",
    ]


def _render_steps(steps: dict[str, Any]) -> list[str]:
    """The per-call part: latency, where the time goes, build time, budget, build curve."""
    return [
        *_steps_latency(steps),
        *_steps_parts(steps),
        *_steps_build(steps),
        *_steps_max_tokens(steps["max_tokens_received"]),
        *_steps_curve(steps),
    ]


def _steps_latency(steps: dict[str, Any]) -> list[str]:
    c = steps["config"]
    lines = [
        f"### Per model call (ms): budget {c['max_tokens']}, {c['boundary']}, SQLite file store; "
        f"window of {c['window']} calls per size; trim_messages(strategy='last') on the full history",
        "",
    ]
    if c["build_every"] != 1:
        lines += [
            f"History built by paging every {c['build_every']} model calls (steady state: every call).",
            "",
        ]
    lines += [
        "| history msgs | config | calls paging / not | paging p50 | paging p95 | not paging p50 | "
        "not paging p95 | all p50 | trim approx p50 | p95 | trim tiktoken p50 | p95 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in steps["sizes"]:
        t = row["trim"]
        for name, r in row["runners"].items():
            lines.append(
                f"| {row['history_messages']:,} | {name} | {r['paging']['n']} / {r['not_paging']['n']} | "
                f"{_ms(r['paging']['p50'])} | {_ms(r['paging']['p95'])} | {_ms(r['not_paging']['p50'])} | "
                f"{_ms(r['not_paging']['p95'])} | {_ms(r['all']['p50'])} | {_ms(t['approximate']['p50'])} | "
                f"{_ms(t['approximate']['p95'])} | {_ms(t['tiktoken']['p50'])} | {_ms(t['tiktoken']['p95'])} |"
            )
    return lines


def _steps_parts(steps: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Where a call's time goes (p50 ms: GraphCall.prepare / Pager.step / GraphCall.update; then LangGraph's "
        "add_messages of the updates, not counted above), state size:",
        "",
        "| history msgs | config | prepare | pager | update | add_messages | state msgs | paging state KB "
        "| pages | clusters |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in steps["sizes"]:
        for name, r in row["runners"].items():
            p = r["parts_p50"]
            lines.append(
                f"| {row['history_messages']:,} | {name} | {_ms(p['prepare'])} | {_ms(p['pager'])} | "
                f"{_ms(p['update'])} | {_ms(p['reducer'])} | {r['state_messages']:,} | "
                f"{r['state_json_bytes'] / 1024:.1f} | {r['pages_formed']:,} | {r['clusters_made']:,} |"
            )
    return lines


def _steps_build(steps: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Time to build each size (the middleware's work summed over the build's calls; wall includes "
        "generating the chat and trim warm-up):",
        "",
        "| history msgs | wall s (cumulative) | "
        + " | ".join(f"{n} s (calls)" for n in steps["sizes"][0]["build"])
        + " |",
        "| --- | --- | " + " | ".join("---" for _ in steps["sizes"][0]["build"]) + " |",
    ]
    for row in steps["sizes"]:
        lines.append(
            f"| {row['history_messages']:,} | {row['build_wall_s_cumulative']:.1f} | "
            + " | ".join(f"{b['step_s']:.1f} ({b['steps']:,})" for b in row["build"].values())
            + " |"
        )
    return lines


def _steps_max_tokens(m: dict[str, Any]) -> list[str]:
    return [
        "",
        f"Most tokens the model received over {m['calls']:,} measured calls: {m['tokens']:,} "
        f"(max_tokens {m['max_tokens']:,}; {'EXCEEDED' if m['exceeded'] else 'never exceeded'}; "
        f"over-budget calls: {m['over_budget_calls']}).",
    ]


def _steps_curve(steps: dict[str, Any]) -> list[str]:
    curve = steps.get("build_curve_ms", {})
    if not curve:
        return []
    lines = [
        "",
        "Mean ms per call while building, by history length "
        f"(buckets of {steps['build_curve_bucket']:,}; "
        "a flat row means a call's work does not grow with the history):",
        "",
    ]
    for name, points in curve.items():
        keys = list(points)
        # eight points spread over the curve, first and last included
        picks = sorted({keys[int(i * (len(keys) - 1) / 7)] for i in range(8)}, key=int) if keys else []
        lines.append(f"- {name}: " + ", ".join(f"{int(k):,}: {points[k]:.2f}" for k in picks))
    return lines


def _render_recall(recall: list[dict[str, Any]]) -> list[str]:
    return _section_table(
        "Recall on a SQLite file store (ms)",
        [
            "pages",
            "messages",
            "write s",
            "recall by id p50",
            "p95",
            "search cold (index rebuild)",
            "search p50",
            "p95",
            "index postings",
            "RSS + cold start MB",
        ],
        [
            [
                f"{r['pages']:,}",
                f"{r['messages']:,}",
                f"{r['write_s']:.1f}",
                _ms(r["recall_by_id_ms"]["p50"]),
                _ms(r["recall_by_id_ms"]["p95"]),
                _ms(r["search_cold_ms"]),
                _ms(r["search_warm_ms"]["p50"]),
                _ms(r["search_warm_ms"]["p95"]),
                f"{r['index_postings']:,}",
                f"{r['rss_growth_cold_start_bytes'] / 2**20:.0f}",
            ]
            for r in recall
        ],
    )


def _render_rss(rss: list[dict[str, Any]]) -> list[str]:
    return _section_table(
        "Memory per idle thread (fresh process; RSS delta / threads)",
        [
            "pages per thread",
            "threads",
            "idle KB per thread",
            "+ after one search, KB per thread",
            "token cache entries (cap)",
            "index postings (cap)",
        ],
        [
            [
                str(r["pages_per_thread"]),
                str(r["threads"]),
                f"{r['idle_bytes_per_thread'] / 1024:.0f}",
                f"{r['searched_bytes_per_thread'] / 1024:.0f}",
                f"{r['token_cache_entries']:,} ({r['token_cache_cap']:,})",
                f"{r['index_postings']:,} ({r['index_max_postings']:,})",
            ]
            for r in rss
        ],
    )


def _render_weight(weight: list[dict[str, Any]]) -> list[str]:
    return _section_table(
        "Checkpoint weight (bytes of each channel, JSON; written at every step)",
        [
            "budget",
            "history messages",
            "paging",
            "messages",
            "paging / messages",
            "ratio p50 (max) over checkpoints",
            f"max past the first {WEIGHT_WARMUP}",
            "heaviest paging keys",
            "store sketch record",
        ],
        [
            [
                str(r["budget"]),
                f"{r['history_messages']:,}",
                f"{r['paging_bytes']:,}",
                f"{r['messages_bytes']:,}",
                f"{r['ratio']:.2f}",
                f"{r['ratio_p50']:.2f} ({r['ratio_max']:.2f}) of {r['checkpoints']}",
                "-" if r["ratio_max_settled"] is None else f"{r['ratio_max_settled']:.2f}",
                ", ".join(f"{k} {n:,}" for k, n in list(r["paging_keys"].items())[:5]),
                f"{r['store_sketch_bytes']:,}",
            ]
            for r in weight
        ],
    )


def _render_targets(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "### Targets (reported, not asserted)", ""]
    for t in rows:
        value = t["value"]
        shown = "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
        verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        lines.append(f"- {t['target']}: {shown} ({verdict})")
    return lines


def _render_profiles(steps: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for row in steps.get("sizes", []):
        for name, prof in row.get("profiles", {}).items():
            lines += [
                "",
                f"Profile {name} at {row['history_messages']:,} messages ({prof['steps']} calls, "
                f"cProfile, top by own time; {prof['file']}):",
                "",
            ]
            for r in prof["top"][0]["rows"][:12]:
                lines.append(
                    f"    {r['tottime_share'] * 100:5.1f}% own {r['cumtime_share'] * 100:5.1f}% cum "
                    f"{r['ncalls']:>8} calls  {r['function']}"
                )
    return lines


# -- main ------------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.replace("_", "").split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=_ints, default=None, help="history lengths (messages), default 1000,10000,50000"
    )
    parser.add_argument(
        "--pages", type=_ints, default=None, help="page counts for recall, default 1000,10000,100000"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="measured model calls per size and recall queries per page count (default 200)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--json", type=Path, default=None, help="write every raw number here")
    parser.add_argument("--policy", default="lfu", help="eviction policy of the main runs (default lfu)")
    parser.add_argument(
        "--extra-policies",
        default=None,
        help="more policy specs in replace mode, comma-separated as for `python -m evals ablate` "
        "(e.g. 'fifo,stae:grouping=kmeans,tiers:utility'; default fifo; '' for none)",
    )
    parser.add_argument(
        "--build-every",
        type=int,
        default=1,
        help="while building a history, page every N model calls (default 1: every call)",
    )
    parser.add_argument(
        "--rss-threads", type=int, default=None, help="threads per memory measurement (default 20)"
    )
    parser.add_argument("--rss-pages", type=_ints, default=None, help="pages per thread (default 10,200)")
    parser.add_argument(
        "--rss-every", type=int, default=1, help="memory runs page every N model calls (default 1)"
    )
    parser.add_argument(
        "--commit-batch", type=int, default=500, help="pages per PageStore.commit when writing pages"
    )
    parser.add_argument(
        "--profile", type=Path, default=None, help="cProfile extra calls after each window; .prof files here"
    )
    parser.add_argument(
        "--profile-steps", type=int, default=50, help="calls profiled per configuration and size"
    )
    parser.add_argument("--profile-top", type=int, default=25, help="functions kept per profile in the JSON")
    parser.add_argument(
        "--only",
        default="steps,recall,rss,weight,quiet",
        help="parts to run: steps, recall, rss, weight, quiet",
    )
    parser.add_argument(
        "--quiet-warmup",
        type=int,
        default=300,
        help="calls before the quiet part measures (the context fills and pages first)",
    )
    parser.add_argument(
        "--weight-budgets",
        type=_ints,
        default=[900, 2000, 4000],
        help="budgets of the checkpoint weight part (default 900,2000,4000)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep the SQLite files here (default: a temp dir)"
    )
    parser.add_argument("--verbose", action="store_true", help="progress on stderr")
    parser.add_argument("--rss-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = args.quick
    args.sizes = args.sizes or ([200, 600] if quick else [1_000, 10_000, 50_000])
    args.pages = args.pages or ([50, 200] if quick else [1_000, 10_000, 100_000])
    args.repeats = args.repeats or (20 if quick else 200)
    args.rss_threads = args.rss_threads or (2 if quick else 20)
    args.rss_pages = args.rss_pages or ([1, 3] if quick else [10, 200])
    extra = "fifo" if args.extra_policies is None else args.extra_policies
    args.extra_policies = [p for p in split_specs(extra) if p.strip() and p.strip() != args.policy]
    args.only = {p.strip() for p in args.only.split(",") if p.strip()}
    unknown = args.only - {"steps", "recall", "rss", "weight", "quiet"}
    if unknown:
        parser.error(
            f"unknown part(s) {', '.join(sorted(unknown))} in --only; available: steps, recall, rss, "
            "weight, quiet"
        )
    if args.sizes != sorted(args.sizes):
        parser.error("--sizes must be increasing")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.rss_worker is not None:
        print(json.dumps(rss_worker(json.loads(args.rss_worker))))
        return {}
    report: dict[str, Any] = {"header": header()}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        timings = {}
        for part, run in (
            ("steps", bench_steps),
            ("recall", bench_recall),
            ("rss", bench_rss),
            ("weight", bench_weight),
            ("quiet", bench_quiet),
        ):
            if part in args.only:
                t0 = time.perf_counter()
                report[part] = run(args, workdir)
                timings[part] = time.perf_counter() - t0
                if args.json:  # a part can take long: keep what is done if a later part fails
                    _write_json(args.json, report)
        report["header"]["part_wall_s"] = timings
        report["header"]["loadavg_at_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    report["targets"] = targets(report, args.policy)
    print(render(report, args.policy))
    if args.json:
        _write_json(args.json, report)
    return report


def _write_json(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
