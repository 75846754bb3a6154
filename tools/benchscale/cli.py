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
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.policy_spec import split_specs

from .header import header
from .quiet import bench_quiet
from .recall import bench_recall
from .render import render
from .rss import bench_rss, rss_worker
from .steps import bench_steps
from .targets import targets
from .weight import bench_weight


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.replace("_", "").split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    _fill_defaults(args)
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


def _parser() -> argparse.ArgumentParser:
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
    return parser


def _fill_defaults(args: argparse.Namespace) -> None:
    """The defaults that depend on ``--quick`` and ``--policy``."""
    quick = args.quick
    args.sizes = args.sizes or ([200, 600] if quick else [1_000, 10_000, 50_000])
    args.pages = args.pages or ([50, 200] if quick else [1_000, 10_000, 100_000])
    args.repeats = args.repeats or (20 if quick else 200)
    args.rss_threads = args.rss_threads or (2 if quick else 20)
    args.rss_pages = args.rss_pages or ([1, 3] if quick else [10, 200])
    extra = "fifo" if args.extra_policies is None else args.extra_policies
    args.extra_policies = [p for p in split_specs(extra) if p.strip() and p.strip() != args.policy]


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
