"""Event-loop stall of the first async turns in a fresh process.

An async agent shares its event loop with everything else the process serves: a turn that loads
a tokenizer or imports a stemmer on the loop stalls every other request. This script starts a
fresh Python process (nothing loaded: no encoding, no stemmer, no index), builds a `create_agent`
with `PagingMiddleware` and a scripted model before its event loop runs (as a server builds its
agent at startup), and runs its first turns with `ainvoke` while a sampler task on the same loop
wakes every `--tick-ms` and records how late it woke. The worst lateness during a turn is the
longest the loop was blocked in it. Pages form from the second turn (a small budget), so the
step's bookmark, stemming and store paths all run. `--delay-ms` sets when the first request comes
after the loop started (0: at once, while the tokenizer may still be loading).

    python tools/bench_loop_stall.py                 # 3 fresh processes, 6 turns each, a table
    python tools/bench_loop_stall.py --delay-ms 3000 --json out.json

On a loaded machine a 1 ms sleep itself wakes late by the scheduler's doing: `max_stall_before_ms`
(in the JSON) is the worst lateness before any turn ran, the noise floor of the run.

A script, not a test: it prints what it measured and asserts nothing (the target, max stall
<= 50 ms on the first turn, is reported beside the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET_MS = 50.0


def worker(turns: int, tick_ms: float, max_tokens: int, delay_ms: float) -> dict[str, Any]:
    """Run in a fresh process: build the agent as a server does at startup (before its loop runs),
    then the first `turns` async turns, `delay_ms` after the loop started, and the loop's lateness
    in each."""
    import asyncio

    t0 = time.perf_counter()
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from langmem_paging import PagingMiddleware
    from langmem_paging.testing import ScriptedChatModel

    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=max_tokens, boundary="fixed_2", policy="lru", store=store)
    model = ScriptedChatModel(
        responses=[f"Noted, item {i} about Ljubljana{i} and its beekeepers." for i in range(turns + 5)]
    )
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver(), store=store)
    startup_ms = (time.perf_counter() - t0) * 1e3

    async def main() -> list[dict[str, Any]]:
        config = {"configurable": {"thread_id": "stall"}}
        lateness: list[float] = []
        running = True

        async def sampler() -> None:
            tick = tick_ms / 1e3
            while running:
                t0 = time.perf_counter()
                await asyncio.sleep(tick)
                lateness.append((time.perf_counter() - t0 - tick) * 1e3)

        task = asyncio.create_task(sampler())
        await asyncio.sleep(max(delay_ms, 5 * tick_ms) / 1e3)  # the sampler runs before the first turn
        before = max(lateness, default=0.0)
        rows = []
        for turn in range(turns):
            start = len(lateness)
            t0 = time.perf_counter()
            text = (
                f"Turn {turn}: my neighbour Zarko{turn} keeps {turn + 3} beehives near Lake Bled, "
                f"and the honey harvest in September {2000 + turn} was remarkable."
            )
            await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
            wall = (time.perf_counter() - t0) * 1e3
            await asyncio.sleep(2 * tick_ms / 1e3)  # the tick that spans the turn's end is counted
            during = lateness[start:]
            state = await agent.aget_state(config)
            pages = (state.values.get("paging") or {}).get("next", {}).get("p", 1) - 1
            rows.append(
                {
                    "turn": turn + 1,
                    "wall_ms": wall,
                    "max_stall_ms": max(during, default=0.0),
                    "samples": len(during),
                    "pages_formed": pages,
                }
            )
        running = False
        await task
        rows[0]["max_stall_before_ms"] = before
        return rows

    return {"startup_ms": startup_ms, "delay_ms": delay_ms, "turns": asyncio.run(main())}


def run_fresh(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in a new interpreter (nothing cached from an earlier run)."""
    params = json.dumps(
        {
            "turns": args.turns,
            "tick_ms": args.tick_ms,
            "max_tokens": args.max_tokens,
            "delay_ms": args.delay_ms,
        }
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", params], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def header() -> dict[str, Any]:
    def git(*argv: str) -> str:
        try:
            return subprocess.run(
                ["git", *argv], cwd=REPO, capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    return {
        "benchmark": "bench_loop_stall",
        "git_commit": git("rev-parse", "HEAD") or None,
        "git_dirty": bool(git("status", "--porcelain")),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "argv": sys.argv[1:],
        "target_first_turn_max_stall_ms": TARGET_MS,
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"first turn {report['runs'][0]['delay_ms']:.0f} ms after the loop started; agent built before it",
        "",
        "| run | turn | wall ms | max stall ms | pages formed |",
        "| --- | --- | --- | --- | --- |",
    ]
    for i, run in enumerate(report["runs"], 1):
        for row in run["turns"]:
            lines.append(
                f"| {i} | {row['turn']} | {row['wall_ms']:.0f} | {row['max_stall_ms']:.1f} | "
                f"{row['pages_formed']} |"
            )
    firsts = [run["turns"][0]["max_stall_ms"] for run in report["runs"]]
    worst = [max(r["max_stall_ms"] for r in run["turns"]) for run in report["runs"]]
    lines.append("")
    lines.append(
        f"first turn max stall: median {statistics.median(firsts):.1f} ms, max {max(firsts):.1f} ms "
        f"(target <= {TARGET_MS:.0f} ms); any turn: max {max(worst):.1f} ms; "
        f"loadavg {report['header']['loadavg']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=6, help="turns per fresh process (default 6)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes (default 3)")
    parser.add_argument("--tick-ms", type=float, default=1.0, help="sampler period (default 1 ms)")
    parser.add_argument(
        "--max-tokens", type=int, default=400, help="paging budget (small: pages form from the second turn)"
    )
    parser.add_argument(
        "--delay-ms",
        type=float,
        default=0.0,
        help="time between the loop's start and the first turn (default 0: at once)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the raw numbers here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        params = json.loads(args.worker)
        print(
            json.dumps(worker(params["turns"], params["tick_ms"], params["max_tokens"], params["delay_ms"]))
        )
        return {}
    report = {"header": header(), "runs": [run_fresh(args) for _ in range(args.runs)]}
    print(render(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
