"""The deployment benchmark (tools/bench_deploy.py) at a small size, for its invariants, not its
timings: each runtime serves the scripted graph on one Postgres under concurrent clients (a thread
of their own, and one thread two clients share); a worker is SIGKILLed mid-turn (several workers)
and a message is forgotten during the load (through the server app's route on the server runtimes,
which install it); `langgraph dev` is restarted and goes on; a thread deleted through the server
leaves no row in the library's tables. Afterwards
every thread is lossless with no turn lost, no page number has two contents, no page holds another
thread's turn, and the forgotten text is nowhere."""

from __future__ import annotations

import argparse
import shutil

import pytest

from tests.support.langgraph_server import skip_unless_server_available
from tests.support.postgres_server import find_bindir, unavailable
from tools.bench_deploy import run
from tools.deploy.servers import AGENT_SERVER_VENV

pytestmark = pytest.mark.deploy
TURNS = 16
"""Thread L0 has 8, so it is paged before its message is forgotten (the server's route refuses a
thread without pages: 404)."""


def _args(runtime: str, workers: int) -> argparse.Namespace:
    return argparse.Namespace(
        runtimes=[runtime],
        workers=[workers],
        threads=1,
        turns=TURNS,
        reps=0,
        budget_s=300.0,
        max_connections=200,
    )


@pytest.mark.parametrize(
    ("runtime", "workers"),
    [("app", 2), ("agent-server", 2), ("dev", 1)],
    ids=["app-2", "agent-server-2", "dev"],
)
def test_deployed_paging_loses_nothing(runtime, workers):
    skip_unless_server_available()
    if find_bindir() is None:
        unavailable("PostgreSQL server binaries not found (apt-get install -y postgresql)")
    if runtime == "agent-server" and not (AGENT_SERVER_VENV / "bin" / "langhost").exists():
        unavailable(f"{AGENT_SERVER_VENV} with langhost==0.11.1.post1 is missing (.ci/run makes it)")
    if runtime == "agent-server" and shutil.which("redis-server") is None:
        unavailable("redis-server is missing (apt-get install -y redis-server, as .ci/run does)")
    report = run(_args(runtime, workers))
    (row,) = report["rows"]
    assert not row["problems"], "\n".join(row["problems"])
    checked = row["checked"]
    assert (
        checked["turns"] == TURNS // 2 + 2 * TURNS
    )  # every turn answered: L0 (half), both clients of the shared thread
    assert checked["forgotten"] == "L0-c0-0-1"
    if workers > 1:
        # a worker died mid-turn: its client retried or reconnected, or the runtime swept its run
        assert checked["killed"] and (checked["retried"] or checked["reconnected"] or checked["swept"]), (
            checked
        )
