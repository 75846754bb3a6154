"""Result files -> tables and plots. Notebooks call these; they hold no logic of their own."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from langmem_paging.strategies.bookmarks import DEFAULT_BOOKMARKER


def load_results(out: str | Path) -> tuple[dict, list[dict]]:
    """``(header, question_rows)`` from ``out/results.jsonl``."""
    lines = [
        json.loads(line) for line in (Path(out) / "results.jsonl").read_text().splitlines() if line.strip()
    ]
    return lines[0], [r for r in lines[1:] if r.get("type") == "question"]


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    """A GitHub markdown table of `columns`."""

    def cell(v):
        return "" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


BOOKMARK_SHARE_TARGET = 0.2
"""Page and cluster bookmarks should take at most this share of B (the library's default
`bookmark_share`)."""

BOOTSTRAP_NOTE = (
    "Intervals: 95% bootstrap over conversations (clustered: whole conversations are "
    "resampled, since questions of one conversation share its paging history), 2000 "
    "replicates; with few conversations they are wide and coarse."
)


def strongest_baseline(rows: list[dict]) -> dict | None:
    """The retrieval baseline (`evals.methods.RETRIEVAL_BASELINES`) with the highest evidence
    coverage: overall (mean over budgets) and at each budget; None when none was run."""
    from evals.methods import RETRIEVAL_BASELINES

    cov = {
        (r["method"], r["budget"]): r["evidence_coverage"]
        for r in rows
        if r.get("method") in RETRIEVAL_BASELINES and r["evidence_coverage"] is not None
    }
    if not cov:
        return None
    budgets = sorted({b for _, b in cov})
    methods = [m for m in RETRIEVAL_BASELINES if all((m, b) in cov for b in budgets)]
    if not methods:
        return None
    mean = {m: sum(cov[(m, b)] for b in budgets) / len(budgets) for m in methods}
    by_budget = {str(b): max(methods, key=lambda m: (cov[(m, b)], -methods.index(m))) for b in budgets}
    overall = max(methods, key=lambda m: (mean[m], -methods.index(m)))
    return {"overall": overall, "mean_coverage": round(mean[overall], 4), "by_budget": by_budget}


def _method_pairs(arms: list[tuple]) -> list[tuple[tuple, tuple]]:
    """Each paging method against every other method, and each paging reader against
    ``paging[bookmarks]``."""
    from evals.paging_method import method_name, reader_of

    paging = [a for a in arms if reader_of(a[0]) is not None]
    others = [a for a in arms if reader_of(a[0]) is None]
    pairs = [(p, o) for p in paging for o in others]
    base = (method_name("bookmarks"),)
    pairs += [(p, base) for p in paging if p != base and base in paging]
    return pairs


def _share_lines(rows: list[dict], label) -> list[str]:
    """One line per paging arm (`label(row)`, None for rows that are not paging): bookmark
    tokens as a share of B at each budget, against `BOOKMARK_SHARE_TARGET`."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if label(r) is not None and r["bookmark_share"] is not None:
            groups.setdefault(label(r), []).append(r)
    out = []
    for name, mine in groups.items():
        worst = max(r["max_bookmark_share"] for r in mine)
        shares = ", ".join(
            f"B={r['budget']}: mean {r['bookmark_share']:.3f}, max {r['max_bookmark_share']:.3f}"
            for r in mine
        )
        verdict = "within" if worst <= BOOKMARK_SHARE_TARGET else "NOT within"
        out.append(
            f"- {name}: bookmarks (page + cluster) as a share of B: {shares}; {verdict} the "
            f"{BOOKMARK_SHARE_TARGET:.0%} target on every question"
        )
    return out


ABLATION_COLUMNS = [
    "budget",
    "boundary",
    "policy",
    "evidence_coverage",
    "page_selection_top1",
    "page_selection_top3",
    "mean_bookmark_tokens",
    "bookmark_share",
    "max_bookmark_share",
    "mean_context_tokens",
    "over_budget_rate",
    "n_questions",
]
"""summary.md's columns for an ablation (boundary x policy)."""

