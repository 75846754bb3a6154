"""`tools/demo.py`, the README's main job: offline unless ``--model`` is given, and it checks its
own answer against the synthetic dataset's gold value (exit 1 when wrong)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO = REPO_ROOT / "tools" / "demo.py"
OPERATORS_RUN = ["--turns", "120", "--max-tokens", "900", "--boundary", "fixed_6"]  # docs/operators.md's


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("paging_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would: dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def run_demo(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, str(DEMO), "--db", str(tmp_path / "demo.sqlite"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environ,
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_demo_stays_offline_with_a_bogus_key_and_answers_the_operators_run_right(tmp_path):
    # A key and an endpoint that cannot answer: the environment alone must not pick a real model.
    run = run_demo(
        tmp_path, *OPERATORS_RUN, OPENAI_API_KEY="sk-bogus", OPENAI_BASE_URL="http://127.0.0.1:9/v1"
    )

    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "model: scripted (offline" in run.stdout
    assert "question: What is classmate Sanna's pet?   (gold: hedgehog" in run.stdout
    assert "model answers: From the recalled page: My classmate Sanna's new pet is a hedgehog." in run.stdout
    assert "answer check: RIGHT" in run.stdout and "demo: OK" in run.stdout


@pytest.mark.slow
def test_default_demo_answers_right(tmp_path):
    run = run_demo(tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "answer check: RIGHT: the answer names the gold value 'greyhound'" in run.stdout


@pytest.mark.slow
def test_demo_fails_loudly_when_its_answer_is_wrong(demo, tmp_path, monkeypatch, capsys):
    # A careless reader: takes the first user line of whatever it reads.
    monkeypatch.setattr(demo, "answering_line", lambda question, lines: lines[0] if lines else None)
    code = demo.main([*OPERATORS_RUN, "--db", str(tmp_path / "demo.sqlite")])
    out = capsys.readouterr().out
    assert code == 1
    assert "answer check: WRONG: the answer does not name the gold value 'hedgehog'" in out
    assert "demo: FAILED: the answer is wrong" in out


def test_answering_line_wants_the_questions_subject_not_just_a_shared_name(demo):
    question = "What is classmate Sanna's pet?"
    lines = ["My uncle Sanna took up fencing this year.", "My classmate Ines's new pet is a greyhound."]
    assert demo.answering_line(question, lines) is None
    lines.insert(1, "My classmate Sanna's new pet is a hedgehog.")
    assert demo.answering_line(question, lines) == "My classmate Sanna's new pet is a hedgehog."
    updated = ["My aunt Oskar just moved to Cusco.", "Update: actually my aunt Oskar just moved to Windhoek."]
    assert demo.answering_line("Where did aunt Oskar move?", updated) == updated[1]  # the latest wins


def test_is_right_matches_the_gold_value_as_words(demo):
    assert demo.is_right(
        "From the recalled page: My uncle Priya bought a Mini Cooper last week.", "Mini Cooper"
    )
    assert not demo.is_right("My classmate Sanna's new pet is a hedgehogs.", "hedgehog")
    assert not demo.is_right("", "hedgehog")


def test_the_ready_graphs_pick_a_real_model_only_by_name(monkeypatch):
    pytest.importorskip("langchain_openai", reason="pip install 'langmem-paging[openai]'")
    from graphs.agent import MODEL_ENV, chat_model, chat_model_from_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-bogus")
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert chat_model(None) is None and chat_model_from_env() is None  # a key alone: scripted
    monkeypatch.setenv(MODEL_ENV, "openai:gpt-4o-mini")
    model = chat_model_from_env()
    assert type(model).__name__ == "ChatOpenAI" and model.model_name == "gpt-4o-mini"
