"""Per-question metrics and their aggregation (per method, budget and category, plus "all")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from evals.datasets.records import CATEGORIES


def evidence_coverage(evidence: Sequence[str], present: set[str]) -> float | None:
    """1.0 if every evidence turn is in the context, else 0.0; None without evidence."""
    return None if not evidence else float(all(e in present for e in evidence))


def page_selection(
    evidence: Sequence[str], resident: set[str], ranked_pages: Sequence[Sequence[str]], k: int
):
    """Did the reader's top-k pages hold every evidence turn that had been evicted?
    None when no evidence turn was evicted (nothing to select)."""
    evicted = [e for e in evidence if e not in resident]
    if not evicted:
        return None
    top = {mid for page in ranked_pages[:k] for mid in page}
    return float(all(e in top for e in evicted))


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(float(np.mean(vals)), 4) if vals else None


def _order(group: tuple) -> tuple:
    """Sort key: numbers (budgets) numerically, before any text; text alphabetically."""
    return tuple((0, x, "") if isinstance(x, (int, float)) else (1, 0, str(x)) for x in group)


def _max(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(float(max(vals)), 4) if vals else None


CATEGORY_COLUMNS = tuple(CATEGORIES[k] for k in (4, 1, 2, 3))
"""The evidence-grounded categories, in the order tables show them (adversarial is apart)."""


def category_table(
    by_category: list[dict], keys: Sequence[str], metric: str = "evidence_coverage"
) -> list[dict]:
    """One row per group of `keys`: `metric` per category (columns named by `CATEGORY_COLUMNS`,
    plus "all"), with each category's question count as ``n_<category>``."""
    table: dict[tuple, dict] = {}
    for row in by_category:
        group = tuple(row[k] for k in keys)
        out = table.setdefault(group, dict(zip(keys, group, strict=True)))
        if row["category"] in (*CATEGORY_COLUMNS, "all"):
            out[row["category"]] = row[metric]
            out[f"n_{row['category']}"] = row["n_questions"]
    return list(table.values())


def aggregate(rows: list[dict], keys: Sequence[str]) -> list[dict]:
    """One summary row per group of `keys` and category, plus an "all" row over categories 1-4
    (adversarial questions, category 5, have no evidence-grounded answer: reported apart)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        base = tuple(row[k] for k in keys)
        groups[(*base, CATEGORIES.get(row["category"], str(row["category"])))].append(row)
        if row["category"] != 5:
            groups[(*base, "all")].append(row)
    return [
        {**dict(zip([*keys, "category"], group, strict=True)), **_group_metrics(members)}
        for group, members in sorted(groups.items(), key=lambda kv: _order(kv[0]))
    ]


def _group_metrics(members: list[dict]) -> dict:
    """`aggregate`'s metrics of one group's question rows."""
    return {
        "n_questions": len(members),
        "evidence_coverage": _mean(r["evidence_coverage"] for r in members),
        "mean_context_tokens": _mean(r["context_tokens"] for r in members),
        "mean_bookmark_tokens": _mean(r["bookmark_tokens"] for r in members),
        "bookmark_share": _mean(r["bookmark_tokens"] / r["budget"] for r in members),
        "max_bookmark_share": _max(r["bookmark_tokens"] / r["budget"] for r in members),
        "page_selection_top1": _mean(r.get("page_selection_top1") for r in members),
        "page_selection_top3": _mean(r.get("page_selection_top3") for r in members),
        "over_budget_rate": _mean(float(r["over_budget"]) for r in members if "over_budget" in r),
        **(_answer_metrics(members) if any("answer" in r for r in members) else {}),
    }


def _answer_metrics(members: list[dict]) -> dict:
    """llm reader: answer F1 (LoCoMo rules), judge score, and the share of questions whose
    evidence had left the context (evicted, or outside the search window) on which the
    model called its tool at all."""
    return {
        "answer_f1": _mean(r.get("answer_f1") for r in members),
        "judge_score": _mean(r.get("judge") for r in members),
        "recall_trigger_rate": _mean(
            float(r["recall_triggered"])
            for r in members
            if r.get("needs_recall") and r.get("recall_triggered") is not None
        ),
        "n_errors": sum(1 for r in members if r.get("error")),
    }


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, clusters: Sequence | None = None, n: int = 2000, seed: int = 0
) -> dict:
    """Mean difference a-b over paired questions with a 95% bootstrap interval.

    With `clusters` (one label per pair, e.g. the conversation), the bootstrap resamples whole
    clusters with replacement (a clustered bootstrap): questions of one conversation share its
    paging history, so they are not independent, and resampling them one by one understates the
    spread. Without it, questions are resampled independently.

    Example:
        >>> paired_bootstrap([1, 1, 0, 0], [0, 0, 0, 0], clusters=["a", "a", "b", "b"])["diff"]
        0.5
    """
    x = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if len(x) == 0:
        return {"diff": None, "ci95": None, "n": 0}
    means = bootstrap_means(x, clusters=clusters, n=n, seed=seed)
    out = {
        "diff": round(float(x.mean()), 4),
        "ci95": [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)],
        "n": int(len(x)),
    }
    if clusters is not None:
        out["clusters"] = len(set(clusters))
    return out


def bootstrap_means(
    values: Sequence[float], *, clusters: Sequence | None = None, n: int = 2000, seed: int = 0
) -> np.ndarray:
    """`n` bootstrap replicates of the mean of `values`: items resampled independently, or with
    `clusters`, whole clusters resampled (each replicate's mean is over the items it drew).

    The same draws as ``scipy.stats.bootstrap(..., method="percentile")`` from the same seed (clustered:
    its paired form over cluster sums and sizes), so the same intervals (tests/evals/test_library_oracles.py);
    kept because scipy measured as fast or slower (0.95-1.5x our time unclustered, 1.7-2.7x clustered,
    tools/bench_libraries.py) and no extra needs it otherwise."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    if clusters is None:
        return x[rng.integers(0, len(x), size=(n, len(x)))].mean(axis=1)
    if len(clusters) != len(x):
        raise ValueError("`clusters` must give one label per value.")
    labels = {c: k for k, c in enumerate(dict.fromkeys(clusters))}
    index = np.array([labels[c] for c in clusters])
    sums = np.bincount(index, weights=x, minlength=len(labels))
    counts = np.bincount(index, minlength=len(labels)).astype(float)
    draw = rng.integers(0, len(labels), size=(n, len(labels)))
    return sums[draw].sum(axis=1) / counts[draw].sum(axis=1)


def mean_interval(
    values: Sequence[float], *, clusters: Sequence | None = None, n: int = 2000, seed: int = 0
) -> list[float] | None:
    """95% bootstrap interval of the mean (clustered when `clusters` is given)."""
    if len(values) == 0:
        return None
    means = bootstrap_means(values, clusters=clusters, n=n, seed=seed)
    return [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)]


