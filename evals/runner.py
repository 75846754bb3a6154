"""Runners: conversations x methods x budgets (or boundaries x policies) -> results.jsonl,
summary.json, summary.md and plots. Re-running with the same output directory resumes."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import langmem_paging
from evals import methods as method_lib
from evals.conversation import to_messages
from evals.datasets.records import Conversation
from evals.metrics import aggregate, evidence_coverage, page_selection
from evals.paging_method import PagingSession, method_name, reader_of
from evals.readers.lexical import READER_VERSION

T = TypeVar("T")


class _NoBar:
    """What a progress bar does when tqdm is not installed: nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None


def progress_bar(total: int, desc: str, unit: str, *, enabled: bool = True):
    """A tqdm bar counting `unit`s up to `total` (a context manager; ``update(n)``), or one that
    shows nothing when disabled or when tqdm is missing (progress bars are optional)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled)


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
    paging_readers: list[str] = field(default_factory=lambda: ["bookmarks"])
    """Lexical reader modes for paging (`evals.readers.lexical.READER_MODES`); each is a method
    ``paging[mode]`` (ignored by the llm reader, whose model decides)."""
    data_sha256: str | None = None
    extra: dict = field(default_factory=dict)
    search_embedder: str | None = None
    """Paging's search: hybrid with this embedder (``"default"``, ``"minilm"``, ...), score fusion; None:
    BM25. The flat hybrid baseline (`evals.methods.EMBEDDING_METHODS`) uses it too (None: ``"default"``)."""


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, cwd=Path(__file__).parent
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def embedder_names(config: RunConfig, ablation: bool = False) -> dict[str, str | None]:
    """Each method's embedder as named by its vectors (``onnx:all-MiniLM-L6-v2-int8:384``), None for
    lexical methods: what the header records, so a run says which model its hybrid numbers used."""
    out: dict[str, str | None] = {}
    for unit in _units(config, ablation):
        spec = unit.get("search_embedder")
        if spec and unit["method"] not in out:
            try:
                from langmem_paging.strategies.embeddings import get_embedder

                out[unit["method"]] = get_embedder(spec).name
            except ImportError as error:  # the run fails on it later, with the same message
                out[unit["method"]] = f"{spec} (unavailable: {error})"
        out.setdefault(unit["method"], None)
    return out


def header(config: RunConfig, reader=None, ablation: bool = False) -> dict:
    """First row of results.jsonl: code version, git commit, dirty flag, reader, config, each method's
    embedder, the BLAS/runtime threads per process; at the end of a run, wall seconds per method
    (`record_wall_times`)."""
    return {
        "type": "header",
        "version": langmem_paging.__version__,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain")),
        "reader": reader.version if reader is not None else READER_VERSION,
        "config": asdict(config),
        "embedders": embedder_names(config, ablation) if isinstance(config, RunConfig) else {},
        "threads": os.environ.get("OMP_NUM_THREADS"),
    }


def record_wall_times(results: Path) -> dict[str, float]:
    """Sum the unit wall times in ``timings.jsonl`` beside `results` by method into the header's
    ``wall_seconds`` (and CPU times into ``cpu_seconds``; results.jsonl is rewritten whole,
    atomically): the time each method took over
    the whole run, resumes included. Kept apart from the question rows, which stay deterministic."""
    timings = results.with_name(TIMINGS)
    lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    totals: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for line in timings.read_text().splitlines() if timings.exists() else []:
        row = json.loads(line)
        totals[row["method"]] = round(totals.get(row["method"], 0.0) + row["seconds"], 3)
        cpu[row["method"]] = round(cpu.get(row["method"], 0.0) + row.get("cpu_seconds", 0.0), 3)
    lines[0]["wall_seconds"], lines[0]["cpu_seconds"] = totals, cpu
    tmp = results.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tmp.replace(results)
    return totals


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


def _row(conversation, qi, context, unit: dict, answer=None, reader=None) -> dict:
    q = conversation.questions[qi]
    paging = reader_of(unit["method"]) is not None
    row = {
        "type": "question",
        **unit,
        "sample_id": conversation.sample_id,
        "question_index": qi,
        "category": q.category,
        "evidence": list(q.evidence),
        "evidence_coverage": evidence_coverage(q.evidence, context.present),
        "context_tokens": context.tokens,
        "bookmark_tokens": context.bookmark_tokens,
        "over_budget": context.over_budget,
        "page_selection_top1": page_selection(q.evidence, context.resident_before, context.ranked_pages, 1)
        if paging
        else None,
        "page_selection_top3": page_selection(q.evidence, context.resident_before, context.ranked_pages, 3)
        if paging
        else None,
        "recalled": context.recalled[:10],
    }
    if answer is not None:
        row.update(_answer_fields(q, context, unit, answer, reader))
    return row


def _answer_fields(q, context, unit: dict, answer, reader) -> dict:
    """llm reader: the answer, its LoCoMo F1 and judge score, and what the model did."""
    from evals.answer_f1 import locomo_f1

    tool = (
        "recall" if reader_of(unit["method"]) is not None else {"search_tool": "search"}.get(unit["method"])
    )
    judged = reader.judge is not None and q.category != 5 and answer.text
    return {
        "answer": answer.text,
        "gold": q.answer,
        "error": answer.error,
        "model_calls": answer.model_calls,
        "answer_f1": None if answer.error else locomo_f1(answer.text, q.answer, q.category),
        "judge": reader.judge(q.question, q.answer, answer.text) if judged else None,
        "recall_triggered": any(c["name"] == tool for c in answer.tool_calls) if tool else None,
        "needs_recall": bool(q.evidence) and any(e not in context.resident_before for e in q.evidence)
        if tool
        else None,
        "tool_calls": [{"name": c["name"], "args": c["args"]} for c in answer.tool_calls][:10],
    }


def run_unit(
    conversation: Conversation,
    unit: dict,
    protocol: str,
    reader=None,
    max_questions: int | None = None,
    workers: int = 1,
) -> list[dict]:
    """Rows for one conversation under one method/budget (and boundary/policy for paging).
    `reader`: None for the lexical reader, else an `LLMReader` that answers every question.
    `max_questions`: ask only the conversation's first N questions. `workers`: llm reader,
    questions asked at once (the streaming protocol asks one at a time: each one changes the thread)."""
    messages = to_messages(conversation)
    schedule = {
        i: [qi for qi in qis if max_questions is None or qi < max_questions]
        for i, qis in ask_schedule(conversation, protocol).items()
    }
    concurrent = workers if reader is not None and protocol == "end" else 1
    rows = []
    mode = reader_of(unit["method"])
    if mode is not None:
        session = PagingSession(
            unit["budget"],
            unit["boundary"],
            unit["policy"],
            search_embedder=unit.get("search_embedder"),
            reader=mode if reader is None else "bookmarks",
        )
        persist = protocol == "streaming"

        def ask(qi: int) -> dict:
            question = conversation.questions[qi].question
            if reader is None:
                return _row(conversation, qi, session.ask(question, persist=persist), unit)
            context, answer = session.ask_llm(question, reader, persist=persist)
            return _row(conversation, qi, context, unit, answer, reader)

        for i, message in enumerate(messages):
            session.add(message)
            rows += _map(ask, schedule.get(i, []), concurrent)
        return rows
    build = getattr(method_lib, unit["method"])
    if unit["method"] in method_lib.EMBEDDING_METHODS:
        build = partial(build, embedder=unit["search_embedder"])

    def answer_at(job: tuple[int, int]) -> dict:
        i, qi = job
        question, history = conversation.questions[qi].question, messages[: i + 1]
        if reader is None:
            context, answer = build(history, question, unit["budget"]), None
        elif unit["method"] == "search_tool":
            context, answer = method_lib.search_tool_with_reader(history, question, unit["budget"], reader)
        else:
            context = build(history, question, unit["budget"])
            answer = reader.answer(context.messages)
        return _row(conversation, qi, context, unit, answer, reader)

    return _map(answer_at, [(i, qi) for i, qis in sorted(schedule.items()) for qi in qis], concurrent)


TIMINGS = "timings.jsonl"
"""Beside results.jsonl: one row per unit with its wall seconds (what `record_wall_times` sums)."""


def timed_unit(conversation: Conversation, unit: dict, *args) -> tuple[list[dict], dict]:
    """`run_unit`'s rows and the unit's timing row (its wall seconds)."""
    start, cpu = time.perf_counter(), time.process_time()
    rows = run_unit(conversation, unit, *args)
    return rows, {
        **unit,
        "sample_id": conversation.sample_id,
        "seconds": round(time.perf_counter() - start, 3),
        # CPU time of the process (all its threads): comparable between runs on a busy machine
        "cpu_seconds": round(time.process_time() - cpu, 3),
    }


def _map(fn, items: Sequence, workers: int) -> list:
    """`fn` over `items` in order, on `workers` threads when more than one."""
    if workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def expand_methods(methods: Sequence[str], paging_readers: Sequence[str], llm: bool = False) -> list[str]:
    """Method names of a run: ``paging`` becomes ``paging[mode]`` for each reader mode (with
    the llm reader it stays ``paging``: the model is the reader)."""
    out: list[str] = []
    for method in methods:
        names = [method] if method != "paging" or llm else [method_name(r) for r in paging_readers]
        out += [n for n in names if n not in out]
    return out


def _units(config: RunConfig, ablation: bool) -> list[dict]:
    llm = config.reader == "llm"
    if ablation:
        method = "paging" if llm else method_name(config.paging_readers[0])
        return [
            {"method": method, "budget": b, "boundary": bd, "policy": p, "protocol": config.protocol}
            for b in config.budgets
            for bd in config.boundaries
            for p in config.policies
        ]
    out = []
    for method in expand_methods(config.methods, config.paging_readers, llm):
        for budget in config.budgets:
            unit = {
                "method": method,
                "budget": budget,
                "boundary": None,
                "policy": None,
                "protocol": config.protocol,
            }
            if method in method_lib.EMBEDDING_METHODS:
                unit["search_embedder"] = config.search_embedder or "default"
            if reader_of(method) is not None:
                unit.update(boundary=config.boundaries[0], policy=config.policies[0])
                if config.search_embedder:
                    unit["search_embedder"] = config.search_embedder
            out.append(unit)
    return out


def unit_questions(conversation: Conversation, protocol: str, max_questions: int | None = None) -> int:
    """How many questions a unit asks (one result row each): what the progress bar counts."""
    return sum(
        1
        for qis in ask_schedule(conversation, protocol).values()
        for qi in qis
        if max_questions is None or qi < max_questions
    )


def _unit_key(sample_id: str, unit: dict) -> str:
    key = [sample_id, unit["method"], unit["budget"], unit["boundary"], unit["policy"], unit["protocol"]]
    return json.dumps([*key, unit["search_embedder"]] if unit.get("search_embedder") else key)


def start_results(
    results: Path, config, head: Callable[[], dict], key: Callable[[dict], str | None]
) -> set[str]:
    """The keys (`key` of each row, None for rows that count for nothing) of the rows already in
    `results`, made with `config`; a new `results` (its folder too) with the `head()` row when there
    is none yet.

    Raises:
        ValueError: `results` holds a run with another configuration.
    """
    if not results.exists():
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(head()) + "\n")
        return set()
    lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    if lines and lines[0].get("config") != asdict(config):
        raise ValueError(f"{results} holds a run with another configuration; use a new --out.")
    return {k for r in lines if (k := key(r)) is not None}


def run_jobs(jobs: Sequence[Callable[[], T]], processes: int = 1) -> Iterator[T]:
    """Each job's result: here and in order, or in `processes` spawned processes (when more than one,
    for more than one job) as each finishes. A job (a `functools.partial`) must pickle."""
    if processes <= 1 or len(jobs) <= 1:
        yield from (job() for job in jobs)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: the parent may have imported torch (semantic reader), which does not survive fork well
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(job) for job in jobs]
        for future in as_completed(futures):
            yield future.result()


def run(
    conversations: Sequence[Conversation],
    config: RunConfig,
    out: str | Path,
    *,
    ablation: bool = False,
    progress: bool = True,
    reader=None,
    workers: int = 1,
    processes: int = 1,
) -> dict:
    """Run everything not yet in ``out/results.jsonl``, then write the summaries and plots.
    `reader`: an `LLMReader` for ``config.reader == "llm"``; `workers`: its questions asked at once;
    `processes`: lexical reader, units (conversation x method x budget) run in that many processes
    (each unit is deterministic and self-contained, so rows do not depend on it; units land in the
    order they finish)."""
    if (config.reader == "llm") != (reader is not None):
        raise ValueError("Pass an LLMReader as `reader` exactly when config.reader is 'llm'.")
    out = Path(out)
    results = out / "results.jsonl"
    done = start_results(
        results,
        config,
        lambda: header(config, reader, ablation),
        lambda r: _unit_key(r["sample_id"], r) if r.get("type") == "question" else None,
    )
    todo = [
        (c, u)
        for c in conversations
        for u in _units(config, ablation)
        if _unit_key(c.sample_id, u) not in done
    ]
    max_questions = config.extra.get("max_questions")
    total = sum(unit_questions(c, config.protocol, max_questions) for c, _ in todo)
    with (
        results.open("a") as f,
        (out / TIMINGS).open("a") as timings,
        progress_bar(total, "eval", "question", enabled=progress) as bar,
    ):
        jobs = [partial(timed_unit, c, u, config.protocol, reader, max_questions, workers) for c, u in todo]
        for rows, timing in run_jobs(jobs, processes if reader is None else 1):
            f.write("".join(json.dumps(r) + "\n" for r in rows))  # a unit lands whole: resume is exact
            f.flush()
            timings.write(json.dumps(timing) + "\n")
            timings.flush()
            bar.update(len(rows))
    record_wall_times(results)
    from evals.report import write_reports

    return write_reports(out, ablation=ablation)


__all__ = [
    "RunConfig",
    "aggregate",
    "ask_schedule",
    "embedder_names",
    "expand_methods",
    "header",
    "progress_bar",
    "record_wall_times",
    "run",
    "run_jobs",
    "run_unit",
    "start_results",
    "timed_unit",
    "unit_questions",
    "TIMINGS",
]
