"""The needle-density benchmark: Needle Retention Rate against Effective Compression Rate.

Each conversation (`evals.datasets.needles`: one needle per segment) is replayed through
paging (the library's `Pager`, via `PagingSession`: any policy spec, boundary, reader mode) at
several compression levels, a token budget B or a fraction of the conversation's own
length. After the replay:

- ECR, the Effective Compression Rate, is ``(start - final) / start``: `start` the tokens of the
  whole conversation, `final` the tokens of the paged context the next model call would see
  (resident turns and bookmarks), same tokenizer as everything else;
- for each needle its question is asked (end protocol, each question on the same final state);
  the needle is *resident* when its evidence text is in the context before any recall, and
  *retained* when it is there after the offline reader's recall for its question.
  NRR, the Needle Retention Rate, is the share of needles retained (``nrr``), or resident
  (``nrr_resident``: what the policy alone kept).

``python -m evals needles --policies fifo,lru,lfu,semantic --budgets 1000,2000,4000 --on synthetic
--out DIR`` writes results.jsonl (header, then one row per needle), summary.json, summary.md
(NRR with a 95% bootstrap interval over conversations, NRR per segment, each policy minus
fifo paired over the same needles) and ``nrr_vs_ecr.png``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from evals.conversation import to_messages
from evals.datasets.needles import NeedleConversation
from evals.methods import COUNTER
from evals.metrics import effective_compression, mean_interval, needle_retention, paired_bootstrap
from evals.paging_method import PagingSession
from evals.report import BOOTSTRAP_NOTE, markdown_table

MIN_BUDGET = 256
"""A budget from `--fractions` is never below this (the recall cap needs room)."""


@dataclass
class NeedleConfig:
    """Everything that defines a needle run; stored in the results header."""

    dataset: str
    policies: list[str] = field(default_factory=lambda: ["fifo"])
    budgets: list[int] = field(default_factory=list)
    """Compression levels as token budgets (or use `fractions`)."""
    fractions: list[float] = field(default_factory=list)
    """Compression levels as fractions of each conversation's tokens."""
    boundary: str = "fixed_20"
    readers: list[str] = field(default_factory=lambda: ["bookmarks"])
    data_sha256: str | None = None
    extra: dict = field(default_factory=dict)

    def levels(self) -> list[str]:
        """Level labels: ``B=2000`` or ``f=0.25``."""
        return [f"B={b}" for b in self.budgets] + [f"f={f:g}" for f in self.fractions]


def budget_for(level: str, start_tokens: int) -> int:
    """The token budget of a level label for a conversation of `start_tokens` tokens.

    Example:
        >>> budget_for("B=2000", 9000), budget_for("f=0.25", 9000), budget_for("f=0.01", 9000)
        (2000, 2250, 256)
    """
    kind, _, value = level.partition("=")
    if kind == "B":
        return int(value)
    if kind == "f":
        return max(MIN_BUDGET, round(float(value) * start_tokens))
    raise ValueError(f"Unknown compression level {level!r}: use 'B=<tokens>' or 'f=<fraction>'.")


def run_conversation(
    item: NeedleConversation,
    *,
    policy: str,
    level: str,
    boundary: str = "fixed_20",
    reader: str = "bookmarks",
) -> list[dict]:
    """One row per needle of `item` after replaying it through paging at `level`."""
    conversation = item.conversation
    messages = to_messages(conversation)
    start = COUNTER(messages)
    budget = budget_for(level, start)
    session = PagingSession(budget, boundary, policy, reader=reader)
    for message in messages:
        session.add(message)
    final = COUNTER(session.step(session.state, session.paging).view)
    rows = []
    for needle in item.needles:
        q = conversation.questions[needle.question_index]
        context = session.ask(q.question)
        rows.append(
            {
                "type": "needle",
                "sample_id": conversation.sample_id,
                "policy": policy,
                "level": level,
                "budget": budget,
                "boundary": boundary,
                "reader": reader,
                "segment": needle.segment,
                "question_index": needle.question_index,
                "category": q.category,
                "evidence": list(q.evidence),
                "resident": needle_retention(q.evidence, context.resident_before),
                "retained": needle_retention(q.evidence, context.present),
                "start_tokens": start,
                "final_tokens": final,
                "ecr": round(effective_compression(start, final), 4),
                "context_tokens": context.tokens,
                "recalled": context.recalled[:10],
            }
        )
    return rows


def _key(sample_id: str, policy: str, level: str, reader: str) -> str:
    return json.dumps([sample_id, policy, level, reader])


