"""``python -m evals ablation-suite``: the cooperative-paging study's ablation in one command.

Six ``python -m evals ablate`` runs (`SUITE`), each at every budget, under one output directory
(re-running resumes each run where it stopped); then each run's summary.json and summary.md are copied
into a data directory (small: no per-question rows) beside findings.json and findings.md, the study's
findings against ours at each budget (`evals.report.write_findings`). Findings are written only from
complete runs made by one version of the code that produces their rows (`check_suite`), so a table never mixes a half-run or an older library.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BOUNDARIES",
    "POLICIES",
    "SUITE",
    "SuiteIncomplete",
    "SuiteRun",
    "RESULT_CODE",
    "same_code",
    "ablate_argv",
    "check_suite",
    "run_suite",
]

BOUNDARIES = ("fixed_10", "fixed_20", "fixed_40", "tokens_500", "session", "topic_shift")
"""The grid's boundary strategies (the study's, plus pages of a fixed token size)."""

POLICIES = ("fifo", "lru", "lfu", "semantic")
"""The grid's eviction policies."""

NEEDED_BOUNDARIES = ("fixed_20", "topic_shift")
"""Boundaries the findings compare (the study's best and its collapse): a narrowed grid keeps them."""

SUITE_SYNTHETIC_TURNS = 1200
"""Turns of each synthetic conversation in the suite (the other commands generate 600): 600 turns
(about 6,250 tokens) fit whole at B=8000, so nothing was paged there and the rows measured nothing."""


@dataclass(frozen=True)
class SuiteRun:
    """One run of the suite: one ``python -m evals ablate`` command at every budget."""

    name: str
    """Its directory under the suite's output and data directories."""
    dataset: str
    """``synthetic`` (generated probes) or ``locomo`` (LoCoMo dev)."""
    policies: tuple[str, ...]
    """Policy specs (`evals.policy_spec`), bookmark strategies included."""
    protocol: str = "end"
    """``end``: every question after the whole conversation; ``streaming``: each after the session
    following its evidence, kept, so recalls feed LRU and LFU."""
    grid: bool = False
    """Every boundary of the suite; otherwise fixed_20 only."""


SUITE = (
    SuiteRun("synthetic", "synthetic", POLICIES, grid=True),
    # under the end protocol FIFO, LRU and LFU should evict alike: run anyway, so the table shows it
    SuiteRun("locomo", "locomo", POLICIES, grid=True),
    SuiteRun("synthetic-streaming", "synthetic", POLICIES, protocol="streaming"),
    SuiteRun("locomo-streaming", "locomo", POLICIES, protocol="streaming"),
    SuiteRun(
        "bookmarks-synthetic",
        "synthetic",
        ("fifo", "fifo+bookmarks:keywords", "fifo+bookmarks:discriminative", "fifo+bookmarks:frequent"),
    ),
    SuiteRun(
        "bookmarks-locomo",
        "locomo",
        ("lfu", "lfu+bookmarks:keywords", "lfu+bookmarks:discriminative", "lfu+bookmarks:frequent"),
    ),
)
"""The runs `evals.report.study_findings` reads (the LoCoMo bookmark runs use the library's default
policy, lfu; the synthetic ones fifo, the study's best there). The bookmark runs: the default
bookmarker (compact), the comma form by name (``keywords``), ``discriminative``, and the heuristic."""

SUMMARY_FILES = ("summary.json", "summary.md")
"""What the data directory keeps of each run."""


RESULT_CODE = (
    ":(top)langmem_paging",
    ":(top)evals",
    ":(top,exclude)evals/report.py",
    ":(top,exclude)evals/ablation_suite.py",
    ":(top,exclude)evals/cli.py",
)
"""The code a run's rows depend on (git pathspecs): the library and the harness, not the reports made
from the rows nor the command line that starts them."""


def same_code(a: str | None, b: str | None) -> bool:
    """Whether commits `a` and `b` hold the same `RESULT_CODE` (unknown commits: not known to)."""
    from evals.runner import _git

    if a is None or b is None:
        return False
    return a == b or _git("diff", "--name-only", a, b, "--", *RESULT_CODE) == ""


class SuiteIncomplete(ValueError):
    """A run of the suite is missing, partial, or from another commit: no findings are written."""


def ablate_argv(
    run: SuiteRun, out: Path, budgets: Sequence[int], boundaries: Sequence[str], passthrough: Sequence[str]
) -> list[str]:
    """The ``python -m evals ablate`` arguments of `run` (what the suite runs, and what a reader may
    run by hand)."""
    return [
        "ablate",
        "--on",
        run.dataset,
        "--out",
        str(out / run.name),
        "--budgets",
        ",".join(map(str, budgets)),
        "--boundaries",
        ",".join(boundaries if run.grid else ["fixed_20"]),
        "--policies",
        ",".join(run.policies),
        "--protocol",
        run.protocol,
        *passthrough,
    ]


def _questions(path: Path) -> tuple[dict, list[dict]]:
    from evals.report import load_results

    return load_results(path)


