"""``python -m evals ablation-suite``: one command writes every run's summaries and the study's findings
at each budget, resumes, and writes no findings from a missing run or another commit's runs."""

from __future__ import annotations

import json
import shutil

import pytest

from evals.ablation_suite import SUITE, SuiteIncomplete, check_suite, run_suite, same_code
from evals.cli import main as evals_main
from evals.datasets.synthetic import generate
from evals.runner import _git

# The suite pages conversations at small budgets by design: the library's warnings there are
# by-products (their rule is tested where a test provokes one).
pytestmark = pytest.mark.filterwarnings("ignore::langmem_paging.PagingWarning")

BUDGETS = [300, 600]
BOUNDARIES = ["fixed_20", "topic_shift"]


def _locomo_file(path, conversations: int = 2):
    """A LoCoMo file in the official format, from small generated conversations (fast, and present
    wherever the tests run)."""
    samples = []
    for seed in range(conversations):
        conv = generate(n_turns=120, n_facts=4, seed=100 + seed)
        record: dict = {"speaker_a": conv.speakers[0], "speaker_b": conv.speakers[1]}
        for turn in conv.turns:
            record.setdefault(f"session_{turn.session}", []).append(
                {"speaker": turn.speaker, "dia_id": turn.dia_id, "text": turn.text}
            )
            record[f"session_{turn.session}_date_time"] = turn.date
        qa = [
            {"question": q.question, "answer": q.answer, "evidence": list(q.evidence), "category": q.category}
            for q in conv.questions
        ]
        samples.append({"sample_id": f"tiny-{seed}", "conversation": record, "qa": qa})
    path.write_text(json.dumps(samples))
    return path


def _argv(out, data_dir, locomo) -> list[str]:
    return [
        "ablation-suite",
        "--out",
        str(out),
        "--data-dir",
        str(data_dir),
        "--budgets",
        ",".join(map(str, BUDGETS)),
        "--boundaries",
        ",".join(BOUNDARIES),
        "--data",
        str(locomo),
        "--synthetic-conversations",
        "2",
        "--synthetic-turns",
        "120",
        "--synthetic-facts",
        "4",
        "--no-progress",
    ]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """One tiny suite run: (runs directory, data directory, LoCoMo file, argv)."""
    root = tmp_path_factory.mktemp("suite")
    locomo = _locomo_file(root / "locomo.json")
    argv = _argv(root / "runs", root / "data", locomo)
    assert evals_main(argv) == 0
    return root / "runs", root / "data", locomo, argv


def test_the_suite_writes_every_runs_summaries_and_findings_at_each_budget(suite):
    runs, data, _, _ = suite
    assert sorted(p.name for p in data.iterdir()) == sorted(
        [run.name for run in SUITE] + ["findings.json", "findings.md"]
    )
    for run in SUITE:  # summaries only: the per-question rows stay in --out
        assert sorted(p.name for p in (data / run.name).iterdir()) == ["summary.json", "summary.md"]
        rows = json.loads((data / run.name / "summary.json").read_text())["rows"]
        assert {r["budget"] for r in rows} == set(BUDGETS)
        assert {r["policy"] for r in rows} == set(run.policies)
        assert {r["boundary"] for r in rows} == set(BOUNDARIES if run.grid else ["fixed_20"])
        assert {r["protocol"] for r in rows} == {run.protocol}
    findings = json.loads((data / "findings.json").read_text())
    assert findings["budgets"] == BUDGETS
    assert set(findings["runs"]) == {run.name for run in SUITE}
    per_budget = {b: [f["finding"] for f in findings["findings"] if f["budget"] == b] for b in BUDGETS}
    assert per_budget[300] == per_budget[600] and len(per_budget[300]) == 17
    assert any("LoCoMo (end)" in f for f in per_budget[300])  # the LoCoMo end grid's policies, measured
    text = (data / "findings.md").read_text()
    lines = text.splitlines()
    by_budget = lines.index("| finding | study | B=300 | B=600 |")  # one line per finding
    assert all(line.count(" | ") == 3 for line in lines[by_budget + 2 : by_budget + 2 + 17])
    rows = lines.index("| finding | budget | study | ours | ci95 | verdict | note |")  # every row
    assert {line.split(" | ")[1] for line in lines[rows + 2 :]} == {"300", "600"}
    assert len(lines[rows + 2 :]) == 2 * 17


