"""Part 1, steps: the paging work per model call as the history grows, beside trim_messages."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging import PagingState, TokenCounter

from .conversation import Chat, shared_vocabulary
from .lockstep import Lockstep, Runner, time_trim
from .pagers import make_pager, sqlite_store
from .profiling import profiles
from .settings import BOUNDARY, MAX_TOKENS, TRIM_KWARGS
from .stats import percentile, summary


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
    lockstep = Lockstep(chat.segments(), history, runners, bucket=max(100, min(args.sizes) // 2))
    tiktoken_counter = TokenCounter()
    out: dict[str, Any] = {"sizes": [], "config": _steps_config(args, configs)}
    for size in args.sizes:
        steps_before = {r.name: (r.build_step_s, r.build_steps) for r in runners}
        lockstep.build_to(size, args.build_every)
        row = _size_row(lockstep, size, steps_before)
        # Warm the trim counter's cache as a long-running agent's would be (not timed).
        time_trim(history, tiktoken_counter)
        samples, trim = lockstep.window(args.repeats, tiktoken_counter)
        row["window_history_messages"] = [row["history_messages"], len(history)]
        row["trim"] = trim
        for runner in runners:
            row["runners"][runner.name] = _runner_summary(runner, samples[runner.name], history)
        if args.profile:
            row["profiles"] = profiles(args, lockstep, size)
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


def _size_row(lockstep: Lockstep, size: int, steps_before: dict[str, tuple[float, int]]) -> dict[str, Any]:
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
