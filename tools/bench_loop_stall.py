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
    python tools/bench_loop_stall.py --baseline main --runs 5   # before/after, runs alternated

`--baseline REF` compares side by side in one run: the package as it is at git REF (extracted with
`git archive` to a temporary directory) and the working tree, each in its own fresh processes,
alternated so that both see the same machine load.

On a loaded machine a 1 ms sleep itself wakes late by the scheduler's doing: `max_stall_before_ms`
(in the JSON) is the worst lateness before any turn ran, the noise floor of the run.

A script, not a test: it prints what it measured and asserts nothing (the target, max stall
<= 50 ms on the first turn, is reported beside the numbers).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
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
    from langchain_core.runnables import RunnableConfig
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
        config: RunnableConfig = {"configurable": {"thread_id": "stall"}}
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

    import langmem_paging

    source = str(Path(langmem_paging.__file__).resolve().parents[1])
    return {"startup_ms": startup_ms, "delay_ms": delay_ms, "source": source, "turns": asyncio.run(main())}


def extract(ref: str, into: Path) -> Path:
    """The package as it is at git `ref`, written under `into` (the repository is not touched)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "langmem_paging"], cwd=REPO, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_fresh(args: argparse.Namespace, source: Path = REPO, code: str = "working tree") -> dict[str, Any]:
    """One measurement in a new interpreter (nothing cached from an earlier run), importing the
    package from `source`."""
    params = json.dumps(
        {
            "turns": args.turns,
            "tick_ms": args.tick_ms,
            "max_tokens": args.max_tokens,
            "delay_ms": args.delay_ms,
        }
    )
    env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", params], capture_output=True, text=True, check=True, env=env
    )
    run: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(run["source"]) != source.resolve():  # an installed copy shadowed the tree asked for
        raise RuntimeError(f"the worker imported langmem_paging from {run['source']}, not {source}")
    run["code"] = code
    return run


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
        "| code | run | turn | wall ms | max stall ms | stall before ms | pages formed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    seen: dict[str, int] = {}
    for run in report["runs"]:
        i = seen[run["code"]] = seen.get(run["code"], 0) + 1
        for row in run["turns"]:
            before = f"{row['max_stall_before_ms']:.1f}" if "max_stall_before_ms" in row else ""
            lines.append(
                f"| {run['code']} | {i} | {row['turn']} | {row['wall_ms']:.0f} | {row['max_stall_ms']:.1f} | "
                f"{before} | {row['pages_formed']} |"
            )
    lines += [
        "",
        "| code | runs | first turn max stall ms (median, max) | stall before (median, max) "
        "| any turn max | startup ms (median) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for code in dict.fromkeys(run["code"] for run in report["runs"]):
        runs = [run for run in report["runs"] if run["code"] == code]
        firsts = [run["turns"][0]["max_stall_ms"] for run in runs]
        befores = [run["turns"][0]["max_stall_before_ms"] for run in runs]
        worst = max(max(r["max_stall_ms"] for r in run["turns"]) for run in runs)
        startup = statistics.median(run["startup_ms"] for run in runs)
        lines.append(
            f"| {code} | {len(runs)} | {statistics.median(firsts):.1f}, {max(firsts):.1f} | "
            f"{statistics.median(befores):.1f}, {max(befores):.1f} | {worst:.1f} | {startup:.0f} |"
        )
    lines.append("")
    lines.append(f"target: first turn max stall <= {TARGET_MS:.0f} ms; loadavg {report['header']['loadavg']}")
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
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="REF",
        help="also measure the package as it is at this git ref, in alternated fresh processes",
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
    with tempfile.TemporaryDirectory(prefix="bench_loop_stall_") as tmp:
        baseline = extract(args.baseline, Path(tmp)) if args.baseline else None
        runs = []
        for _ in range(args.runs):
            if baseline is not None:
                runs.append(run_fresh(args, baseline, f"baseline {args.baseline}"))
            runs.append(run_fresh(args))
    report = {"header": header(), "runs": runs}
    print(render(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
