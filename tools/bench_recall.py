"""Per-search cost of `recall(query=...)`: embed time, search time, packing time, room used.

Replays LoCoMo dev conversations through paging at each budget (as `python -m evals locomo`
does: boundary fixed_20, policy lfu), then asks each question as a search recall and measures,
per search: the time spent embedding (0 without an embedder; with `--search-embedder`, the
embedder's own calls during the search), the index search (the `Search` request, embedding
included), packing (`pack_hits` over the hits, the second hop's included) and the tokens of the
result (and the turns still in the context it keeps) against the room the recall was given. Prints a table (medians and p95 per budget) and
JSON rows; no target is asserted (machines are shared: compare ratios of one run).

Usage (from the repository root)::

    python tools/bench_recall.py --budgets 2000,4000,8000 --conversations 1 --json results/bench_recall.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # run as a script

COLUMNS = ("embed_ms", "search_ms", "packing_ms", "room", "used", "used_share")
"""Per-search columns, in table order; a timing nobody made (no embedder) is 0."""


class _Clock:
    """Milliseconds spent inside wrapped calls, by column, for the search being measured."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, column: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[column] = self.spent.get(column, 0.0) + (time.perf_counter() - start) * 1000

        return timed


@contextmanager
def _instrumented(clock: _Clock, session: Any) -> Iterator[None]:
    """Time the index's search, its embedder and the packer while a recall runs."""
    from langmem_paging.recall import compose, passages  # compose packs a recall's passages

    index, embedder = session.index, getattr(session.index, "embedder", None)
    saved = [(compose, "pack_hits", passages.pack_hits), (index, "search", index.search)]
    if embedder is not None:
        saved.append((embedder, "embed", embedder.embed))
    compose.pack_hits = clock.wrap("packing_ms", passages.pack_hits)  # type: ignore[attr-defined]
    index.search = clock.wrap("search_ms", index.search)
    if embedder is not None:
        embedder.embed = clock.wrap("embed_ms", embedder.embed)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def measure(budget: int, conversation: Any, questions: int, embedder: str | None) -> list[dict[str, Any]]:
    """One row per question asked as a search recall on `conversation` replayed at `budget`."""
    from langchain_core.messages import AIMessage, HumanMessage

    from evals.conversation import to_messages
    from evals.paging_method import THREAD, PagingSession
    from langmem_paging.core.state import PagingState
    from langmem_paging.recall.service import resident_turns
    from tools.fuzzing.vocabulary import COUNTER

    session = PagingSession(budget, "fixed_20", "lfu", reader="search", search_embedder=embedder)
    for message in to_messages(conversation):
        session.add(message)
    rows = []
    for k, qa in enumerate(conversation.questions[:questions]):
        q = HumanMessage(qa.question, id=f"q{k}")
        first = session.step([*session.state, q], session.paging)
        paging = first.state.to_value()
        call = AIMessage(
            "", tool_calls=[{"name": "recall", "args": {"query": qa.question}, "id": "c"}], id="a"
        )
        call_tokens = session.pager.counter_for().count_message(call)
        room = session.pager.room_for(PagingState.from_value(paging), call_tokens=call_tokens)
        clock = _Clock()
        with _instrumented(clock, session):
            answer = session.pager.recall(
                THREAD, paging, query=qa.question, call_tokens=call_tokens, context=first.view
            )
        # turns still in the context that rank are kept there: their tokens are part of the room used
        kept = {key: tokens for key, _, tokens in resident_turns(first.view, session.pager.counter_for())}
        used = COUNTER.count_text(answer.content) + sum(kept.get(key, 0) for key in answer.kept)
        rows.append(
            {
                "budget": budget,
                "conversation": conversation.sample_id,
                "question": k,
                "embed_ms": clock.spent.get("embed_ms", 0.0),
                "search_ms": clock.spent.get("search_ms", 0.0),
                "packing_ms": clock.spent.get("packing_ms", 0.0),
                "room": room,
                "used": used,
                "used_share": used / room if room else 0.0,
            }
        )
    return rows


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def table(rows: list[dict[str, Any]]) -> str:
    """Median (and p95 for times) per budget, one line per budget."""
    lines = [
        "| budget | searches | "
        + " | ".join(f"{c} p50" + (f" | {c} p95" if c.endswith("_ms") else "") for c in COLUMNS)
        + " |"
    ]
    lines.append("|" + "---|" * (2 + len(COLUMNS) + sum(c.endswith("_ms") for c in COLUMNS)))
    for budget in sorted({r["budget"] for r in rows}):
        mine = [r for r in rows if r["budget"] == budget]
        cells = []
        for column in COLUMNS:
            values = [float(r[column]) for r in mine]
            cells.append(
                f"{statistics.median(values):.3f}"
                if column == "used_share"
                else f"{statistics.median(values):.1f}"
            )
            if column.endswith("_ms"):
                cells.append(f"{_p95(values):.1f}")
        lines.append(f"| {budget} | {len(mine)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default="2000,4000,8000")
    parser.add_argument("--conversations", type=int, default=1, help="first N LoCoMo dev conversations")
    parser.add_argument("--questions", type=int, default=60, help="questions per conversation")
    parser.add_argument(
        "--search-embedder", default=None, help="hybrid search with this embedder (fills embed_ms)"
    )
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args(argv)

    from evals.datasets.locomo import load_locomo

    conversations = load_locomo(limit=args.conversations)
    rows = [
        row
        for budget in (int(b) for b in args.budgets.split(","))
        for conversation in conversations
        for row in measure(budget, conversation, args.questions, args.search_embedder)
    ]
    print(table(rows))
    summary = {"embedder": args.search_embedder, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps({"embedder": args.search_embedder, "searches": len(rows)}))


if __name__ == "__main__":
    main()
