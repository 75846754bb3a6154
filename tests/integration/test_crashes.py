"""SIGKILL during paging, recall and checkpoint writes; resumed from the same SQLite files or Postgres database.

The campaign (`crash_driver.py`) runs in its own process, which forks one driver per kill point: each
driver checks what the killed one left (nothing lost, exactly; no page id reused), finishes the turn
cut short, and goes on until its kill point. Kill points are chosen by a seed (the k-th store call,
the k-th checkpoint write), so the same points are hit on every run; checkpoints are saved before
the next step starts (``durability="sync"``), so what a kill leaves is the same too, but for the
order LangGraph's writer thread saves a step's task writes in. The full campaign (>= 200 kill points,
also timed kills, both durabilities) is ``python -m tests.support.crash_driver --kills 200 --timer ...``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.postgres_server import fresh_database

REPO_ROOT = Path(__file__).resolve().parents[2]
KILLS = 20


def _campaign(backend: str, where: str, logs: Path) -> dict:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.crash_driver",
            "--backend",
            backend,
            "--where",
            where,
            "--logs",
            str(logs),
            "--kills",
            str(KILLS),
            "--seed",
            "1",
            "--durability",
            "sync",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO_ROOT,
    )
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0 and lines, f"campaign failed:\n{run.stderr[-4000:]}"
    return json.loads(lines[-1])


def _assert_survived(summary: dict) -> None:
    assert summary["check failures"] == 0, json.dumps(summary["failures"], indent=1)[:6000]
    assert summary["drivers failed"] == 0 and summary["final driver ok"], summary
    # the seed's kill points: most land, at paging steps, recalls and checkpoint writes alike
    assert summary["drivers killed"] >= KILLS * 3 // 4, summary
    assert (
        summary["killed at a store call in a paging step"] and summary["killed at a store call in a recall"]
    )
    assert summary["killed at a checkpoint write"], summary
    assert summary["resumed a run cut short"] > 0 and summary["resumed an in-flight turn"] > 0, summary
    assert summary["max prompt tokens"] <= summary["budget"], summary


@pytest.mark.slow
def test_sigkill_at_store_calls_and_checkpoint_writes_loses_nothing_on_sqlite_files(tmp_path):
    _assert_survived(_campaign("sqlite", str(tmp_path), tmp_path))


@pytest.mark.slow
def test_sigkill_at_store_calls_and_checkpoint_writes_loses_nothing_on_postgres(postgres_uri, tmp_path):
    _assert_survived(_campaign("postgres", fresh_database(postgres_uri, "crash_campaign"), tmp_path))
