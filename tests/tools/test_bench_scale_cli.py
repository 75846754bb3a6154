"""The scale benchmark's command line (`tools/bench_scale.py` over the `tools/benchscale` package) as the
docs run it: in a fresh interpreter from the script, and with every command the docs cite. No timing is
asserted."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tools.benchscale import cli

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "bench_scale.py"
WEIGHT_ROW_KEYS = {
    "budget",
    "history_messages",
    "paging_bytes",
    "messages_bytes",
    "ratio",
    "ratio_p50",
    "ratio_max",
    "ratio_max_settled",
    "checkpoints",
    "paging_keys",
    "store_sketch_bytes",
}


def test_script_runs_the_weight_part_from_another_directory_and_writes_its_json(tmp_path):
    out = tmp_path / "weight.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "weight", "--sizes", "200", "--json", str(out)],
        cwd=tmp_path,  # the script finds its package and evals/ itself, whatever the working directory
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report) == {"header", "weight", "targets"}
    assert {"git_commit", "git_dirty", "cores", "python", "date", "argv", "part_wall_s"} <= set(
        report["header"]
    )
    assert report["header"]["argv"][:4] == ["--only", "weight", "--sizes", "200"]
    assert [row["budget"] for row in report["weight"]] == [900, 2000, 4000]
    for row in report["weight"]:
        assert set(row) == WEIGHT_ROW_KEYS
        assert row["history_messages"] >= 200 and row["paging_bytes"] > 0 and row["messages_bytes"] > 0
    assert report["targets"] == []  # targets come from steps and recall, which did not run
    assert "### Checkpoint weight" in done.stdout and "| budget | history messages | paging |" in done.stdout


def _cited_commands() -> list[str]:
    """Every `python tools/bench_scale.py ...` the docs show (inline code, which may wrap across lines)
    and the CLI's docstring shows (one per line, a comment after it)."""
    docs = (REPO / "docs" / "benchmarks.md").read_text() + (REPO / "README.md").read_text()
    cited = re.findall(r"`python tools/bench_scale\.py([^`]*)`", docs)
    cited += re.findall(r"^ +python tools/bench_scale\.py([^#\n]*)", cli.__doc__ or "", re.M)
    return [" ".join(command.split()) for command in cited]


def test_the_docs_cite_commands_and_the_cli_still_takes_each(tmp_path, monkeypatch):
    commands = _cited_commands()
    assert len(commands) >= 6, commands  # benchmarks.md (3) and the docstring's examples (3)
    monkeypatch.chdir(tmp_path)  # `--profile profiles/` creates its folder
    for command in commands:
        args = cli.parse_args(shlex.split(command))
        assert args.only <= {"steps", "recall", "rss", "weight", "quiet"}, command


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "steps,memory"], "unknown part(s) memory in --only; available: steps, recall, rss"),
        (["--sizes", "10000,1000"], "--sizes must be increasing"),
    ],
)
def test_a_wrong_option_is_refused_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(argv)
    assert message in capsys.readouterr().err
