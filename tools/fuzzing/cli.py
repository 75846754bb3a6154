"""The command line: campaigns, one case, shrinking."""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import warnings
from pathlib import Path

from .graph import GraphCase, graph_params
from .pure import PureCase, pure_params
from .report import Failure, Report
from .shrink import repro_script, shrink_pure

# -- CLI ----------------------------------------------------------------------------------------

USAGE = """Fuzz the paging core: random histories through the pure step and through compiled graphs.

Every generated history is driven like an agent drives it, and invariants are checked at
every model call:

- lossless: ``reconstruct_history(state messages, pages, clusters=, state=)`` equals the
  full history in order (pure mode: an unpaged reference kept with `add_messages`; graph
  mode: the history only grows by what the run added, removals aside, and every
  checkpoint ever made rebuilds to the same history forever);
- every prompt is a valid chat (`langmem_paging.testing.conformance.valid_chat`);
- every prompt is within budget (messages, plus tool schemas and system prompt for the
  middleware) unless `over_budget` is reported and what nothing may evict explains it;
- the newest user message is always shown; a large tool result is paged on arrival
  (a stub naming the tool and its args);
- page and cluster ids are never reused; page records are never overwritten;
- recall: within its size cap, delimited (stored text cannot pass for structure), never
  shows another thread's or another branch's pages;
- inputs are never mutated; nothing raises except injected store errors, and the turn
  after an injected error recovers.

Modes: ``pure`` (`page_messages`, and `Pager` over a page store, replace and view),
``graph`` (`create_agent` + `PagingMiddleware` and `StateGraph` + `PagingNode` +
`ToolNode`, sync and async, with forks, time travel, concurrent runs and a flaky store),
``all``. The deterministic scenario of each bug a campaign found is a plain pytest test in the
feature file it concerns (for example `tests/core/test_reused_ids.py`,
`tests/integration/test_forks.py`).

Usage (from the repository root)::

    python tools/fuzz.py --mode all --minutes 60 --seed 1 --out results/fuzz.json
    python tools/fuzz.py --mode pure --seed 1234 --iterations 1 -v   # reproduce one case
    python tools/fuzz.py --shrink 1234                               # minimal standalone repro script

A case is reproduced by its seed alone (case seed = ``--seed`` + iteration index); graph cases
only approximately (message ids are uuids, concurrent runs interleave). Failures are grouped by
invariant; each keeps the flags of what happened before it (spoofed metadata, reused ids,
removals, store errors, forks, ...) and a label naming a known cause when one is recognized.
"""


def run_small_case(mode: str, seed: int) -> list[Failure]:
    """One CI-sized case (a few turns, no concurrency): the failures it found."""
    report = Report()
    rng = random.Random(seed * 7919 + (1 if mode == "graph" else 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "pure":
            params = pure_params(rng)
            params.turns = min(params.turns, 12)
            PureCase(seed, params, report).run()
        else:
            params = graph_params(rng)
            params.turns, params.concurrent, params.sync = min(params.turns, 6), False, True
            GraphCase(seed, params, report).run()
    return report.failures


def write_repro(directory: Path, seed: int, n: int) -> None:
    """Shrink the pure case `seed` and write a standalone script replaying it."""
    params = pure_params(random.Random(seed * 7919))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        events, failure = shrink_pure(seed, params, budget_s=90)
    if failure is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "_", failure.invariant.lower()).strip("_")[:50]
    path = directory / f"{n:02d}_seed{seed}_{slug}.py"
    header = f"# {failure.invariant}: {failure.detail[:300]}\n# {params.describe()}\n# {len(events)} events\n"
    path.write_text(header + repro_script(params, events))
    print(f"    shrunk to {len(events)} events: {path}", flush=True)


def run_case(mode: str, seed: int, report: Report, *, verbose: bool = False) -> None:
    rng = random.Random(seed * 7919 + (1 if mode == "graph" else 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "pure":
            params = pure_params(rng)
            report.cases["pure"] += 1
            PureCase(seed, params, report, verbose=verbose).run()
        else:
            params = graph_params(rng)
            report.cases[f"graph-{params.kind}"] += 1
            GraphCase(seed, params, report, verbose=verbose).run()
    if verbose:
        print(f"[{mode} seed={seed}] {params.describe()}", flush=True)


def print_shrunk(seed: int, minutes: float | None) -> int:
    """``--shrink SEED``: print the shrunk case's standalone repro script (1), or that it passes (0)."""
    params = pure_params(random.Random(seed * 7919))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        events, failure = shrink_pure(seed, params, budget_s=(minutes or 3) * 60)
    if failure is None:
        print("the case passes")
        return 0
    print(f"# {failure.invariant}: {failure.detail[:300]}\n# {params.describe()}\n# {len(events)} events")
    print(repro_script(params, events))
    return 1


def run_mode(
    mode: str, args: argparse.Namespace, report: Report, start: float, deadline: float | None
) -> None:
    """One mode's cases (``--iterations`` of them, or until `deadline`), each new failure printed."""
    i = 0
    seen = len(report.distinct())
    while (args.iterations is None or i < args.iterations) and (
        deadline is None or time.monotonic() < deadline
    ):
        seed = args.seed + i
        run_case(mode, seed, report, verbose=args.verbose)
        if len(report.distinct()) > seen:
            seen = len(report.distinct())
            last = report.failures[-1]
            print(
                f"NEW FAILURE [{mode} seed={seed}] {last.signature}\n    {last.detail[:300]}\n    "
                f"reproduce: python tools/fuzz.py --mode {mode} --seed {seed} --iterations 1",
                flush=True,
            )
            if args.repro_dir is not None and mode == "pure":
                write_repro(args.repro_dir, seed, seen)
        i += 1
        if i % 25 == 0:
            print(
                f"[{mode}] {i} cases, {time.monotonic() - start:.0f}s, {len(report.failures)} failures "
                f"({len(report.distinct())} distinct)",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="first case seed (case i uses seed + i)")
    parser.add_argument(
        "--iterations", type=int, default=None, help="cases per mode (default: until --minutes)"
    )
    parser.add_argument("--mode", choices=["pure", "graph", "all"], default="all")
    parser.add_argument("--minutes", type=float, default=None, help="time budget for the whole run")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON summary here")
    parser.add_argument(
        "--repro-dir",
        type=Path,
        default=None,
        help="shrink each new distinct pure failure and write a standalone repro script here",
    )
    parser.add_argument(
        "--shrink",
        type=int,
        default=None,
        metavar="SEED",
        help="shrink the pure case SEED and print a standalone repro script",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.shrink is not None:
        return print_shrunk(args.shrink, args.minutes)
    if args.iterations is None and args.minutes is None:
        args.iterations = 20
    report = Report()
    start = time.monotonic()
    deadline = start + args.minutes * 60 if args.minutes else None
    modes = ["pure", "graph"] if args.mode == "all" else [args.mode]
    for k, mode in enumerate(modes):
        # split the remaining time evenly between the remaining modes
        mode_deadline = None
        if deadline is not None:
            mode_deadline = time.monotonic() + (deadline - time.monotonic()) / (len(modes) - k)
        run_mode(mode, args, report, start, mode_deadline)
    summary = report.summary()
    summary["elapsed_s"] = round(time.monotonic() - start)
    text = json.dumps(summary, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