def run_needles(
    items: Sequence[NeedleConversation],
    config: NeedleConfig,
    out: str | Path,
    *,
    progress: bool = True,
    processes: int = 1,
) -> dict:
    """Run every (conversation, policy, level, reader) not yet in ``out/results.jsonl``, then
    write the summaries and the plot. Re-running with the same output directory resumes.
    `processes`: replays run in that many processes (rows do not depend on it)."""
    from evals.runner import progress_bar, run_jobs, start_results

    results = Path(out) / "results.jsonl"
    done = start_results(
        results,
        config,
        lambda: _header(items, config),
        lambda r: (
            _key(r["sample_id"], r["policy"], r["level"], r["reader"]) if r.get("type") == "needle" else None
        ),
    )
    todo = [
        (i, p, lv, r)
        for i in items
        for p in config.policies
        for lv in config.levels()
        for r in config.readers
        if _key(i.conversation.sample_id, p, lv, r) not in done
    ]
    jobs = [
        partial(run_conversation, i, policy=p, level=lv, boundary=config.boundary, reader=r)
        for i, p, lv, r in todo
    ]
    total = sum(len(item.needles) for item, *_ in todo)  # one question (and row) per needle
    with results.open("a") as f, progress_bar(total, "needles", "question", enabled=progress) as bar:
        for rows in run_jobs(jobs, processes):
            f.write("".join(json.dumps(r) + "\n" for r in rows))
            f.flush()
            bar.update(len(rows))
    return write_needle_reports(out)


def _header(items: Sequence[NeedleConversation], config: NeedleConfig) -> dict:
    """results.jsonl's first row: the runner's header, and how many segments of each conversation
    hold a needle."""
    from evals.runner import header

    head = header(config)  # type: ignore[arg-type]
    head["segments"] = {i.conversation.sample_id: {"covered": i.covered, "of": i.n_segments} for i in items}
    return head


def _arm_order(policy: str, reader: str, level: str) -> tuple:
    """fifo first (the reference), then policies, readers and levels in order (levels by value)."""
    kind, _, value = level.partition("=")
    return policy != "fifo", policy, reader, kind, float(value)


