"""The Markdown report: a header line, then one section per part that ran, then the targets."""

from __future__ import annotations

from typing import Any

from .render_steps import render_profiles, render_steps
from .tables import ms, section_table
from .weight import WEIGHT_WARMUP


def render(report: dict[str, Any], policy: str) -> str:
    """The Markdown report: a header line, then one section per part that ran."""
    steps = report.get("steps")
    lines = _render_header(report["header"])
    if steps:
        lines += render_steps(steps)
    if report.get("recall"):
        lines += _render_recall(report["recall"])
    if report.get("rss"):
        lines += _render_rss(report["rss"])
    if report.get("weight"):
        lines += _render_weight(report["weight"])
    if report.get("quiet"):
        lines += ["", *render_quiet(report["quiet"])]
    if report.get("targets"):
        lines += _render_targets(report["targets"])
    lines += render_profiles(steps or {})
    return "\n".join(lines)


def _render_header(h: dict[str, Any]) -> list[str]:
    return [
        f"Scale benchmark (`tools/bench_scale.py {' '.join(h['argv'])}`), commit {str(h['git_commit'])[:10]}"
        f"{' (dirty)' if h['git_dirty'] else ''}, {h['cores']} cores, Python {h['python']}, {h['date']}, "
        f"load average {' / '.join(f'{x:.1f}' for x in h.get('loadavg_at_start') or [])}.",
        "",
    ]


def _render_recall(recall: list[dict[str, Any]]) -> list[str]:
    return section_table(
        "Recall on a SQLite file store (ms)",
        [
            "pages",
            "messages",
            "write s",
            "recall by id p50",
            "p95",
            "search cold (index rebuild)",
            "search p50",
            "p95",
            "index postings",
            "RSS + cold start MB",
        ],
        [
            [
                f"{r['pages']:,}",
                f"{r['messages']:,}",
                f"{r['write_s']:.1f}",
                ms(r["recall_by_id_ms"]["p50"]),
                ms(r["recall_by_id_ms"]["p95"]),
                ms(r["search_cold_ms"]),
                ms(r["search_warm_ms"]["p50"]),
                ms(r["search_warm_ms"]["p95"]),
                f"{r['index_postings']:,}",
                f"{r['rss_growth_cold_start_bytes'] / 2**20:.0f}",
            ]
            for r in recall
        ],
    )


def _render_rss(rss: list[dict[str, Any]]) -> list[str]:
    return section_table(
        "Memory per idle thread (fresh process; RSS delta / threads)",
        [
            "pages per thread",
            "threads",
            "idle KB per thread",
            "+ after one search, KB per thread",
            "token cache entries (cap)",
            "index postings (cap)",
        ],
        [
            [
                str(r["pages_per_thread"]),
                str(r["threads"]),
                f"{r['idle_bytes_per_thread'] / 1024:.0f}",
                f"{r['searched_bytes_per_thread'] / 1024:.0f}",
                f"{r['token_cache_entries']:,} ({r['token_cache_cap']:,})",
                f"{r['index_postings']:,} ({r['index_max_postings']:,})",
            ]
            for r in rss
        ],
    )


def _render_weight(weight: list[dict[str, Any]]) -> list[str]:
    return section_table(
        "Checkpoint weight (bytes of each channel, JSON; written at every step)",
        [
            "budget",
            "history messages",
            "paging",
            "messages",
            "paging / messages",
            "ratio p50 (max) over checkpoints",
            f"max past the first {WEIGHT_WARMUP}",
            "heaviest paging keys",
            "store sketch record",
        ],
        [
            [
                str(r["budget"]),
                f"{r['history_messages']:,}",
                f"{r['paging_bytes']:,}",
                f"{r['messages_bytes']:,}",
                f"{r['ratio']:.2f}",
                f"{r['ratio_p50']:.2f} ({r['ratio_max']:.2f}) of {r['checkpoints']}",
                "-" if r["ratio_max_settled"] is None else f"{r['ratio_max_settled']:.2f}",
                ", ".join(f"{k} {n:,}" for k, n in list(r["paging_keys"].items())[:5]),
                f"{r['store_sketch_bytes']:,}",
            ]
            for r in weight
        ],
    )


def _render_targets(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "### Targets (reported, not asserted)", ""]
    for t in rows:
        value = t["value"]
        shown = "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
        verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        lines.append(f"- {t['target']}: {shown} ({verdict})")
    return lines


def render_quiet(quiet: dict[str, Any]) -> list[str]:
    lines = [
        f"### A call that pages nothing: CPU time against the tiktoken floor (budget {quiet['max_tokens']}, "
        f"{quiet['calls']} calls after {quiet['warmup']} warm-up calls)",
        "",
        "| path | quiet calls | paging calls | quiet p50 us | floor p50 us | ratio p50 | ratio p95 | target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for path in ("page_messages", "middleware"):
        q = quiet[path]
        lines.append(
            f"| {path} | {q['quiet_us']['n']} | {q['paging_calls']} | {ms(q['quiet_us']['p50'])} | "
            f"{ms(quiet['floor_us']['p50'])} | {ms(q['ratio_to_floor']['p50'])} | "
            f"{ms(q['ratio_to_floor']['p95'])} | <= {q['target']}x |"
        )
    return lines
