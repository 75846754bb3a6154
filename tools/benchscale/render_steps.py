"""The report's tables of part 1 (steps): latency, parts, build, budget, build curve, profiles."""

from __future__ import annotations

from typing import Any

from .tables import ms


def render_steps(steps: dict[str, Any]) -> list[str]:
    """The per-call part: latency, where the time goes, build time, budget, build curve."""
    return [
        *_steps_latency(steps),
        *_steps_parts(steps),
        *_steps_build(steps),
        *_steps_max_tokens(steps["max_tokens_received"]),
        *_steps_curve(steps),
    ]


def _steps_latency(steps: dict[str, Any]) -> list[str]:
    c = steps["config"]
    lines = [
        f"### Per model call (ms): budget {c['max_tokens']}, {c['boundary']}, SQLite file store; "
        f"window of {c['window']} calls per size; trim_messages(strategy='last') on the full history",
        "",
    ]
    if c["build_every"] != 1:
        lines += [
            f"History built by paging every {c['build_every']} model calls (steady state: every call).",
            "",
        ]
    lines += [
        "| history msgs | config | calls paging / not | paging p50 | paging p95 | not paging p50 | "
        "not paging p95 | all p50 | trim approx p50 | p95 | trim tiktoken p50 | p95 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in steps["sizes"]:
        t = row["trim"]
        for name, r in row["runners"].items():
            lines.append(
                f"| {row['history_messages']:,} | {name} | {r['paging']['n']} / {r['not_paging']['n']} | "
                f"{ms(r['paging']['p50'])} | {ms(r['paging']['p95'])} | {ms(r['not_paging']['p50'])} | "
                f"{ms(r['not_paging']['p95'])} | {ms(r['all']['p50'])} | {ms(t['approximate']['p50'])} | "
                f"{ms(t['approximate']['p95'])} | {ms(t['tiktoken']['p50'])} | {ms(t['tiktoken']['p95'])} |"
            )
    return lines


def _steps_parts(steps: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Where a call's time goes (p50 ms: GraphCall.prepare / Pager.step / GraphCall.update; then LangGraph's "
        "add_messages of the updates, not counted above), state size:",
        "",
        "| history msgs | config | prepare | pager | update | add_messages | state msgs | paging state KB "
        "| pages | clusters |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in steps["sizes"]:
        for name, r in row["runners"].items():
            p = r["parts_p50"]
            lines.append(
                f"| {row['history_messages']:,} | {name} | {ms(p['prepare'])} | {ms(p['pager'])} | "
                f"{ms(p['update'])} | {ms(p['reducer'])} | {r['state_messages']:,} | "
                f"{r['state_json_bytes'] / 1024:.1f} | {r['pages_formed']:,} | {r['clusters_made']:,} |"
            )
    return lines


def _steps_build(steps: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Time to build each size (the middleware's work summed over the build's calls; wall includes "
        "generating the chat and trim warm-up):",
        "",
        "| history msgs | wall s (cumulative) | "
        + " | ".join(f"{n} s (calls)" for n in steps["sizes"][0]["build"])
        + " |",
        "| --- | --- | " + " | ".join("---" for _ in steps["sizes"][0]["build"]) + " |",
    ]
    for row in steps["sizes"]:
        lines.append(
            f"| {row['history_messages']:,} | {row['build_wall_s_cumulative']:.1f} | "
            + " | ".join(f"{b['step_s']:.1f} ({b['steps']:,})" for b in row["build"].values())
            + " |"
        )
    return lines


def _steps_max_tokens(m: dict[str, Any]) -> list[str]:
    return [
        "",
        f"Most tokens the model received over {m['calls']:,} measured calls: {m['tokens']:,} "
        f"(max_tokens {m['max_tokens']:,}; {'EXCEEDED' if m['exceeded'] else 'never exceeded'}; "
        f"over-budget calls: {m['over_budget_calls']}).",
    ]


def _steps_curve(steps: dict[str, Any]) -> list[str]:
    curve = steps.get("build_curve_ms", {})
    if not curve:
        return []
    lines = [
        "",
        "Mean ms per call while building, by history length "
        f"(buckets of {steps['build_curve_bucket']:,}; "
        "a flat row means a call's work does not grow with the history):",
        "",
    ]
    for name, points in curve.items():
        keys = list(points)
        # eight points spread over the curve, first and last included
        picks = sorted({keys[int(i * (len(keys) - 1) / 7)] for i in range(8)}, key=int) if keys else []
        lines.append(f"- {name}: " + ", ".join(f"{int(k):,}: {points[k]:.2f}" for k in picks))
    return lines


def render_profiles(steps: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for row in steps.get("sizes", []):
        for name, prof in row.get("profiles", {}).items():
            lines += [
                "",
                f"Profile {name} at {row['history_messages']:,} messages ({prof['steps']} calls, "
                f"cProfile, top by own time; {prof['file']}):",
                "",
            ]
            for r in prof["top"][0]["rows"][:12]:
                lines.append(
                    f"    {r['tottime_share'] * 100:5.1f}% own {r['cumtime_share'] * 100:5.1f}% cum "
                    f"{r['ncalls']:>8} calls  {r['function']}"
                )
    return lines