def paired_comparisons(
    rows: list[dict], arm_keys: Sequence[str], pairs: Sequence[tuple[tuple, tuple]]
) -> list[dict]:
    """Evidence coverage of arm `a` minus arm `b` for each pair, per budget, over the questions
    both answered (categories 1-4, with evidence), with a 95% interval from a bootstrap over
    conversations (clustered: see `paired_bootstrap`).
    An arm is the tuple of a row's `arm_keys` values, e.g. ``("paging",)`` or ``("fixed_20", "fifo")``."""
    by: dict[tuple, dict[tuple, float]] = defaultdict(dict)
    for r in rows:
        if r["category"] != 5 and r["evidence_coverage"] is not None:
            arm = tuple(r[k] for k in arm_keys)
            by[(arm, r["budget"])][(r["sample_id"], r["question_index"])] = r["evidence_coverage"]
    out = []
    for budget in sorted({b for _, b in by}):
        for a, b in pairs:
            x, y = by.get((a, budget), {}), by.get((b, budget), {})
            shared = sorted(set(x) & set(y))
            if shared:
                out.append(
                    {
                        "budget": budget,
                        "a": "/".join(map(str, a)),
                        "b": "/".join(map(str, b)),
                        **paired_bootstrap(
                            [x[k] for k in shared], [y[k] for k in shared], clusters=[k[0] for k in shared]
                        ),
                    }
                )
    return out


def effective_compression(start_tokens: int, final_tokens: int) -> float:
    """Effective Compression Rate: ``(start - final) / start``, the share of the conversation's
    tokens the paged context no longer spends (0: nothing compressed; negative if it grew).

    Example:
        >>> effective_compression(1000, 250)
        0.75
    """
    if start_tokens <= 0:
        raise ValueError("`start_tokens` must be positive.")
    return (start_tokens - final_tokens) / start_tokens


def needle_retention(evidence: Sequence[str], present: set[str]) -> float:
    """1.0 when every evidence turn of a needle is in the context (resident, or recalled for
    its question), else 0.0. The Needle Retention Rate is its mean over needles.

    Example:
        >>> needle_retention(["D1:3"], {"D1:3", "D2:1"}), needle_retention(["D1:3", "D1:4"], {"D1:3"})
        (1.0, 0.0)
    """
    if not evidence:
        raise ValueError("A needle has at least one evidence turn.")
    return float(all(e in present for e in evidence))
