"""What the deployment benchmark serves the graphs with, on 127.0.0.1; each a context manager that
stops what it started (its own process group), and nothing else.

* ``dev``: ``langgraph dev`` (one process) with a Postgres store and checkpointer by path from its
  ``langgraph.json`` (`graphs/postgres_persistence.py`);
* ``agent-server``: the stock ``langgraph-api`` on the MIT Postgres + Redis runtime
  ``langgraph-runtime-pg`` (its CLI ``langhost serve --workers N``), migrations run once before the
  workers start (``langgraph-runtime-pg-migrate upgrade``; the workers' own migration is switched off);
* ``app``: a plain multi-process app, ``uvicorn --workers N tools.deploy.app:app``, each run under its
  thread's advisory lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.langgraph_server import (
    _die_with_parent_hook,
    free_port,
    offline_env,
    serving,
    start_langgraph_server,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIMES = ("dev", "agent-server", "app")
GRAPHS = {name: f"{REPO_ROOT}/graphs/deploy_graph.py:{name}" for name in ("paging", "plain")}
PERSISTENCE = f"{REPO_ROOT}/graphs/postgres_persistence.py"
HTTP = {"app": "langmem_paging.server:app"}
"""The server app (paging routes, pages deleted with their threads) each server runtime installs."""
START_TIMEOUT = 180.0
AGENT_SERVER_VENV = REPO_ROOT / ".venv-agent-server"
"""Where the Agent Server runtime is installed: ``langgraph-runtime-pg`` pins ``langgraph-api==0.11.1``
(and ``langgraph-checkpoint-postgres==3.1.0``), older than the test extra's ``langgraph dev``, so it
lives in a venv of its own (.ci/run makes it: ``pip install -e . langhost==0.11.1.post1``)."""
RUNTIME_ENV = {
    "LG_RUNTIME_PG_AUTO_MIGRATE": "false",  # migrated once, before the workers start
    "PG_POOL_SIZE": "4",  # connections per worker: 4 (+4 overflow) for the runtime's queue, up to
    "PG_MAX_OVERFLOW": "4",  # 10 each for its checkpointer and store pools
    "LG_BG_JOB_HEARTBEAT": "2",  # a killed worker's run is swept and retried within seconds
    "N_JOBS_PER_WORKER": "10",
}


@dataclass
class Served:
    """A running server: its URL and its process group's leader."""

    url: str
    process: subprocess.Popen
    runtime: str
    workers: int
    log: Path

    def worker_pids(self) -> list[int]:
        """The worker processes (the leader itself when it serves alone)."""
        if self.workers == 1:
            return [self.process.pid]
        return [pid for pid in _children(self.process.pid) if b"spawn_main" in _cmdline(pid)]

    def kill_worker(self, prefer: int | None = None) -> int | None:
        """SIGKILL one worker, `prefer` if it is one (the supervisor starts another); its pid, or
        None if none was found."""
        pids = self.worker_pids() if self.workers > 1 else []
        if not pids:
            return None
        pid = prefer if prefer in pids else pids[0]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return pid


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def dev_config(workdir: Path) -> Path:
    """The ``langgraph.json`` of the ``dev`` runtime: both graphs, the server app, store and
    checkpointer by path."""
    config = {
        "dependencies": [str(REPO_ROOT)],
        "graphs": GRAPHS,
        "http": HTTP,
        "store": {"path": f"{PERSISTENCE}:store"},
        "checkpointer": {"path": f"{PERSISTENCE}:checkpointer"},
    }
    path = workdir / "langgraph.json"
    path.write_text(json.dumps(config, indent=2))
    return path


