"""Result files -> tables and plots. Notebooks call these; they hold no logic of their own."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load_results(out: str | Path) -> tuple[dict, list[dict]]:
    """``(header, question_rows)`` from ``out/results.jsonl``."""
    lines = [json.loads(line) for line in (Path(out) / "results.jsonl").read_text().splitlines() if line.strip()]
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

BOOTSTRAP_NOTE = ("Intervals: 95% bootstrap over conversations (clustered: whole conversations are "
                  "resampled, since questions of one conversation share its paging history), 2000 "
                  "replicates; with few conversations they are wide and coarse.")


def strongest_baseline(rows: list[dict]) -> dict | None:
    """The retrieval baseline (`evals.methods.RETRIEVAL_BASELINES`) with the highest evidence
    coverage: overall (mean over budgets) and at each budget; None when none was run."""
    from evals.methods import RETRIEVAL_BASELINES

    cov = {(r["method"], r["budget"]): r["evidence_coverage"] for r in rows
           if r.get("method") in RETRIEVAL_BASELINES and r["evidence_coverage"] is not None}
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
        shares = ", ".join(f"B={r['budget']}: mean {r['bookmark_share']:.3f}, max {r['max_bookmark_share']:.3f}"
                           for r in mine)
        verdict = "within" if worst <= BOOKMARK_SHARE_TARGET else "NOT within"
        out.append(f"- {name}: bookmarks (page + cluster) as a share of B: {shares}; {verdict} the "
                   f"{BOOKMARK_SHARE_TARGET:.0%} target on every question")
    return out


def write_reports(out: str | Path, *, ablation: bool = False) -> dict:
    """Write summary.json, summary.md and PNG plots; return the summary."""
    from evals.metrics import CATEGORY_COLUMNS, aggregate, category_table, paired_comparisons

    out = Path(out)
    head, rows = load_results(out)
    keys = ["budget", "boundary", "policy", "protocol"] if ablation else ["method", "budget", "protocol"]
    table = aggregate(rows, keys)
    summary = {"header": head, "rows": [r for r in table if r["category"] == "all"], "by_category": table}
    summary["category_table"] = category_table(table, keys)
    arms = list(dict.fromkeys((r["boundary"], r["policy"]) if ablation else (r["method"],) for r in rows))
    if ablation:  # every cell against fixed_20/fifo (or the first cell run), and each policy against fifo
        reference = ("fixed_20", "fifo") if ("fixed_20", "fifo") in arms else arms[0]
        pairs = [(arm, reference) for arm in arms if arm != reference]
        pairs += [(arm, (arm[0], "fifo")) for arm in arms
                  if arm[1] != "fifo" and (arm[0], "fifo") in arms and (arm[0], "fifo") != reference]
    else:
        pairs = _method_pairs(arms)
        summary["strongest_baseline"] = strongest_baseline(summary["rows"])
    summary["comparisons"] = paired_comparisons(rows, ["boundary", "policy"] if ablation else ["method"], pairs)
    summary["bootstrap"] = "clustered by conversation (sample_id), 2000 replicates, percentile 95% interval"
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    cols = (["budget", "boundary", "policy", "evidence_coverage", "page_selection_top1", "page_selection_top3",
             "mean_bookmark_tokens", "bookmark_share", "max_bookmark_share", "mean_context_tokens",
             "over_budget_rate", "n_questions"] if ablation else
            ["method", "budget", "evidence_coverage", "mean_context_tokens", "mean_bookmark_tokens",
             "bookmark_share", "max_bookmark_share", "page_selection_top1", "page_selection_top3",
             "over_budget_rate", "n_questions"])
    if any("answer_f1" in r for r in table):
        cols += ["answer_f1", "judge_score", "recall_trigger_rate", "n_errors"]
    reader = head["reader"] if isinstance(head["reader"], str) else " ".join(
        f"{k}={v}" for k, v in head["reader"].items())
    md = [f"# {'Ablation' if ablation else 'Methods'} ({head['config']['dataset']}, protocol "
          f"{head['config']['protocol']}, reader {reader}, commit {str(head['git_commit'])[:10]}"
          f"{' dirty' if head['git_dirty'] else ''})", "", "## All categories but adversarial", "",
          markdown_table(summary["rows"], cols), ""]
    from evals.paging_method import reader_of

    md += _share_lines(summary["rows"], (lambda r: f"{r['boundary']}/{r['policy']}") if ablation
                       else (lambda r: r["method"] if reader_of(r["method"]) is not None else None))
    best = summary.get("strongest_baseline")
    if best:
        per = ", ".join(f"B={b}: {m}" for b, m in best["by_budget"].items())
        md += ["", f"**Strongest retrieval baseline: {best['overall']}** (highest evidence coverage averaged "
               f"over budgets, {best['mean_coverage']:.3f}; per budget: {per}). Paging is compared with it "
               "below, as with every other method."]
    md += ["", "## Evidence coverage per category", "",
           markdown_table(summary["category_table"], [*keys[:-1], *CATEGORY_COLUMNS, "all",
                                                      *(f"n_{c}" for c in CATEGORY_COLUMNS)]),
           "", "## Per category, all metrics", "", markdown_table(table, ["category", *cols])]
    title = ("Each cell minus fixed_20/fifo, each policy minus fifo" if ablation
             else "Each paging method minus each other method, and each paging reader minus paging[bookmarks]")
    comparisons = summary["comparisons"]
    if best:
        comparisons = sorted(comparisons, key=lambda c: (c["b"] != best["overall"], c["a"], c["b"], c["budget"]))
    md += ["", f"## {title} (evidence coverage, paired)", "", BOOTSTRAP_NOTE, "",
           markdown_table(comparisons, ["budget", "a", "b", "diff", "ci95", "n", "clusters"])]
    (out / "summary.md").write_text("\n".join(md) + "\n")
    try:
        plot(summary, out, ablation=ablation)
    except ImportError:
        print("plots skipped: matplotlib is missing (pip install -e '.[evals]')", file=sys.stderr)
    return summary


def plot(summary: dict, out: Path, *, ablation: bool) -> None:
    """coverage_vs_tokens.png (methods) or ablation_heatmap.png (boundary x policy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    if not ablation:
        colors = plt.get_cmap("tab20").colors  # more methods than the default cycle's 10 colours
        for k, method in enumerate(sorted({r["method"] for r in rows})):
            pts = sorted((r["mean_context_tokens"], r["evidence_coverage"]) for r in rows if r["method"] == method)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="os^D"[k % 4], label=method,
                    color=colors[(2 * k) % 20 + (k // 10) % 2])
        ax.set_xlabel("mean context tokens")
        ax.set_ylabel("evidence coverage")
        ax.set_xscale("log")
        ax.legend(fontsize=8)
        ax.set_title("Evidence coverage vs context tokens")
        name = "coverage_vs_tokens.png"
    else:
        budget = max(r["budget"] for r in rows)
        cells = [r for r in rows if r["budget"] == budget]
        boundaries = list(dict.fromkeys(r["boundary"] for r in cells))
        policies = list(dict.fromkeys(r["policy"] for r in cells))
        grid = [[next((r["evidence_coverage"] or 0.0 for r in cells if r["boundary"] == b and r["policy"] == p), 0.0)
                 for p in policies] for b in boundaries]
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(policies)), policies)
        ax.set_yticks(range(len(boundaries)), boundaries)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", color="w", fontsize=8)
        fig.colorbar(image, ax=ax, label="evidence coverage")
        ax.set_title(f"Paging ablation at budget {budget}")
        name = "ablation_heatmap.png"
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