METHOD_COLUMNS = [
    "method",
    "budget",
    "evidence_coverage",
    "mean_context_tokens",
    "mean_bookmark_tokens",
    "bookmark_share",
    "max_bookmark_share",
    "page_selection_top1",
    "page_selection_top3",
    "over_budget_rate",
    "n_questions",
]
"""summary.md's columns for a comparison of methods."""

ANSWER_COLUMNS = ["answer_f1", "judge_score", "recall_trigger_rate", "n_errors"]
"""summary.md's columns added when the llm reader answered."""


def write_reports(out: str | Path, *, ablation: bool = False) -> dict:
    """Write summary.json, summary.md and PNG plots; return the summary."""
    out = Path(out)
    head, rows = load_results(out)
    keys = ["budget", "boundary", "policy", "protocol"] if ablation else ["method", "budget", "protocol"]
    summary = _summary(head, rows, keys, ablation)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text("\n".join(_summary_markdown(summary, keys, ablation)) + "\n")
    try:
        plot(summary, out, ablation=ablation)
    except ImportError:
        print("plots skipped: matplotlib is missing (pip install -e '.[evals]')", file=sys.stderr)
    return summary


def _summary(head: dict, rows: list[dict], keys: list[str], ablation: bool) -> dict:
    """summary.json: the rows by `keys` (all categories but adversarial, and by category), the
    strongest baseline (methods only) and the paired comparisons."""
    from evals.metrics import aggregate, category_table, paired_comparisons

    table = aggregate(rows, keys)
    summary = {"header": head, "rows": [r for r in table if r["category"] == "all"], "by_category": table}
    summary["category_table"] = category_table(table, keys)
    arms = list(dict.fromkeys((r["boundary"], r["policy"]) if ablation else (r["method"],) for r in rows))
    if ablation:
        pairs = _ablation_pairs(arms)
    else:
        pairs = _method_pairs(arms)
        summary["strongest_baseline"] = strongest_baseline(summary["rows"])
    summary["comparisons"] = paired_comparisons(
        rows, ["boundary", "policy"] if ablation else ["method"], pairs
    )
    summary["bootstrap"] = "clustered by conversation (sample_id), 2000 replicates, percentile 95% interval"
    return summary


def _ablation_pairs(arms: list[tuple]) -> list[tuple[tuple, tuple]]:
    """Every cell against fixed_20/fifo (or the first cell run), and each policy against fifo."""
    reference = ("fixed_20", "fifo") if ("fixed_20", "fifo") in arms else arms[0]
    pairs = [(arm, reference) for arm in arms if arm != reference]
    pairs += [
        (arm, (arm[0], "fifo"))
        for arm in arms
        if arm[1] != "fifo" and (arm[0], "fifo") in arms and (arm[0], "fifo") != reference
    ]
    return pairs


def _summary_markdown(summary: dict, keys: list[str], ablation: bool) -> list[str]:
    """summary.md's lines: the table over categories 1-4, bookmark shares, the strongest baseline,
    the per-category tables, the paired comparisons."""
    from evals.metrics import CATEGORY_COLUMNS

    table = summary["by_category"]
    cols = [*(ABLATION_COLUMNS if ablation else METHOD_COLUMNS)]
    if any("answer_f1" in r for r in table):
        cols += ANSWER_COLUMNS
    best = summary.get("strongest_baseline")
    md = [
        _title(summary["header"], ablation),
        "",
        "## All categories but adversarial",
        "",
        markdown_table(summary["rows"], cols),
        "",
    ]
    md += _share_lines(summary["rows"], _share_label(ablation))
    md += _baseline_lines(best)
    md += [
        "",
        "## Evidence coverage per category",
        "",
        markdown_table(
            summary["category_table"],
            [*keys[:-1], *CATEGORY_COLUMNS, "all", *(f"n_{c}" for c in CATEGORY_COLUMNS)],
        ),
        "",
        "## Per category, all metrics",
        "",
        markdown_table(table, ["category", *cols]),
    ]
    return md + _comparison_lines(summary["comparisons"], best, ablation)


