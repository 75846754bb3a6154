"""Run the LangGraph dev server (`langgraph dev`, from ``langgraph-cli[inmem]``) for tests, offline.

`start_langgraph_server(config)` is a context manager yielding a `LangGraphServer` whose ``url`` is
``http://127.0.0.1:<free port>``; `server_fixture(config, name=...)` wraps it as a module-scoped
pytest fixture.

* Graph paths and local dependencies in the config are resolved relative to the config file's
  directory (as ``langgraph build`` does), and a copy with absolute paths is written to a temporary
  working directory: ``langgraph dev`` resolves them against its cwd and pickles its in-memory
  state into ``./.langgraph_api``, so every server starts empty and nothing lands in the repo.
* No network: analytics, the PyPI version check, LangSmith tracing/metadata, OTel export and the
  browser are switched off (see `OFFLINE_ENV`, `SCRUBBED_ENV`, ``--no-browser``, ``--studio-url``).
* The server runs in its own process group; teardown terminates the whole group and waits,
  also when a test or the start-up fails; on Linux it also gets SIGTERM if the test process dies.
* Its log goes to ``server.log`` in the working directory; its tail is printed when start-up
  fails, and when a test using the server fails (the whole log is then kept in the temp dir).
* Without ``langgraph-cli[inmem]`` (or ``langgraph-sdk``) the tests are skipped, or fail under CI=true.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_CONFIG = Path(__file__).resolve().parent / "langgraph.test.json"

REQUIRED_MODULES = {
    "langgraph_cli": "langgraph-cli[inmem]",
    "langgraph_api": "langgraph-cli[inmem]",
    "langgraph_runtime_inmem": "langgraph-cli[inmem]",
    "langgraph_sdk": "langgraph-sdk",
}

OFFLINE_ENV = {
    # langgraph_cli.analytics: otherwise every CLI command POSTs usage data from a thread.
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    # langgraph_api.cli: otherwise a thread GETs the langgraph-api release list from PyPI.
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    # langsmith.utils.tracing_is_enabled reads all four; no tracing, no LangSmith client.
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    # langgraph_api.config: no OTel trace export, no pushed metrics.
    "OTEL_ENABLED": "false",
    "LANGGRAPH_METRICS_ENABLED": "false",
    # A plain-text log file.
    "LOG_COLOR": "false",
    "PYTHONUNBUFFERED": "1",
}

SCRUBBED_ENV = (
    # A key turns on LangSmith tracing and the usage-metadata loop (langgraph_api.config / .metadata).
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
    "LANGSMITH_ENDPOINT",
    "LANGCHAIN_ENDPOINT",
    "LANGSMITH_AUTH_ENDPOINT",
    # An OTLP endpoint turns OTel export on; a Datadog key turns metrics export on.
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "LSD_DD_API_KEY",
    "CUSTOM_LSD_DD_API_KEY",
    # The demo graph uses a real model when this is set; tests want the scripted one.
    "OPENAI_API_KEY",
    # langgraph_api.cli reads these mount prefixes; the tests talk to the root.
    "MOUNT_PREFIX",
    "LANGGRAPH_MOUNT_PREFIX",
)

START_TIMEOUT = float(os.environ.get("LANGGRAPH_SERVER_START_TIMEOUT", "120"))
STOP_TIMEOUT = 20.0


class LangGraphServerError(RuntimeError):
    """The server did not start (or died); the message ends with its log tail."""


def missing_requirement() -> str | None:
    """Why the server cannot run here, or None."""
    missing = sorted({pkg for mod, pkg in REQUIRED_MODULES.items() if importlib.util.find_spec(mod) is None})
    if not missing:
        return None
    return (
        f"the LangGraph server tests need {' and '.join(repr(p) for p in missing)} "
        f"(pip install {' '.join(repr(p) for p in missing)})"
    )


def skip_unless_server_available() -> None:
    """`pytest.skip` when the server packages are missing; `pytest.fail` instead under CI=true."""
    reason = missing_requirement()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def offline_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for key in SCRUBBED_ENV:
        env.pop(key, None)
    env.update(OFFLINE_ENV)
    return env


def resolved_config(config: Path) -> dict:
    """The config with graph paths, local dependencies and an env file made absolute."""
    config = Path(config).resolve()
    base = config.parent
    data = json.loads(config.read_text())

    def absolute(path: str) -> str:
        return str((base / path).resolve()) if not os.path.isabs(path) else path

    data["dependencies"] = [absolute(d) if d.startswith(".") else d for d in data.get("dependencies", [])]
    graphs = {}
    for graph_id, spec in data.get("graphs", {}).items():
        source = spec["path"] if isinstance(spec, dict) else spec
        module, _, variable = source.rpartition(":")
        if "/" in module:  # a file path; 'pkg.module:var' stays as it is
            source = f"{absolute(module)}:{variable}"
        graphs[graph_id] = {**spec, "path": source} if isinstance(spec, dict) else source
    data["graphs"] = graphs
    if isinstance(data.get("env"), str):
        data["env"] = absolute(data["env"])
    return data


@dataclass
class LangGraphServer:
    """A running ``langgraph dev``."""

    url: str
    process: subprocess.Popen
    workdir: Path
    log_path: Path
    command: list[str]
    start_seconds: float
    graph_ids: list[str] = field(default_factory=list)

    def log_tail(self, lines: int = 60) -> str:
        return log_tail(self.log_path, lines)

    def rss_kib(self) -> int:
        """Resident memory of the server's process group, in KiB (Linux /proc)."""
        return sum(_rss_kib(pid) for pid in _group_pids(self.process.pid))


