"""One graph case of the fuzzer, built for a deterministic test: one thread, no store faults,
removals, forks or concurrency unless the test asks (the fuzzer's own compiled graphs and oracles)."""

from __future__ import annotations

import random
import warnings
from dataclasses import replace

from tools.fuzzing import Report
from tools.fuzzing.graph import GraphCase, GraphParams
from tools.fuzzing.vocabulary import Words

QUIET = GraphParams(
    kind="node",
    mode="replace",
    sync=True,
    boundary="fixed_5",
    policy="fifo",
    max_tokens=300,
    low_water=None,
    bookmark_share=0.05,
    large_result_share=0.5,
    fail_rate=0.0,
    on_store_error="raise",
    backend="memory",
    turns=1,
    threads=1,
    forks=False,
    concurrent=False,
    system_prompt=False,
)


def graph_case(seed: int, thread: str, tag: str, **options) -> tuple[GraphCase, Report]:
    """A case of `seed` with `QUIET`'s options but `options`, its one thread `thread` (words marked
    `tag`), and the report its oracles fill."""
    report = Report()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = GraphCase(seed, replace(QUIET, **options), report)
    case.words[thread] = Words(random.Random(seed), tag)
    case.snapshots[thread] = {}
    case.heads[thread] = None
    return case, report