def _title(head: dict, ablation: bool) -> str:
    """summary.md's title: what was run, on what, with which reader, by which commit."""
    reader = (
        head["reader"]
        if isinstance(head["reader"], str)
        else " ".join(f"{k}={v}" for k, v in head["reader"].items())
    )
    return (
        f"# {'Ablation' if ablation else 'Methods'} ({head['config']['dataset']}, protocol "
        f"{head['config']['protocol']}, reader {reader}, commit {str(head['git_commit'])[:10]}"
        f"{' dirty' if head['git_dirty'] else ''})"
    )


def _share_label(ablation: bool):
    """`_share_lines`' label of a row: its cell in an ablation, its method when it is paging."""
    from evals.paging_method import reader_of

    if ablation:
        return lambda r: f"{r['boundary']}/{r['policy']}"
    return lambda r: r["method"] if reader_of(r["method"]) is not None else None


def _baseline_lines(best: dict | None) -> list[str]:
    """The strongest retrieval baseline (`strongest_baseline`) in a sentence; none without one."""
    if not best:
        return []
    per = ", ".join(f"B={b}: {m}" for b, m in best["by_budget"].items())
    return [
        "",
        f"**Strongest retrieval baseline: {best['overall']}** (highest evidence coverage averaged "
        f"over budgets, {best['mean_coverage']:.3f}; per budget: {per}). Paging is compared with it "
        "below, as with every other method.",
    ]


def _comparison_lines(comparisons: list[dict], best: dict | None, ablation: bool) -> list[str]:
    """The paired comparisons' section, those against the strongest baseline first."""
    title = (
        "Each cell minus fixed_20/fifo, each policy minus fifo"
        if ablation
        else "Each paging method minus each other method, and each paging reader minus paging[bookmarks]"
    )
    if best:
        comparisons = sorted(
            comparisons, key=lambda c: (c["b"] != best["overall"], c["a"], c["b"], c["budget"])
        )
    return [
        "",
        f"## {title} (evidence coverage, paired)",
        "",
        BOOTSTRAP_NOTE,
        "",
        markdown_table(comparisons, ["budget", "a", "b", "diff", "ci95", "n", "clusters"]),
    ]


MARKERS = "osD^vPX<>*"
"""One marker shape per line (then the cycle repeats with hollow markers)."""


def line_style(k: int) -> dict:
    """Matplotlib keywords for the `k`-th line of a plot: its own colour, marker shape, size and line
    style; every other line has hollow markers drawn above the others' translucent filled ones, so
    points that fall on one another all show."""
    import matplotlib.pyplot as plt

    colors = plt.get_cmap("tab20").colors  # more lines than the default cycle's 10 colours
    color = colors[(2 * k) % 20 + (k // 10) % 2]
    hollow = k % 2 == 1
    return {
        "marker": MARKERS[k % len(MARKERS)],
        "color": color,
        "alpha": 0.95 if hollow else 0.55,
        "markersize": 10 - 2 * (k % 3),
        "markerfacecolor": "none" if hollow else color,
        "markeredgewidth": 2.0 if hollow else 1.0,
        "linestyle": ("-", "--", ":", "-.")[k % 4],
        "zorder": 3 if hollow else 2,
    }


def token_ticks(low: float, high: float, *, most: int = 8) -> list[int]:
    """Ticks for a log axis of tokens from `low` to `high`: 1-2-5 (or 1-3, or powers of ten) times a
    power of ten, at most `most`; a range too short for two of those gets evenly spaced round
    numbers instead, so it is labelled too.

    Example:
        >>> token_ticks(300, 480), token_ticks(50, 2000), token_ticks(20, 300_000)
        ([300, 400, 500], [50, 100, 200, 500, 1000, 2000], [100, 1000, 10000, 100000])
    """
    lo_exp, hi_exp = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for mantissas in ((1, 2, 5), (1, 3), (1,)):
        ticks = [m * 10**e for e in range(lo_exp, hi_exp + 1) for m in mantissas]
        inside = [t for t in ticks if low / 1.25 <= t <= high * 1.25]
        if 2 <= len(inside) <= most:
            return inside
        if len(inside) < 2:
            break
    step = 10 ** math.floor(math.log10(max(high - low, 1)))
    first = max(step, math.floor(low / step) * step)
    ticks = list(range(int(first), int(high + step), int(step)))
    return ticks[:: math.ceil(len(ticks) / most)]


def set_token_axis(ax, values: list[float]) -> None:
    """A log x axis of tokens labelled with plain numbers (``2,000``) at `token_ticks`, no minor labels
    (matplotlib's default writes ``3x10^2`` under each minor tick of a short range, and they collide)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    low, high = min(values), max(values)
    ticks = token_ticks(low, high)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(low, ticks[0]) / 1.15, max(high, ticks[-1]) * 1.15)


def coverage_figure(rows: list[dict]):
    """Evidence coverage against mean context tokens (log), one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.4))
    for k, method in enumerate(sorted({r["method"] for r in rows})):
        pts = sorted(
            (r["mean_context_tokens"], r["evidence_coverage"]) for r in rows if r["method"] == method
        )
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=method, **line_style(k))
    set_token_axis(ax, [r["mean_context_tokens"] for r in rows if r["mean_context_tokens"]])
    ax.set_xlabel("mean context tokens (log scale)")
    ax.set_ylabel("evidence coverage")
    ax.set_ylim(-0.04, 1.04)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Evidence coverage vs context tokens")
    fig.tight_layout()
    return fig