@contextlib.contextmanager
def serve(
    runtime: str, uri: str, workdir: Path, *, workers: int = 1, redis_uri: str = ""
) -> Iterator[Served]:
    """Serve both graphs with `runtime` on database `uri`, its tables made first, once."""
    workdir.mkdir(parents=True, exist_ok=True)
    setup_tables(uri)
    if runtime == "dev":
        if workers != 1:
            raise ValueError("langgraph dev serves with one process: --workers 1 for the dev runtime")
        env = {"LANGMEM_PAGING_STORE": uri}
        with start_langgraph_server(dev_config(workdir), extra_env=env, workdir=workdir) as server:
            yield Served(server.url, server.process, runtime, 1, server.log_path)
        return
    port, log = free_port(), workdir / "server.log"
    env = offline_env()
    if runtime == "agent-server":
        migrate(uri)
        (workdir / "langgraph.json").write_text(
            json.dumps({"dependencies": [str(REPO_ROOT)], "graphs": GRAPHS, "http": HTTP})
        )
        env.update(RUNTIME_ENV, DATABASE_URI=uri, REDIS_URI=redis_uri)
        command = [
            str(agent_server_python()),
            "-m",
            "langhost",
            "serve",
            "-c",
            "langgraph.json",
            "--no-browser",
        ]
        command += ["--server-log-level", "WARNING"]
        cwd = workdir
    elif runtime == "app":
        env.update(LANGMEM_PAGING_STORE=uri)
        command = [sys.executable, "-m", "uvicorn", "tools.deploy.app:app", "--log-level", "warning"]
        cwd = REPO_ROOT
    else:
        raise ValueError(f"unknown runtime {runtime!r}: one of {', '.join(RUNTIMES)}")
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    with serving(command, cwd=cwd, env=env, log_path=log, port=port, start_timeout=START_TIMEOUT) as started:
        served = Served(started[1], started[0], runtime, workers, log)
        _wait_workers(served)
        yield served


def _wait_workers(served: Served, timeout: float = START_TIMEOUT) -> None:
    """Every worker up (``/ok`` answers as soon as the first one is)."""
    deadline = time.monotonic() + timeout
    while served.workers > 1 and len(served.worker_pids()) < served.workers and time.monotonic() < deadline:
        time.sleep(0.2)


def setup_tables(uri: str) -> None:
    """The store's and checkpointer's tables (``python -m graphs.postgres_persistence``), once."""
    done = subprocess.run(
        [sys.executable, "-m", "graphs.postgres_persistence"],
        cwd=REPO_ROOT,
        env={**offline_env(), "LANGMEM_PAGING_STORE": uri},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"python -m graphs.postgres_persistence failed:\n{done.stdout}{done.stderr}")


def agent_server_python() -> Path:
    """The Python of the Agent Server runtime's venv; a clear error when it is missing."""
    python = AGENT_SERVER_VENV / "bin" / "python"
    if not python.exists():
        raise RuntimeError(
            f"the agent-server runtime needs {AGENT_SERVER_VENV}: python3 -m venv {AGENT_SERVER_VENV} && "
            f"{AGENT_SERVER_VENV}/bin/pip install -e . langhost==0.11.1.post1 (as .ci/run does)"
        )
    return python


def migrate(uri: str) -> None:
    """The runtime's schema migrations, run once before several workers start."""
    exe = agent_server_python().with_name("langgraph-runtime-pg-migrate")
    done = subprocess.run(
        [str(exe), "upgrade"], env={**offline_env(), "DATABASE_URI": uri}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"langgraph-runtime-pg-migrate upgrade failed:\n{done.stdout}{done.stderr}")


@contextlib.contextmanager
def running_redis(workdir: Path, timeout: float = 30.0) -> Iterator[str]:
    """A throwaway ``redis-server`` on 127.0.0.1 (no persistence), yielding its URI."""
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.access(exe, os.X_OK):
        raise RuntimeError("redis-server not found: apt-get install -y redis-server (as .ci/run does)")
    port = free_port()
    args = [
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]
    with open(workdir / "redis.log", "wb") as log:
        proc = subprocess.Popen(
            [exe, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent_hook(),  # noqa: PLW1509
        )
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.05)
        if proc.poll() is not None:
            raise RuntimeError(
                f"redis-server exited with code {proc.returncode}: see {workdir / 'redis.log'}"
            )
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
