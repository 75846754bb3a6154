"""Runners: conversations x methods x budgets (or boundaries x policies) -> results.jsonl,
summary.json, summary.md and plots. Re-running with the same output directory resumes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evals import methods as method_lib
from evals.conversation import to_messages
from evals.datasets.records import Conversation
from evals.metrics import aggregate, evidence_coverage, page_selection, paired_bootstrap
from evals.paging_method import PagingSession
from evals.readers.lexical import READER_VERSION

try:
    from tqdm import tqdm
except ImportError:  # progress bars are optional
    def tqdm(iterable, **_):
        return iterable

import langmem_paging


@dataclass
class RunConfig:
    """Everything that defines a run; stored in the results header."""

    dataset: str
    methods: list[str] = field(default_factory=lambda: list(method_lib.METHODS))
    budgets: list[int] = field(default_factory=lambda: [2000, 4000, 8000])
    boundaries: list[str] = field(default_factory=lambda: ["fixed_20"])
    policies: list[str] = field(default_factory=lambda: ["lfu"])
    protocol: str = "end"
    reader: str = "lexical"
    data_sha256: str | None = None
    extra: dict = field(default_factory=dict)


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def header(config: RunConfig) -> dict:
    """First row of results.jsonl: code version, git commit, dirty flag, reader, config."""
    return {"type": "header", "version": langmem_paging.__version__, "git_commit": _git("rev-parse", "HEAD"),
            "git_dirty": bool(_git("status", "--porcelain")), "reader": READER_VERSION, "config": asdict(config)}


def ask_schedule(conversation: Conversation, protocol: str) -> dict[int, list[int]]:
    """Turn index after which each question is asked. `end`: after the last turn. `streaming`:
    right after the session that follows the question's latest evidence (no look-ahead)."""
    last = len(conversation.turns) - 1
    if protocol == "end":
        return {last: list(range(len(conversation.questions)))}
    index = {t.dia_id: i for i, t in enumerate(conversation.turns)}
    session_end: dict[int, int] = {}
    for i, t in enumerate(conversation.turns):
        session_end[t.session] = i
    sessions = sorted(session_end)
    schedule: dict[int, list[int]] = {}
    for qi, q in enumerate(conversation.questions):
        known = [index[e] for e in q.evidence if e in index]
        if not known:
            at = last
        else:
            session = conversation.turns[max(known)].session
            later = [s for s in sessions if s > session]
            at = session_end[later[0]] if later else last
        schedule.setdefault(at, []).append(qi)
    return schedule


def _row(conversation, qi, context, unit: dict) -> dict:
    q = conversation.questions[qi]
    return {
        "type": "question", **unit, "sample_id": conversation.sample_id, "question_index": qi,
        "category": q.category, "evidence": list(q.evidence),
        "evidence_coverage": evidence_coverage(q.evidence, context.present),
        "context_tokens": context.tokens, "bookmark_tokens": context.bookmark_tokens,
        "page_selection_top1": page_selection(q.evidence, context.resident_before, context.ranked_pages, 1)
        if unit["method"] == "paging" else None,
        "page_selection_top3": page_selection(q.evidence, context.resident_before, context.ranked_pages, 3)
        if unit["method"] == "paging" else None,
        "recalled": context.recalled[:10],
    }


def run_unit(conversation: Conversation, unit: dict, protocol: str) -> list[dict]:
    """Rows for one conversation under one method/budget (and boundary/policy for paging)."""
    messages = to_messages(conversation)
    schedule = ask_schedule(conversation, protocol)
    rows = []
    if unit["method"] == "paging":
        session = PagingSession(unit["budget"], unit["boundary"], unit["policy"])
        for i, message in enumerate(messages):
            session.add(message)
            for qi in schedule.get(i, []):
                context = session.ask(conversation.questions[qi].question, persist=protocol == "streaming")
                rows.append(_row(conversation, qi, context, unit))
        return rows
    build = getattr(method_lib, unit["method"])
    for i, qis in sorted(schedule.items()):
        for qi in qis:
            context = build(messages[: i + 1], conversation.questions[qi].question, unit["budget"])
            rows.append(_row(conversation, qi, context, unit))
    return rows


def _units(config: RunConfig, ablation: bool) -> list[dict]:
    if ablation:
        return [{"method": "paging", "budget": b, "boundary": bd, "policy": p, "protocol": config.protocol}
                for b in config.budgets for bd in config.boundaries for p in config.policies]
    out = []
    for method in config.methods:
        for budget in config.budgets:
            unit = {"method": method, "budget": budget, "boundary": None, "policy": None,
                    "protocol": config.protocol}
            if method == "paging":
                unit.update(boundary=config.boundaries[0], policy=config.policies[0])
            out.append(unit)
    return out


def _unit_key(sample_id: str, unit: dict) -> str:
    return json.dumps([sample_id, unit["method"], unit["budget"], unit["boundary"], unit["policy"],
                       unit["protocol"]])


def run(conversations: Sequence[Conversation], config: RunConfig, out: str | Path, *, ablation: bool = False,
        progress: bool = True) -> dict:
    """Run everything not yet in ``out/results.jsonl``, then write the summaries and plots."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    done: set[str] = set()
    if results.exists():
        lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        if lines and lines[0].get("config") != asdict(config):
            raise ValueError(f"{results} holds a run with another configuration; use a new --out.")
        done = {_unit_key(r["sample_id"], r) for r in lines if r.get("type") == "question"}
    else:
        results.write_text(json.dumps(header(config)) + "\n")
    todo = [(c, u) for c in conversations for u in _units(config, ablation) if _unit_key(c.sample_id, u) not in done]
    with results.open("a") as f:
        for conversation, unit in tqdm(todo, desc="eval", disable=not progress):
            rows = run_unit(conversation, unit, config.protocol)
            f.write("".join(json.dumps(r) + "\n" for r in rows))  # a unit lands whole: resume is exact
            f.flush()
    from evals.report import write_reports

    return write_reports(out, ablation=ablation)


def comparisons(rows: list[dict]) -> list[dict]:
    """Paired bootstrap of evidence coverage: paging minus each other method, per budget."""
    by = {}
    for r in rows:
        if r["category"] != 5 and r["evidence_coverage"] is not None:
            by[(r["method"], r["budget"], r["sample_id"], r["question_index"])] = r["evidence_coverage"]
    out = []
    budgets = sorted({k[1] for k in by})
    others = sorted({k[0] for k in by} - {"paging"})
    for budget in budgets:
        for other in others:
            keys = [k for k in by if k[0] == "paging" and k[1] == budget and (other, *k[1:]) in by]
            a = [by[k] for k in keys]
            b = [by[(other, *k[1:])] for k in keys]
            out.append({"budget": budget, "a": "paging", "b": other, **paired_bootstrap(a, b)})
    return out


__all__ = ["RunConfig", "aggregate", "ask_schedule", "comparisons", "header", "run", "run_unit"]