def check_suite(out: Path, budgets: Sequence[int], boundaries: Sequence[str]) -> dict[str, dict]:
    """Each run's header, once every run of `SUITE` under `out` holds every (budget, boundary, policy)
    cell for every conversation it saw, all made by the same `RESULT_CODE`.

    Raises:
        SuiteIncomplete: naming the run and what it lacks.
    """
    headers = {run.name: _check_run(out, run, budgets, boundaries) for run in SUITE}
    commits = {name: head.get("git_commit") for name, head in headers.items()}
    first = next(iter(commits.values()))
    if not all(same_code(first, c) for c in commits.values()):
        raise SuiteIncomplete(
            f"the runs under {out} come from commits {commits}, whose code differs: use a new --out"
        )
    return headers


def _check_run(out: Path, run: SuiteRun, budgets: Sequence[int], boundaries: Sequence[str]) -> dict:
    """`run`'s header, once its results under `out` hold every (budget, boundary, policy) cell for
    every conversation they saw (`check_suite`).

    Raises:
        SuiteIncomplete: naming the run and what it lacks.
    """
    results = out / run.name / "results.jsonl"
    if not results.exists():
        raise SuiteIncomplete(f"run {run.name!r} is missing: no {results}")
    head, rows = _questions(out / run.name)
    samples = sorted({r["sample_id"] for r in rows})
    cells = {(r["budget"], r["boundary"], r["policy"], r["sample_id"]) for r in rows}
    wanted = [
        (b, bd, p, s)
        for b in budgets
        for bd in (boundaries if run.grid else ["fixed_20"])
        for p in run.policies
        for s in samples
    ]
    missing = [cell for cell in wanted if cell not in cells]
    if not samples or missing:
        what = f"{len(missing)} of {len(wanted)} units, first {missing[0]}" if missing else "every unit"
        raise SuiteIncomplete(f"run {run.name!r} in {results} lacks {what}; re-run the suite to finish it")
    return head


def run_suite(
    out: str | Path,
    data_dir: str | Path,
    *,
    budgets: Sequence[int],
    boundaries: Sequence[str] = BOUNDARIES,
    passthrough: Sequence[str] = (),
    ablate: Callable[[list[str]], int],
    commit: str | None = None,
) -> list[dict]:
    """Run (or resume) every run of `SUITE` under `out` with `ablate` (``evals.cli.main``), copy each
    run's summaries into `data_dir`, and write the findings there at each budget; return them.
    `passthrough`: ``ablate`` options every run takes (conversations, processes, ...). `commit`: the
    code's commit: runs resumed from `out` must have been made by the same `RESULT_CODE` (None: any,
    all alike).

    Raises:
        SuiteIncomplete: a run did not finish (see `check_suite`).
    """
    from evals.report import study_findings, write_findings

    out, data_dir = Path(out), Path(data_dir)
    if commit is not None:  # before running anything: resuming an older library's runs would mix them
        stale = {
            run.name: head.get("git_commit")
            for run in SUITE
            if (out / run.name / "results.jsonl").exists()
            for head in [_questions(out / run.name)[0]]
            if not same_code(head.get("git_commit"), commit)
        }
        if stale:
            raise SuiteIncomplete(
                f"the runs {stale} under {out} come from another commit than the code's ({commit}), "
                "and langmem_paging/ or evals/ changed since: use a new --out, or pass "
                "--any-commit to resume them as they are"
            )
    wall: dict[str, float] = {}
    for run in SUITE:
        start = time.perf_counter()
        argv = ablate_argv(run, out, budgets, boundaries, passthrough)
        print(f"\n## {run.name}: python -m evals {' '.join(argv)}", file=sys.stderr)
        if ablate(argv) != 0:
            raise SuiteIncomplete(f"run {run.name!r} failed: python -m evals {' '.join(argv)}")
        wall[run.name] = round(time.perf_counter() - start, 1)
    headers = check_suite(out, budgets, boundaries)
    for run in SUITE:
        target = data_dir / run.name
        target.mkdir(parents=True, exist_ok=True)
        for name in SUMMARY_FILES:
            shutil.copyfile(out / run.name / name, target / name)
    runs = {
        run.name: {
            "command": "python -m evals "
            + " ".join(ablate_argv(run, Path("OUT"), budgets, boundaries, passthrough)),
            "git_commit": headers[run.name].get("git_commit"),
            "git_dirty": headers[run.name].get("git_dirty"),
            # unit wall seconds summed over the run, resumes included (the runner's own count)
            "unit_seconds": round(sum(headers[run.name].get("wall_seconds", {}).values()), 1),
        }
        for run in SUITE
    }
    rows = study_findings(
        out / "synthetic",
        out / "bookmarks-locomo",
        synthetic_policies=out / "synthetic-streaming",
        locomo_policies=out / "locomo-streaming",
        synthetic_bookmarks=out / "bookmarks-synthetic",
        locomo=out / "locomo",
        budgets=budgets,
    )
    return write_findings(
        data_dir,
        rows,
        budgets=budgets,
        # this invocation's wall seconds per run (about 0 for a run already complete)
        extra={"runs": runs, "wall_seconds": wall},
    )


def summary_line(rows: list[dict]) -> str:
    """How many findings reproduce at each budget, for the command's last line."""
    budgets = sorted({r["budget"] for r in rows})
    counts = {b: sum(r["verdict"] == "reproduces" for r in rows if r["budget"] == b) for b in budgets}
    total = {b: sum(r["budget"] == b for r in rows) for b in budgets}
    return "; ".join(f"B={b}: {counts[b]} of {total[b]} findings reproduce" for b in budgets)