def heatmap_figure(rows: list[dict], *, budget: int | None = None, metric: str = "evidence_coverage"):
    """Boundary x policy heatmaps of `metric`, one panel per budget (or only `budget`), on one colour
    scale so that panels compare."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = sorted({r["budget"] for r in rows}) if budget is None else [budget]
    boundaries = list(dict.fromkeys(r["boundary"] for r in rows))
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    grids = [[[_cell(rows, metric, b, bd, p) for p in policies] for bd in boundaries] for b in budgets]
    values = [v for grid in grids for row in grid for v in row]
    low, high = min(values), max(values)
    fig, axes = plt.subplots(
        1, len(budgets), figsize=(1.2 + 1.3 * len(policies) * len(budgets), 4.2), squeeze=False
    )
    for ax, b, grid in zip(axes[0], budgets, grids, strict=True):
        image = ax.imshow(grid, cmap="viridis", aspect="auto", vmin=low, vmax=high)
        ax.set_xticks(range(len(policies)), policies, rotation=30, ha="right")
        ax.set_yticks(range(len(boundaries)), boundaries if ax is axes[0][0] else [])
        _annotate(ax, grid, low, high)
        ax.set_title(f"B = {b}")
    fig.colorbar(image, ax=list(axes[0]), label=metric.replace("_", " "))
    fig.suptitle("Paging ablation: boundary x policy")
    return fig


def _cell(rows: list[dict], metric: str, budget: int, boundary: str, policy: str) -> float:
    """`metric` of the first row of (`budget`, `boundary`, `policy`); 0.0 when it is None or no row is."""
    return next(
        (
            r[metric] or 0.0
            for r in rows
            if r["budget"] == budget and r["boundary"] == boundary and r["policy"] == policy
        ),
        0.0,
    )


def _annotate(ax, grid: list[list[float]], low: float, high: float) -> None:
    """Each heatmap cell's value written on it: dark text on viridis' bright end, white on its dark end."""
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            bright = high > low and (v - low) / (high - low) > 0.6
            ax.text(
                j, i, f"{v:.3f}", ha="center", va="center", color="#1d2330" if bright else "w", fontsize=8
            )


def plot(summary: dict, out: Path, *, ablation: bool) -> None:
    """coverage_vs_tokens.png (methods) or ablation_heatmap.png (boundary x policy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    if not ablation:
        fig = coverage_figure(rows)
        fig.savefig(out / "coverage_vs_tokens.png", dpi=110)
        plt.close(fig)
        return
    fig = heatmap_figure(rows)
    fig.savefig(out / "ablation_heatmap.png", dpi=110)
    plt.close(fig)


# -- the cooperative-paging study's ablation findings, against ours ------------------------------

STUDY = {
    "fixed_20": 0.967,
    "topic_shift": 0.567,
    "strategy_gains": (0.044, 0.087),
    "specificity": 0.25,
}
"""The study's numbers: fixed_20 pages reach 96.7% and topic_shift 56.7% (synthetic); two bookmark
strategies add +4.4 and +8.7 points over the heuristic; keyword specificity alone is worth 25
points. (Its policy findings, FIFO best on synthetic and LFU on LoCoMo, are orderings.)"""


def _by_arm(rows: list[dict], metric: str, budget: int) -> dict[tuple, dict[tuple, float]]:
    """``{(boundary, policy): {(sample_id, question_index): value}}`` at `budget`, categories 1-4."""
    out: dict[tuple, dict[tuple, float]] = {}
    for r in rows:
        if r["budget"] == budget and r["category"] != 5 and r.get(metric) is not None:
            out.setdefault((r["boundary"], r["policy"]), {})[(r["sample_id"], r["question_index"])] = r[
                metric
            ]
    return out


def _paged_out(rows: list[dict], budget: int, arms: Sequence[tuple]) -> tuple[int, int]:
    """``(paged, asked)``: of the questions (categories 1-4, with evidence) asked at `budget` in any
    of `arms` (``(boundary, policy)``), how many had evidence paged out in at least one of them: where
    none had, no arm can differ from another, and an interval of width 0 says so, not that two
    strategies are equal."""
    asked: dict[tuple, bool] = {}
    for r in rows:
        arm = (r["boundary"], r["policy"])
        if r["budget"] == budget and r["category"] != 5 and r.get("evidence") and arm in arms:
            key = (r["sample_id"], r["question_index"])
            asked[key] = asked.get(key, False) or r.get("page_selection_top1") is not None
    return sum(asked.values()), len(asked)


def _finding(finding: str, study, diff: dict, verdict: str, paged: tuple[int, int], note: str = "") -> dict:
    """A findings row; with no evidence paged out in the arms compared, nothing was measured."""
    return {
        "finding": finding,
        "study": study,
        "ours": diff["diff"],
        "ci95": diff["ci95"],
        "verdict": verdict if paged[0] else "not measurable: no evidence was paged out at this budget",
        "note": f"{note}; " * bool(note) + f"questions with evidence paged out: {paged[0]}/{paged[1]}",
    }


def _paired(arms: dict, a: tuple, b: tuple) -> dict:
    """`a` minus `b` over the questions both have, clustered bootstrap (`paired_bootstrap`)."""
    from evals.metrics import paired_bootstrap

    shared = sorted(set(arms.get(a, {})) & set(arms.get(b, {})))
    return paired_bootstrap(
        [arms[a][k] for k in shared], [arms[b][k] for k in shared], clusters=[k[0] for k in shared]
    )


def _verdict(diff: dict, sign: int, study: float | None = None) -> str:
    """Whether a paired difference goes the study's way (`sign`): its whole interval (and, given the
    study's own difference, whether the interval holds it too), its point estimate only, or not at all."""
    if diff.get("diff") is None:
        return "not measured"
    low, high = diff["ci95"]
    if low == high == 0:
        return "does not reproduce: no question scored differently"
    if low > 0 if sign > 0 else high < 0:
        if study is not None and not low <= study <= high:
            return "direction reproduces, size does not (the study's value is outside the interval)"
        return "reproduces"
    if diff["diff"] * sign > 0:
        return "direction only (interval includes 0)"
    return "does not reproduce"


def _mean(values) -> float | None:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else None


def _pooled(arms: dict, boundaries: list, policy: str) -> dict[tuple, float]:
    """`policy`'s values over every boundary, keyed ``(boundary, sample_id, question_index)``."""
    return {(b, *k): v for b in boundaries for k, v in arms.get((b, policy), {}).items()}


def _best_policy(arms: dict, policies: list[str], claimed: str) -> dict:
    """The policy with the highest coverage averaged over boundaries, the policies level with it, and
    the claimed policy minus the best other one (paired over every boundary's questions)."""
    from evals.metrics import paired_bootstrap

    boundaries = sorted({b for b, _ in arms})
    means = {p: _mean(_pooled(arms, boundaries, p).values()) for p in policies}
    ranked = sorted((p for p in policies if means[p] is not None), key=lambda p: -(means[p] or 0.0))
    rival = next(p for p in ranked if p != claimed)
    mine, theirs = _pooled(arms, boundaries, claimed), _pooled(arms, boundaries, rival)
    shared = sorted(set(mine) & set(theirs))
    diff = paired_bootstrap(
        [mine[k] for k in shared], [theirs[k] for k in shared], clusters=[k[1] for k in shared]
    )
    level = [p for p in ranked if means[p] == means[ranked[0]]]
    return {"means": means, "best": ranked[0], "level": level, "rival": rival, "diff": diff}


def _policy_verdict(best: dict, claimed: str) -> str:
    """Whether the claimed policy is the best one (`_best_policy`): its lead's interval above 0, or
    level with others, or beaten."""
    low, high = best["diff"]["ci95"]
    if claimed in best["level"] and len(best["level"]) > 1:
        how = "on every question" if low == high == 0 else "on average"
        return f"not shown: {', '.join(best['level'])} level {how}"
    if best["best"] == claimed:
        return "reproduces" if low > 0 else f"not shown: {claimed} is highest, but the interval includes 0"
    if low <= 0 <= high:
        return f"does not reproduce: {best['best']} is highest ({claimed}'s deficit's interval includes 0)"
    return f"does not reproduce: {best['best']} is higher"


def _findings_at(budget: int, runs: dict[str, list[dict]]) -> list[dict]:
    """`study_findings` at one budget; `runs`: question rows by run name (see `study_findings`)."""
    out = _level_findings(budget, runs["synthetic"])
    out += _boundary_findings(budget, runs)
    out += _policy_findings(budget, runs)
    out += _strategy_findings(budget, runs["bookmarks"])
    out += _specificity_findings(budget, runs)
    return [{"budget": budget, **row} for row in out]


def _level_findings(budget: int, syn: list[dict]) -> list[dict]:
    """fixed_20/fifo's evidence coverage on synthetic probes against the study's level."""
    cov = _by_arm(syn, "evidence_coverage", budget)
    ours = _mean(cov.get(("fixed_20", "fifo"), {}).values()) or 0.0
    gap = abs(ours - STUDY["fixed_20"])
    return [
        _finding(
            "fixed_20 pages reach 96.7% (synthetic)",
            STUDY["fixed_20"],
            {"diff": ours, "ci95": None},
            "reproduces"
            if gap <= 0.03
            else f"{'lower' if ours < STUDY['fixed_20'] else 'higher'} here by {gap:.3f}",
            _paged_out(syn, budget, [("fixed_20", "fifo")]),
        )
    ]


def _boundary_findings(budget: int, runs: dict[str, list[dict]]) -> list[dict]:
    """topic_shift minus fixed_20 (both fifo) on synthetic probes and, when run, on LoCoMo."""
    study_drop = round(STUDY["topic_shift"] - STUDY["fixed_20"], 3)
    out = []
    for name, rows in [("synthetic", runs["synthetic"])] + (
        [("LoCoMo", runs["locomo"])] if "locomo" in runs else []
    ):
        cov = _by_arm(rows, "evidence_coverage", budget)
        arms = [("topic_shift", "fifo"), ("fixed_20", "fifo")]
        drop = _paired(cov, *arms)
        out.append(
            _finding(
                f"topic_shift collapses to 56.7% (synthetic): topic_shift - fixed_20, {name}",
                study_drop,
                drop,
                _verdict(drop, -1, study_drop),
                _paged_out(rows, budget, arms),
                f"topic_shift/fifo {_mean(cov.get(arms[0], {}).values())}",
            )
        )
    return out


def _policy_findings(budget: int, runs: dict[str, list[dict]]) -> list[dict]:
    """The claimed best policy minus the best other one, per dataset and protocol."""
    policies = ["fifo", "lru", "lfu", "semantic"]
    grids = [("synthetic", "streaming", runs["synthetic_policies"], "fifo")]
    grids += [("LoCoMo", "streaming", runs["locomo_policies"], "lfu")]
    # asked only at the end nothing is recalled first, so FIFO, LRU and LFU should evict alike: measured
    grids += [("synthetic", "end", runs["synthetic"], "fifo")]
    grids += [("LoCoMo", "end", runs["locomo"], "lfu")] if "locomo" in runs else []
    out = []
    for name, protocol, rows, claimed in grids:
        arms = _by_arm(rows, "evidence_coverage", budget)
        best = _best_policy(arms, policies, claimed)
        out.append(
            _finding(
                f"{claimed.upper()} is the best policy on {name} ({protocol}): {claimed} - best other",
                None,
                best["diff"],
                _policy_verdict(best, claimed),
                _paged_out(rows, budget, list(arms)),
                f"best other: {best['rival']}; mean coverage over boundaries: "
                + ", ".join(f"{p} {m}" for p, m in best["means"].items()),
            )
        )
    return out


def _strategy_findings(budget: int, bm: list[dict]) -> list[dict]:
    """Each bookmark strategy minus the frequent-words heuristic on LoCoMo, by coverage and top-1."""
    base = next(r["policy"] for r in bm if "+" not in r["policy"])
    heuristic = ("fixed_20", f"{base}+bookmarks:frequent")
    out = []
    for metric in ("evidence_coverage", "page_selection_top1"):
        arms = _by_arm(bm, metric, budget)
        for strategy, study in (
            ((base, f"{DEFAULT_BOOKMARKER} (default)"), STUDY["strategy_gains"][0]),
            ((f"{base}+bookmarks:discriminative", "discriminative"), STUDY["strategy_gains"][1]),
        ):
            diff = _paired(arms, ("fixed_20", strategy[0]), heuristic)
            claim = study if metric == "evidence_coverage" else None
            out.append(
                _finding(
                    f"bookmark strategy {strategy[1]} - heuristic (frequent words), {metric}",
                    claim,
                    diff,
                    _verdict(diff, 1, claim),
                    _paged_out(bm, budget, [("fixed_20", strategy[0]), heuristic]),
                )
            )
        # the default's form against the comma form, same words (the library's claim, not the study's)
        forms = [("fixed_20", base), ("fixed_20", f"{base}+bookmarks:keywords")]
        diff = _paired(arms, *forms)
        out.append(
            _finding(
                f"{DEFAULT_BOOKMARKER} bookmarks (default) beat the comma form: {DEFAULT_BOOKMARKER} - keywords, {metric}",
                None,
                diff,
                _verdict(diff, 1),
                _paged_out(bm, budget, forms),
            )
        )
    return out


def _specificity_findings(budget: int, runs: dict[str, list[dict]]) -> list[dict]:
    """The default bookmark minus the heuristic (thread IDF on minus off) on LoCoMo and, when run,
    on synthetic probes."""
    pairs = [("LoCoMo", runs["bookmarks"])] + (
        [("synthetic", runs["synthetic_bookmarks"])] if "synthetic_bookmarks" in runs else []
    )
    out = []
    for name, rows in pairs:
        own = next(r["policy"] for r in rows if "+" not in r["policy"])
        compared = [("fixed_20", own), ("fixed_20", f"{own}+bookmarks:frequent")]
        for metric in ("page_selection_top1", "evidence_coverage"):
            diff = _paired(_by_arm(rows, metric, budget), *compared)
            out.append(
                _finding(
                    f"keyword specificity alone (thread IDF on - off), {name}, {metric}",
                    STUDY["specificity"],
                    diff,
                    _verdict(diff, 1, STUDY["specificity"]),
                    _paged_out(rows, budget, compared),
                )
            )
    return out


def study_findings(
    synthetic: str | Path,
    bookmarks: str | Path,
    *,
    synthetic_policies: str | Path,
    locomo_policies: str | Path,
    budgets: Sequence[int],
    synthetic_bookmarks: str | Path | None = None,
    locomo: str | Path | None = None,
) -> list[dict]:
    """Each of the study's ablation findings beside ours at each of `budgets` (one row per finding
    and budget, each with its ``budget``), from the ablation runs' result files: the boundary x
    policy grid on synthetic probes (`synthetic`) and on LoCoMo (`locomo`, optional), the bookmark
    strategies on LoCoMo (`bookmarks`: ``POLICY``, ``POLICY+bookmarks:discriminative``,
    ``POLICY+bookmarks:frequent`` at fixed_20), and the policies on synthetic probes and on LoCoMo
    under the streaming protocol (`synthetic_policies`, `locomo_policies`: questions asked as the
    conversation goes and kept, so recalls give LRU and LFU their statistics; asked only at the end,
    nothing is recalled before a question and FIFO, LRU and LFU should evict alike, which the end
    grids' policy rows measure). Differences are paired over questions with a 95% bootstrap interval
    over conversations; a verdict says whether the interval goes the study's way; a note counts the
    questions whose evidence was paged out at all (none: nothing to measure at that budget).
    `synthetic_bookmarks`: the bookmark strategies on synthetic probes too (for keyword specificity
    there)."""
    paths = {
        "synthetic": synthetic,
        "bookmarks": bookmarks,
        "synthetic_policies": synthetic_policies,
        "locomo_policies": locomo_policies,
        "synthetic_bookmarks": synthetic_bookmarks,
        "locomo": locomo,
    }
    runs = {name: load_results(path)[1] for name, path in paths.items() if path is not None}
    return [row for budget in budgets for row in _findings_at(budget, runs)]


FINDING_COLUMNS = ["finding", "budget", "study", "ours", "ci95", "verdict", "note"]
"""findings.md's columns (and the notebook's)."""


def findings_table(rows: list[dict]) -> str:
    """`study_findings` rows as markdown, each finding's budgets together."""
    order = list(dict.fromkeys(r["finding"] for r in rows))
    return markdown_table(
        sorted(rows, key=lambda r: (order.index(r["finding"]), r["budget"])), FINDING_COLUMNS
    )


SHORT_VERDICTS = (
    ("reproduces", "yes"),
    ("direction reproduces", "direction, not size"),
    ("direction only", "direction only"),
    ("not measurable", "nothing paged out"),
    ("does not reproduce", "no"),
)
"""`study_findings` verdicts by prefix, as the one-line table says them."""


def _short(verdict: str) -> str:
    """A verdict in a few words (`findings_by_budget`), keeping which policy won or tied."""
    import re

    if verdict.startswith(("lower here", "higher here")):
        return verdict.replace(" here", "")
    if m := re.fullmatch(r"not shown: (.*) level on (every question|average)", verdict):
        return f"no: {m.group(1).replace(', ', ' = ')}" + (" on every question" if "every" in verdict else "")
    if m := re.fullmatch(r"not shown: (\w+) is highest, but the interval includes 0", verdict):
        return "direction only"
    if m := re.fullmatch(r"does not reproduce: (\S+) is (highest|higher)( \(.*includes 0\))?", verdict):
        return f"no: {m.group(1)} {m.group(2)}" + (", interval includes 0" if m.group(3) else "")
    return next((short for prefix, short in SHORT_VERDICTS if verdict.startswith(prefix)), verdict)


def findings_by_budget(rows: list[dict]) -> str:
    """`study_findings` rows as one line per finding: the study's value, then ours at each budget
    (a level, or a difference with its 95% interval) and the verdict in a word or two."""
    budgets = sorted({r["budget"] for r in rows})
    lines = []
    for finding in dict.fromkeys(r["finding"] for r in rows):
        mine = {r["budget"]: r for r in rows if r["finding"] == finding}
        first = next(iter(mine.values()))
        line = {"finding": finding, "study": first["study"]}
        for b, r in mine.items():
            if r["ours"] is None:
                cell = "not measured"
            elif r["ci95"] is None:
                cell = f"{r['ours']:.3f}"
            else:
                cell = f"{r['ours']:+.3f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}]"
            line[f"B={b}"] = f"{cell}: {_short(r['verdict'])}"
        lines.append(line)
    return markdown_table(lines, ["finding", "study", *(f"B={b}" for b in budgets)])


def write_findings(
    out: str | Path, rows: list[dict], *, budgets: Sequence[int], extra: dict | None = None
) -> list[dict]:
    """`study_findings`' `rows` as ``out/findings.json`` (``{"budgets", "findings", **extra}``) and
    ``out/findings.md``: a line per finding with a column per budget (`findings_by_budget`), then
    every row with its budget, verdict and note (`findings_table`); returns `rows`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"budgets": list(budgets), "findings": rows, **(extra or {})}
    (out / "findings.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "findings.md").write_text(
        "# The cooperative-paging study's ablation findings against ours\n\n"
        + findings_by_budget(rows)
        + "\n\n"
        + BOOTSTRAP_NOTE
        + " A note counts the questions whose evidence was paged out in the arms compared.\n\n"
        + findings_table(rows)
        + "\n"
    )
    return rows