def test_rerunning_the_suite_resumes_without_duplicating_a_row(suite):
    runs, _, _, argv = suite
    before = {run.name: (runs / run.name / "results.jsonl").read_text().count("\n") for run in SUITE}
    assert evals_main(argv) == 0
    assert {run.name: (runs / run.name / "results.jsonl").read_text().count("\n") for run in SUITE} == before


def test_no_findings_are_written_when_a_run_is_missing(suite, tmp_path):
    runs, _, _, argv = suite
    skipped = "bookmarks-locomo"
    partial = tmp_path / "runs"
    for run in SUITE:  # every run done but one, which "succeeds" without writing anything
        if run.name != skipped:
            shutil.copytree(runs / run.name, partial / run.name)
    with pytest.raises(SuiteIncomplete, match=f"run '{skipped}' is missing"):
        run_suite(partial, tmp_path / "data", budgets=BUDGETS, boundaries=BOUNDARIES, ablate=lambda args: 0)
    assert not (tmp_path / "data").exists()


def test_a_run_lacking_units_is_incomplete(suite, tmp_path):
    runs, _, _, _ = suite
    copy = tmp_path / "runs"
    for run in SUITE:
        (copy / run.name).mkdir(parents=True)
        lines = (runs / run.name / "results.jsonl").read_text().splitlines()
        if run.name == "locomo":  # the largest budget never ran
            lines = [line for line in lines if f'"budget": {BUDGETS[-1]}' not in line]
        (copy / run.name / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SuiteIncomplete, match=f"run 'locomo' .* lacks .* units, first \\({BUDGETS[-1]}, "):
        check_suite(copy, BUDGETS, BOUNDARIES)


def test_runs_of_other_code_are_not_resumed_unless_asked(suite, tmp_path):
    runs, _, _, _ = suite
    with pytest.raises(SuiteIncomplete, match="another commit .*--any-commit"):
        run_suite(
            runs,
            tmp_path / "data",
            budgets=BUDGETS,
            boundaries=BOUNDARIES,
            ablate=evals_main,
            commit="0" * 40,
        )
    assert not (tmp_path / "data").exists()


def test_runs_resume_across_commits_that_change_only_the_reports():
    first = _git("rev-list", "--max-parents=0", "HEAD")
    assert same_code("HEAD", "HEAD") and not same_code(first, "HEAD") and not same_code(None, "HEAD")
    touched = _git("log", "--format=%H", "-n", "200", "--", ":/evals/report.py")
    report_only = [
        c for c in (touched or "").split() if _git("diff", "--name-only", f"{c}^", c) == "evals/report.py"
    ]
    if not report_only:
        pytest.skip("no commit in the last 200 that changed evals/report.py alone")
    assert same_code(f"{report_only[0]}^", report_only[0])


def test_the_grid_must_keep_the_boundaries_the_findings_compare(suite, capsys):
    _, _, _, argv = suite
    narrowed = [*argv[: argv.index("--boundaries") + 1], "fixed_10,fixed_20", *argv[argv.index("--data") :]]
    with pytest.raises(SystemExit):
        evals_main(narrowed)
    assert "--boundaries must include topic_shift" in capsys.readouterr().err


def test_the_suite_writes_under_untracked_results_by_default():
    """The README's command overwrote the notebook's tracked data; by default it writes under results/
    (git-ignored) and touches notebooks/data/ablation only when --data-dir names it."""
    from pathlib import Path

    from evals.cli import build_parser

    args = build_parser().parse_args(["ablation-suite"])
    root = Path(__file__).resolve().parents[2]
    assert (args.out, args.data_dir) == ("results/ablation", "results/ablation-data")
    for path in (args.out, args.data_dir):
        ignored = _git("check-ignore", "-q", "--no-index", str(root / path))
        assert ignored is not None, f"{path} is not git-ignored"


@pytest.mark.parametrize("command", ["locomo", "ablation-suite"])
def test_a_missing_locomo_file_is_one_line_naming_locomo_path(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOCOMO_PATH", str(tmp_path / "nowhere.json"))
    tiny = ["--budgets", "300", "--synthetic-conversations", "1", "--synthetic-turns", "40", "--no-progress"]
    suite = ["--data-dir", str(tmp_path / "data"), "--boundaries", "fixed_20,topic_shift"]
    argv = [command, "--out", str(tmp_path / "runs"), *tiny, *(suite if command == "ablation-suite" else [])]
    assert evals_main(argv) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"evals {command}: LoCoMo data not found at {tmp_path / 'nowhere.json'}")
    assert "set LOCOMO_PATH=" in err
    assert not (tmp_path / "runs").exists()  # the suite checks before any run
