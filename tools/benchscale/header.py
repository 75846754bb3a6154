"""The report's header: git commit, dirty flag, machine, versions, date, load."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from .settings import REPO


def header() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    versions = {}
    packages = (
        "langmem-paging",
        "langchain-core",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "tiktoken",
        "numpy",
    )
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "benchmark": "bench_scale",
        "git_commit": git("rev-parse", "HEAD") or None,
        "git_dirty": bool(git("status", "--porcelain")),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "versions": versions,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "argv": sys.argv[1:],
    }
