"""cProfile of extra calls after a window: a .prof file and the top functions."""

from __future__ import annotations

import cProfile
import io
import pstats
from typing import Any

from .lockstep import Lockstep
from .settings import REPO


def profile_top(profile: cProfile.Profile, limit: int) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile, stream=io.StringIO())
    total = sum(row[2] for row in stats.stats.values()) or 1.0
    rows = []
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        short = filename.replace(str(REPO) + "/", "")
        if "site-packages/" in short:
            short = short.split("site-packages/", 1)[1]
        rows.append(
            {
                "function": f"{short}:{line}({name})",
                "ncalls": ncalls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
                "tottime_share": tottime / total,
                "cumtime_share": cumtime / total,
            }
        )
    by_tot = sorted(rows, key=lambda r: -r["tottime_s"])[:limit]
    by_cum = sorted(rows, key=lambda r: -r["cumtime_s"])[:limit]
    return [{"by": "tottime", "rows": by_tot}, {"by": "cumtime", "rows": by_cum, "total_s": total}]


def profiles(args, lockstep: Lockstep, size: int) -> dict[str, Any]:
    """Profile the main policy's runners (a .prof file each, and the top functions)."""
    out = {}
    for runner in lockstep.runners:
        if runner.policy != args.policy:
            continue
        profile = lockstep.profile(runner, args.profile_steps)
        path = args.profile / f"{runner.mode}_{runner.policy}_{size}.prof"
        profile.dump_stats(str(path))
        out[runner.name] = {
            "file": str(path),
            "steps": args.profile_steps,
            "top": profile_top(profile, args.profile_top),
        }
    return out