def log_tail(path: Path, lines: int = 60) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:])


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_API_LINE = re.compile(r"API:\s*(?:\x1b\[[0-9;]*m)?(http://[^\s\x1b]+)")


def _get_ok(url: str) -> bool:
    try:
        with _NO_PROXY.open(f"{url}/ok", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _die_with_parent_hook():
    """A `preexec_fn` that has the child SIGTERMed if the test process dies without tearing down.

    Linux only (``prctl(PR_SET_PDEATHSIG)``), else None. ctypes and libc are resolved here, in the
    parent: the hook itself only makes the call, so nothing imports or takes a lock after fork.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)
    return lambda: prctl(pr_set_pdeathsig, sigterm)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the process group, wait, SIGKILL what is left, wait."""
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)  # stragglers, or a leader that ignored SIGTERM
    process.wait(timeout=STOP_TIMEOUT)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _group_pids(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


@contextlib.contextmanager
def start_langgraph_server(
    config: Path = TEST_CONFIG,
    *,
    extra_env: dict[str, str] | None = None,
    start_timeout: float = START_TIMEOUT,
    workdir: Path | None = None,
) -> Iterator[LangGraphServer]:
    """Start ``langgraph dev`` on 127.0.0.1 with `config`, wait for ``GET /ok``, yield, stop."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="langgraph-server-")))
        workdir = Path(workdir)
        data = resolved_config(config)
        config_copy = workdir / "langgraph.json"
        config_copy.write_text(json.dumps(data, indent=2))
        log_path = workdir / "server.log"
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "langgraph_cli",
            "dev",
            "--config",
            str(config_copy),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-browser",
            "--no-reload",
            # Without it the CLI asks LangSmith for its host (when tracing is on) to print a Studio link.
            "--studio-url",
            f"http://127.0.0.1:{port}",
        ]
        env = offline_env()
        env.update(extra_env or {})
        process, url, seconds = stack.enter_context(
            serving(command, cwd=workdir, env=env, log_path=log_path, port=port, start_timeout=start_timeout)
        )
        yield LangGraphServer(
            url=url,
            process=process,
            workdir=workdir,
            log_path=log_path,
            command=command,
            start_seconds=seconds,
            graph_ids=list(data.get("graphs", {})),
        )


@contextlib.contextmanager
def serving(
    command: list[str], *, cwd: Path, env: dict[str, str], log_path: Path, port: int, start_timeout: float
) -> Iterator[tuple[subprocess.Popen, str, float]]:
    """Run an HTTP server `command` in its own process group (SIGTERMed if this process dies), its
    output in `log_path`; wait for ``GET /ok`` on `port` and yield (process, url, seconds to ready);
    on exit stop the whole group and wait."""
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent_hook(),  # noqa: PLW1509 - see the hook's docstring
        )
    try:
        url = _wait_ready(process, log_path, port, started, start_timeout)
        yield process, url, time.monotonic() - started
    finally:
        _stop(process)


def _wait_ready(process: subprocess.Popen, log_path: Path, port: int, started: float, timeout: float) -> str:
    url = f"http://127.0.0.1:{port}"
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise LangGraphServerError(
                f"{' '.join(map(str, process.args[:4]))} exited with code {process.returncode} before it was ready; "
                f"log {log_path}:\n{log_tail(log_path)}"
            )
        # The server falls back to another port when ours was taken in the meantime: believe its banner.
        match = _API_LINE.search(Path(log_path).read_text(errors="replace"))
        if match:
            url = match.group(1).rstrip("/")
        if _get_ok(url):
            return url
        time.sleep(0.2)
    raise LangGraphServerError(
        f"{' '.join(map(str, process.args[:4]))} was not ready at {url}/ok within {timeout:.0f}s; "
        f"log {log_path}:\n{log_tail(log_path)}"
    )


def report_log_on_failure(
    request: pytest.FixtureRequest, server: LangGraphServer, failed_before: int
) -> None:
    """Print the server log tail past output capture when tests failed while it was up."""
    if request.session.testsfailed > failed_before:
        kept = Path(tempfile.mkstemp(prefix="langgraph-server-", suffix=".log")[1])
        shutil.copyfile(server.log_path, kept)  # the working directory goes away at teardown
        text = (
            f"\n--- langgraph dev log tail (whole log kept at {kept}) ---\n"
            f"{server.log_tail()}\n--- end of log ---"
        )
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(text, file=sys.stderr, flush=True)


def server_fixture(
    config: Path | Callable[[pytest.TempPathFactory], Path] = TEST_CONFIG, *, name: str = "langgraph_server"
):
    """A module-scoped pytest fixture `name` serving `config` (a path, or a function writing one
    under pytest's `tmp_path_factory`); assign it to a module-level name.

    Example: ``demo_server = server_fixture(REPO_ROOT / "langgraph.json", name="demo_server")``.
    """

    @pytest.fixture(scope="module", name=name)
    def _server(request: pytest.FixtureRequest) -> Iterator[LangGraphServer]:
        skip_unless_server_available()
        path = config(request.getfixturevalue("tmp_path_factory")) if callable(config) else config
        failed_before = request.session.testsfailed
        try:
            with start_langgraph_server(path) as server:
                yield server
                report_log_on_failure(request, server, failed_before)
        except LangGraphServerError as exc:
            pytest.fail(str(exc), pytrace=False)

    return _server