def summarize(rows: list[dict]) -> dict:
    """Per (policy, reader, level): NRR (retained, and resident) with clustered intervals,
    mean ECR over conversations; NRR per segment; each policy minus fifo, paired."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["policy"], r["reader"], r["level"])].append(r)
    table = [
        _arm_row(*arm, members) for arm, members in sorted(groups.items(), key=lambda kv: _arm_order(*kv[0]))
    ]
    return {"rows": table, "by_segment": _by_segment(rows), "comparisons": _against_fifo(groups)}


def _arm_row(policy: str, reader: str, level: str, members: list[dict]) -> dict:
    """`summarize`'s row of one (policy, reader, level) from its needles' rows."""
    per_conversation = {r["sample_id"]: r for r in members}
    clusters = [r["sample_id"] for r in members]
    retained = [r["retained"] for r in members]
    return {
        "policy": policy,
        "reader": reader,
        "level": level,
        "mean_budget": round(sum(r["budget"] for r in per_conversation.values()) / len(per_conversation), 1),
        "ecr": round(sum(r["ecr"] for r in per_conversation.values()) / len(per_conversation), 4),
        "nrr": round(sum(retained) / len(retained), 4),
        "nrr_ci95": mean_interval(retained, clusters=clusters),
        "nrr_resident": round(sum(r["resident"] for r in members) / len(members), 4),
        "mean_context_tokens": round(sum(r["context_tokens"] for r in members) / len(members), 1),
        "n_needles": len(members),
        "n_conversations": len(per_conversation),
    }


def _by_segment(rows: list[dict]) -> list[dict]:
    """NRR (retained, and resident) per (policy, reader, level) and segment."""
    segments: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        segments[(r["policy"], r["reader"], r["level"], r["segment"])].append(r)
    return [
        {
            "policy": p,
            "reader": rd,
            "level": lv,
            "segment": s,
            "nrr": round(sum(r["retained"] for r in m) / len(m), 4),
            "nrr_resident": round(sum(r["resident"] for r in m) / len(m), 4),
            "n": len(m),
        }
        for (p, rd, lv, s), m in sorted(segments.items(), key=lambda kv: (_arm_order(*kv[0][:3]), kv[0][3]))
    ]


def _against_fifo(groups: dict[tuple, list[dict]]) -> list[dict]:
    """Each policy minus fifo at the same reader and level, retained and resident, paired over the
    same needles."""
    comparisons = []
    keyed = {k: {(r["sample_id"], r["segment"]): r for r in m} for k, m in groups.items()}
    for (policy, reader, level), mine in sorted(keyed.items(), key=lambda kv: _arm_order(*kv[0])):
        ref = keyed.get(("fifo", reader, level))
        if policy == "fifo" or ref is None:
            continue
        shared = sorted(set(mine) & set(ref))
        for metric in ("retained", "resident"):
            comparisons.append(
                {
                    "level": level,
                    "reader": reader,
                    "a": policy,
                    "b": "fifo",
                    "metric": metric,
                    **paired_bootstrap(
                        [mine[k][metric] for k in shared],
                        [ref[k][metric] for k in shared],
                        clusters=[k[0] for k in shared],
                    ),
                }
            )
    return comparisons


def write_needle_reports(out: str | Path) -> dict:
    """summary.json, summary.md and nrr_vs_ecr.png from ``out/results.jsonl``."""
    out = Path(out)
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    head, rows = lines[0], [r for r in lines[1:] if r.get("type") == "needle"]
    summary = {"header": head, **summarize(rows)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    config = head["config"]
    covered = head.get("segments", {})
    cov_line = ", ".join(f"{k}: {v['covered']}/{v['of']}" for k, v in covered.items())
    md = [
        f"# Needle density ({config['dataset']}, boundary {config['boundary']}, commit "
        f"{str(head['git_commit'])[:10]}{' dirty' if head['git_dirty'] else ''})",
        "",
        f"Segments with a needle: {cov_line}.",
        "",
        "NRR: share of needles whose evidence text is in the context after the reader's recall for its "
        "question (`nrr`) or before any recall (`nrr_resident`). ECR: (conversation tokens - final "
        "context tokens) / conversation tokens, mean over conversations.",
        "",
        markdown_table(
            summary["rows"],
            [
                "policy",
                "reader",
                "level",
                "mean_budget",
                "ecr",
                "nrr",
                "nrr_ci95",
                "nrr_resident",
                "mean_context_tokens",
                "n_needles",
                "n_conversations",
            ],
        ),
        "",
        "## Each policy minus fifo (paired over the same needles)",
        "",
        BOOTSTRAP_NOTE,
        "",
        markdown_table(
            summary["comparisons"], ["level", "reader", "a", "b", "metric", "diff", "ci95", "n", "clusters"]
        ),
        "",
        "## NRR per segment (0 = oldest)",
        "",
    ]
    seg_rows: dict[tuple, dict] = {}
    n_segments = max((r["segment"] for r in rows), default=-1) + 1
    for s in summary["by_segment"]:
        seg_rows.setdefault(
            (s["policy"], s["reader"], s["level"]),
            {"policy": s["policy"], "reader": s["reader"], "level": s["level"]},
        )[str(s["segment"])] = s["nrr"]
    md.append(
        markdown_table(
            list(seg_rows.values()), ["policy", "reader", "level", *(str(k) for k in range(n_segments))]
        )
    )
    (out / "summary.md").write_text("\n".join(md) + "\n")
    try:
        plot_nrr_vs_ecr(summary, out / "nrr_vs_ecr.png")
    except ImportError:
        import sys

        print("plot skipped: matplotlib is missing (pip install -e '.[evals]')", file=sys.stderr)
    return summary


def nrr_figure(summary: dict):
    """NRR (solid: after recall; dashed: resident) against ECR, one line per policy and reader."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evals.report import line_style

    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    arms = list(dict.fromkeys((r["policy"], r["reader"]) for r in summary["rows"]))
    readers = {r for _, r in arms}
    for k, (policy, reader) in enumerate(arms):
        pts = sorted(
            (r["ecr"], r["nrr"], r["nrr_resident"])
            for r in summary["rows"]
            if r["policy"] == policy and r["reader"] == reader
        )
        label = policy if len(readers) == 1 else f"{policy} [{reader}]"
        style = {**line_style(k), "linestyle": "-"}
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
        ax.plot([p[0] for p in pts], [p[2] for p in pts], color=style["color"], linestyle="--", alpha=0.45)
    ax.set_xlabel("effective compression rate (ECR)")
    ax.set_ylabel("needle retention rate (NRR)")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Needle retention vs compression (dashed: resident only)")
    fig.tight_layout()
    return fig


def plot_nrr_vs_ecr(summary: dict, path: str | Path) -> None:
    """`nrr_figure` written to `path`."""
    import matplotlib.pyplot as plt

    fig = nrr_figure(summary)
    fig.savefig(path, dpi=110)
    plt.close(fig)
