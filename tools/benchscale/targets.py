"""The issue's targets computed from the measurements (reported, never asserted)."""

from __future__ import annotations

from typing import Any


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def targets(report: dict[str, Any], policy: str) -> list[dict[str, Any]]:
    """The issue's targets, computed from the measurements (reported, never asserted)."""
    out = []
    sizes = report.get("steps", {}).get("sizes", [])
    replace, view = f"replace/{policy}", f"view/{policy}"
    if len(sizes) >= 2:
        first, last = sizes[0], sizes[-1]
        for kind in ("all", "not_paging", "paging"):
            r = _ratio(last["runners"][replace][kind]["p50"], first["runners"][replace][kind]["p50"])
            out.append(
                {
                    "target": f"replace p50 ({kind}) at {last['target']} <= 1.5x p50 at {first['target']}",
                    "value": r,
                    "met": None if r is None else r <= 1.5,
                }
            )
    for row in sizes:
        if row["target"] == 10_000 or len(sizes) == 1 or row is sizes[len(sizes) // 2]:
            a, b = row["runners"][replace]["all"]["p50"], row["trim"]["approximate"]["p50"]
            out.append(
                {
                    "target": f"replace step p50 < trim approximate p50 at {row['target']}",
                    "value": _ratio(a, b),
                    "met": a < b,
                }
            )
            break
    for row in sizes:
        a, b = row["runners"][view]["all"]["p50"], row["trim"]["approximate"]["p50"]
        out.append(
            {
                "target": f"view step p50 <= trim approximate p50 at {row['target']}",
                "value": _ratio(a, b),
                "met": a <= b,
            }
        )
    for row in report.get("recall", []):
        out.append(
            {
                "target": f"recall by id p95 <= 5 ms at {row['pages']} pages",
                "value": row["recall_by_id_ms"]["p95"],
                "met": row["recall_by_id_ms"]["p95"] <= 5,
            }
        )
        out.append(
            {
                "target": f"search p95 <= 50 ms at {row['pages']} pages (warm)",
                "value": row["search_warm_ms"]["p95"],
                "met": row["search_warm_ms"]["p95"] <= 50,
            }
        )
    if "steps" in report:
        m = report["steps"]["max_tokens_received"]
        out.append(
            {
                "target": f"the model never receives more than max_tokens={m['max_tokens']}",
                "value": m["tokens"],
                "met": not m["exceeded"],
            }
        )
    return out
