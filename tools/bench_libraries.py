"""Hand-written code against the well-kept library that could replace it, side by side in one run.

Five places (issue 22, item 10): store retries (tenacity), bootstrap intervals
(scipy.stats.bootstrap), the report's token chart (matplotlib's SVG backend), k-means with
silhouette choice of k (scikit-learn), CLI tables (tabulate). For each: time per call of both
(median of repeats, same inputs, same process) and whether the results agree (same value, same
interval within a tolerance, same clusters). A library that is missing is reported as such.

Usage:
    python tools/bench_libraries.py [--json out.json] [--repeats 7]

Prints a table, then the same rows as JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# One BLAS/OpenMP thread for both sides: on a loaded 2-core machine threaded BLAS made a 120x384 SVD
# take 1.1 s instead of 13 ms, which measures the scheduler, not the code.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run by path: evals/ is not installed


def _seconds(call: Callable[[], Any], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - start) / inner


def _median_seconds(call: Callable[[], Any], repeats: int, inner: int) -> float:
    return statistics.median(_seconds(call, inner) for _ in range(repeats))


def _paired(ours: Callable[[], Any], lib: Callable[[], Any], repeats: int, inner: int) -> tuple[float, float]:
    """Median seconds per call of each, measured in alternation so that load from other processes
    (this machine is shared) falls on both alike."""
    a, b = [], []
    for _ in range(repeats):
        a.append(_seconds(ours, inner))
        b.append(_seconds(lib, inner))
    return statistics.median(a), statistics.median(b)


def _import_seconds(module: str) -> float | None:
    """First-import time of `module` in a fresh interpreter (what a CLI run or a worker pays)."""
    import subprocess

    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return float(done.stdout) if done.returncode == 0 else None


def _row(item: str, ours: float, lib: float | None, library: str, exact: str, note: str = "") -> dict:
    return {
        "item": item,
        "library": library,
        "ours_us": round(ours * 1e6, 1),
        "library_us": None if lib is None else round(lib * 1e6, 1),
        "library_over_ours": None if lib is None else round(lib / ours, 2),
        "exact": exact,
        "note": note,
    }


# -- 1. store retries ------------------------------------------------------------------------
def bench_retries(repeats: int) -> list[dict]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    from langmem_paging.storage.page_store import PageStore

    try:
        import tenacity
    except ImportError:
        return [_row("store retries", 0.0, None, "tenacity", "missing")]
    store = InMemoryStore()
    pages = PageStore(store, retries=2)
    ops = [PutOp(("bench",), "k", {"v": 1})]

    def ours() -> Any:
        return pages._batch(ops)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(3),
        wait=tenacity.wait_exponential(multiplier=0.01, min=0.01),
        reraise=True,
    )

    def library() -> Any:
        return retrying(store.batch, ops)

    rows = [
        _row(
            "store retries (call succeeds)",
            *_paired(ours, library, repeats, 2000),
            "tenacity",
            "same result",
            "no failure: the common path, pure overhead of the wrapper",
        )
    ]

    class Flaky:
        """Fails every other call (one retry per call)."""

        def __init__(self) -> None:
            self.calls = 0

        def __call__(self, ops: Any) -> Any:
            self.calls += 1
            if self.calls % 2:
                raise OSError("transient")
            return store.batch(ops)

    import logging

    logging.getLogger("langmem_paging").setLevel(logging.ERROR)
    flaky_ours, flaky_lib = Flaky(), Flaky()
    mine = PageStore(store, retries=2)
    mine.store = type("FlakyStore", (type(store),), {"batch": lambda self, o: flaky_ours(o)})()  # type: ignore[misc]
    import langmem_paging.storage.page_store as store_module

    sleep = store_module.time.sleep
    store_module.time.sleep = lambda s: None  # the backoff itself is the same sleep for both: leave it out
    try:
        retry_nowait = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none(), reraise=True
        )
        ours_failing, lib_failing = _paired(
            lambda: mine._batch(ops), lambda: retry_nowait(flaky_lib, ops), repeats, 500
        )
    finally:
        store_module.time.sleep = sleep
    # Both ran repeats*500 calls; two store calls each (one failure, one success) is the same behaviour.
    per_call = (flaky_ours.calls / (repeats * 500), flaky_lib.calls / (repeats * 500))
    rows.append(
        _row(
            "store retries (one retry)",
            ours_failing,
            lib_failing,
            "tenacity",
            "same attempts" if per_call == (2.0, 2.0) else f"attempts per call {per_call}",
            "backoff sleep excluded from both",
        )
    )
    return rows


# -- 2. bootstrap intervals ------------------------------------------------------------------
def bench_bootstrap(repeats: int) -> list[dict]:
    from evals.metrics import mean_interval

    try:
        from scipy import stats
    except ImportError:
        return [_row("bootstrap CI", 0.0, None, "scipy", "missing")]
    rng = np.random.default_rng(1)
    values = rng.integers(0, 2, size=1500).astype(float)  # per-question 0/1 coverage
    clusters = np.repeat(np.arange(10), 150)  # LoCoMo: 10 conversations

    def scipy_plain() -> list[float]:
        res = stats.bootstrap(
            (values,),
            np.mean,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(0),
            vectorized=True,
        )
        return [round(float(res.confidence_interval.low), 4), round(float(res.confidence_interval.high), 4)]

    labels = {c: k for k, c in enumerate(dict.fromkeys(clusters.tolist()))}
    index = np.array([labels[c] for c in clusters.tolist()])
    sums = np.bincount(index, weights=values)
    counts = np.bincount(index).astype(float)

    def ratio(s: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
        return s.sum(axis=axis) / c.sum(axis=axis)

    def scipy_clustered() -> list[float]:
        res = stats.bootstrap(
            (sums, counts),
            ratio,
            paired=True,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(0),
            vectorized=True,
        )
        return [round(float(res.confidence_interval.low), 4), round(float(res.confidence_interval.high), 4)]

    rows = []
    for name, ours_call, lib_call in (
        ("bootstrap CI (1500 questions)", lambda: mean_interval(values), scipy_plain),
        (
            "bootstrap CI (clustered, 10 conv.)",
            lambda: mean_interval(values, clusters=clusters),
            scipy_clustered,
        ),
    ):
        a, b = ours_call(), lib_call()
        assert a is not None
        width = a[1] - a[0]
        gap = max(abs(a[0] - b[0]), abs(a[1] - b[1]))
        rows.append(
            _row(
                name,
                *_paired(ours_call, lib_call, repeats, 10),
                "scipy",
                f"ends differ {gap:.4f} ({gap / width:.0%} of width)",
                f"ours {a}, scipy {b}; different random draws, so equal only within Monte Carlo error",
            )
        )
    return rows


# -- 3. report chart -------------------------------------------------------------------------
def bench_chart(repeats: int) -> list[dict]:
    from langmem_paging.ops.report import tokens_chart
    from langmem_paging.ops.snapshots import PagingStep

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [_row("report chart", 0.0, None, "matplotlib", "missing")]
    import io

    steps = [PagingStep(i, i, 300 + (i * 37) % 400, 600, f"t{i}") for i in range(1, 201)]

    def library() -> str:
        fig, ax = plt.subplots(figsize=(7.6, 2.6))
        x = [s.step for s in steps]
        ax.step(x, [s.budget for s in steps], where="mid", linestyle="--")
        ax.plot(x, [s.tokens for s in steps], marker="o", markersize=2)
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        plt.close(fig)
        return buf.getvalue()

    ours_svg, lib_svg = tokens_chart(steps), library()
    return [
        _row(
            "report chart (200 calls)",
            _median_seconds(lambda: tokens_chart(steps), repeats, 20),
            _median_seconds(library, repeats, 2),
            "matplotlib",
            "different markup",
            f"svg bytes ours {len(ours_svg)} vs {len(lib_svg)}; matplotlib has no per-mark data-*/title "
            f"(the report's hover text, tests), and is an evals-only extra",
        )
    ]


# -- 4. k-means ------------------------------------------------------------------------------
def bench_kmeans(repeats: int) -> list[dict]:
    from langmem_paging.strategies.kmeans import choose_k, kmeans, pairwise_sq_distances

    try:
        from sklearn.cluster import KMeans
        from sklearn.metrics import adjusted_rand_score, silhouette_score
    except ImportError:
        return [_row("k-means", 0.0, None, "scikit-learn", "missing")]
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(6, 384)) * 3
    points = np.concatenate([c + rng.normal(size=(20, 384)) for c in centers])  # 120 resident pages, 384-d

    def ours_k() -> Any:
        return kmeans(points, 6, restarts=4, seed=0)

    def lib_k() -> Any:
        return KMeans(6, n_init=4, random_state=0).fit(points)

    a, b = ours_k(), lib_k()
    rows = [
        _row(
            "k-means k=6 (120x384)",
            *_paired(ours_k, lib_k, repeats, 10),
            "scikit-learn",
            f"ARI {adjusted_rand_score(a.labels, b.labels_):.3f}, inertia ours "
            f"{a.inertia:.1f} vs {b.inertia_:.1f}",
            "same seed does not give the same draws (different RNGs)",
        )
    ]
    sq = pairwise_sq_distances(points)

    def ours_choose() -> Any:
        return choose_k(points, k_max=12, sq_distances=sq)

    def lib_choose() -> Any:
        best = None
        for k in range(2, 13):
            labels = KMeans(k, n_init=4, random_state=0).fit_predict(points)
            score = silhouette_score(points, labels)
            if best is None or score > best[0] + 1e-12:
                best = (score, labels)
        return best

    ca, cb = ours_choose(), lib_choose()
    assert cb is not None
    rows.append(
        _row(
            "choose_k 2..12 (120x384)",
            *_paired(ours_choose, lib_choose, repeats, 1),
            "scikit-learn",
            f"k ours {ca.k} vs {int(cb[1].max()) + 1}, ARI {adjusted_rand_score(ca.labels, cb[1]):.3f}, "
            f"silhouette {ca.silhouette:.4f} vs {cb[0]:.4f}",
        )
    )
    return rows


# -- 5. CLI tables ---------------------------------------------------------------------------
def bench_tables(repeats: int) -> list[dict]:
    from langmem_paging.ops.formatting import format_table

    try:
        from tabulate import tabulate
    except ImportError:
        return [_row("CLI table", 0.0, None, "tabulate", "missing")]
    rows = [
        {"thread_id": f"thread-{i}", "pages": i * 3, "clusters": i, "records": i * 11} for i in range(200)
    ]
    columns = ["thread_id", "pages", "clusters", "records"]

    def lib() -> str:
        return tabulate([[r[c] for c in columns] for r in rows], headers=columns, tablefmt="plain")

    ours_text, lib_text = format_table(rows, columns), lib()
    same = ours_text == lib_text
    return [
        _row(
            "CLI table (200 rows)",
            *_paired(lambda: format_table(rows, columns), lib, repeats, 50),
            "tabulate",
            "same text" if same else "different text",
            "tabulate right-aligns numeric headers; ours keeps the '-' cell, yes/no and width cuts",
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rows: list[dict] = []
    for bench in (bench_retries, bench_bootstrap, bench_chart, bench_kmeans, bench_tables):
        rows.extend(bench(args.repeats))
    imports = {
        m: _import_seconds(m)
        for m in ("tenacity", "scipy.stats", "matplotlib.pyplot", "sklearn.cluster", "tabulate")
        if importlib.util.find_spec(m.split(".")[0])
    }
    header = f"{'item':38} {'library':12} {'ours us':>10} {'lib us':>10} {'lib/ours':>8}  exact"
    print(header)
    print("-" * len(header))
    for r in rows:
        lib = "-" if r["library_us"] is None else f"{r['library_us']:.1f}"
        ratio = "-" if r["library_over_ours"] is None else f"{r['library_over_ours']:.2f}"
        print(f"{r['item']:38} {r['library']:12} {r['ours_us']:>10.1f} {lib:>10} {ratio:>8}  {r['exact']}")
    print(
        "\nfirst import in a fresh interpreter (s):",
        ", ".join(f"{m} {t:.3f}" for m, t in imports.items() if t is not None),
    )
    out = {"rows": rows, "import_seconds": imports}
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
