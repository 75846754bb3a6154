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


def write_reports(out: str | Path, *, ablation: bool = False) -> dict:
    """Write summary.json, summary.md and PNG plots; return the summary."""
    from evals.metrics import aggregate, paired_comparisons

    out = Path(out)
    head, rows = load_results(out)
    keys = ["budget", "boundary", "policy", "protocol"] if ablation else ["method", "budget", "protocol"]
    table = aggregate(rows, keys)
    summary = {"header": head, "rows": [r for r in table if r["category"] == "all"], "by_category": table}
    arms = list(dict.fromkeys((r["boundary"], r["policy"]) if ablation else (r["method"],) for r in rows))
    if ablation:  # every cell against fixed_20/fifo (or the first cell run), and each policy against fifo
        reference = ("fixed_20", "fifo") if ("fixed_20", "fifo") in arms else arms[0]
        pairs = [(arm, reference) for arm in arms if arm != reference]
        pairs += [(arm, (arm[0], "fifo")) for arm in arms
                  if arm[1] != "fifo" and (arm[0], "fifo") in arms and (arm[0], "fifo") != reference]
    else:  # paging against every other method
        pairs = [(("paging",), arm) for arm in arms if arm != ("paging",)]
    summary["comparisons"] = paired_comparisons(rows, ["boundary", "policy"] if ablation else ["method"], pairs)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    cols = (["budget", "boundary", "policy", "evidence_coverage", "page_selection_top1", "page_selection_top3",
             "mean_bookmark_tokens", "mean_context_tokens", "over_budget_rate", "n_questions"] if ablation else
            ["method", "budget", "evidence_coverage", "mean_context_tokens", "mean_bookmark_tokens",
             "page_selection_top1", "page_selection_top3", "over_budget_rate", "n_questions"])
    if any("answer_f1" in r for r in table):
        cols += ["answer_f1", "judge_score", "recall_trigger_rate", "n_errors"]
    reader = head["reader"] if isinstance(head["reader"], str) else " ".join(
        f"{k}={v}" for k, v in head["reader"].items())
    md = [f"# {'Ablation' if ablation else 'Methods'} ({head['config']['dataset']}, protocol "
          f"{head['config']['protocol']}, reader {reader}, commit {str(head['git_commit'])[:10]}"
          f"{' dirty' if head['git_dirty'] else ''})", "", "## All categories but adversarial", "",
          markdown_table(summary["rows"], cols), "", "## Per category", "",
          markdown_table(table, ["category", *cols])]
    md += ["", f"## {'Each cell minus fixed_20/fifo, each policy minus fifo' if ablation else 'Paging minus other methods'} "
           "(evidence coverage, paired bootstrap 95% CI)", "",
           markdown_table(summary["comparisons"], ["budget", "a", "b", "diff", "ci95", "n"])]
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
        for method in sorted({r["method"] for r in rows}):
            pts = sorted((r["mean_context_tokens"], r["evidence_coverage"]) for r in rows if r["method"] == method)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=method)
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
