"""Shrinking a failing pure case, and a standalone script replaying it."""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Callable

from .oracles import chat_problems, in_history_order
from .pure import PureCase, PureParams
from .report import Failure, Report, failure_key


def shrink_pure(
    seed: int, params: PureParams, *, budget_s: float = 120.0
) -> tuple[list[tuple], Failure | None]:
    """Delta-debug a failing pure case down to a short event list with the same failure."""
    report = Report()
    case = PureCase(seed, params, report)
    case.run()
    if case.failed is None:
        return case.events, None
    target = failure_key(case.failed)
    events = case.events[:]
    # drop everything after the failing event
    deadline = time.monotonic() + budget_s

    valid_origin = not chat_problems(case.ref)

    def fails(candidate: list[tuple]) -> Failure | None:
        r = Report()
        c = PureCase(seed, params, r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c.run(events=candidate)
        if valid_origin and chat_problems(c.ref):
            return None  # keep the shrunk history a valid chat: tool results right after their calls
        return c.failed if failure_key(c.failed) == target else None

    best = fails(events)
    if best is None:
        return events, case.failed
    events, best = _drop_chunks(events, best, fails, deadline)
    return _shorten_texts(events, best, fails, deadline)


def _drop_chunks(
    events: list[tuple], best: Failure, fails: Callable, deadline: float
) -> tuple[list[tuple], Failure]:
    """Delta debugging: drop runs of events (halving the run length) while the failure survives."""
    chunk = max(1, len(events) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        i = 0
        changed = False
        while i < len(events) and time.monotonic() < deadline:
            candidate = events[:i] + events[i + chunk :]
            found = fails(candidate)
            if found is not None:
                events, best, changed = candidate, found, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return events, best


def _shorten_texts(
    events: list[tuple], best: Failure, fails: Callable, deadline: float
) -> tuple[list[tuple], Failure]:
    """Shorten message texts where the failure survives it."""
    for k, event in enumerate(events):
        if time.monotonic() > deadline:
            break
        if event[0] in ("add", "user", "tools"):
            msgs = event[1] if event[0] != "user" else [event[1]]
            short = [_shortened(m) for m in msgs]
            new_event = (event[0], short[0]) if event[0] == "user" else (event[0], short)
            candidate = events[:k] + [new_event] + events[k + 1 :]
            found = fails(candidate)
            if found is not None:
                events, best = candidate, found
    return events, best


def _shortened(m):
    """A message with its first three words only (a recall request, a non-text or short one as is)."""
    if isinstance(m, tuple) or not isinstance(m.content, str) or len(m.content) < 20:
        return m
    return m.model_copy(update={"content": " ".join(m.content.split()[:3])})


def repro_script(params: PureParams, events: list[tuple]) -> str:
    """A standalone script (library calls only) replaying `events` and printing the history checks."""
    lines = [
        "# pip install -e . ; python this_file.py",
        "from langchain_core.messages import (",
        "    AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, RemoveMessage,",
        ")",
        "from langgraph.graph.message import add_messages, REMOVE_ALL_MESSAGES",
        "from langgraph.store.memory import InMemoryStore",
        "from langmem_paging import (",
        "    PagingConfig, PageStore, TokenCounter, page_messages, reconstruct_history,",
        ")",
        "from langmem_paging.runtime.pager import Pager",
        "from langmem_paging.integrations.graph_state import GraphCall",
        "from langmem_paging.core.state import paging_reducer, recall_delta",
        "from langmem_paging.core.view import render_view",
        "from langmem_paging import PagingState",
        "",
        f"MODE = {params.mode!r}",
        f"OPTIONS = dict(max_tokens={params.max_tokens}, boundary={params.boundary!r}, "
        f"policy={params.policy!r}, "
        f"low_water_tokens={params.low_water}, bookmark_share={params.bookmark_share}, "
        f"large_result_share={params.large_result_share}, tiers={params.tiers!r}"
        + (", token_counter=len" if params.counter == "len" else "")
        + ")",
        "COUNTER = TokenCounter()",
        "",
        *inspect.getsource(in_history_order).splitlines(),
        "",
    ]
    if params.backend == "store":
        lines += [
            "pager = Pager(PagingConfig(**OPTIONS, mode=MODE), PageStore(InMemoryStore()))",
            "get_page = lambda p: pager.page_store.get('t', p)",
            "get_node = lambda c: pager.page_store.get_cluster('t', c)",
        ]
    else:
        lines += ["pages, nodes = {}, {}", "get_page, get_node = pages.get, nodes.get"]
    lines += [
        "msgs, value, full = [], {}, []",
        "",
        "def step():",
        "    global msgs, value",
        "    call = GraphCall.prepare(msgs, value, MODE, 't')",
    ]
    if params.backend == "store":
        lines.append("    result = pager.step(call.view, value, 't')")
    else:
        lines += [
            "    result = page_messages(call.view, state=value, text_counter=COUNTER, **OPTIONS)",
            "    pages.update({p.id: p for p in result.pages})",
            "    nodes.update({n.id: n for n in result.nodes})",
        ]
    lines += [
        "    update = call.update(result)",
        "    value = paging_reducer(value, update['paging']) if 'paging' in update else value",
        "    msgs = add_messages(msgs, update.get('messages', []))",
        (
            "    print(f'step: {result.tokens_before} -> {result.tokens} tokens, formed {result.formed}, "
            "evicted "
            "{result.evicted}, folded {result.folded}, over_budget={result.over_budget}')"
        ),
        "    print('  model sees:', [(m.id, str(m.content)[:40]) for m in result.view])",
        "    return result",
        "",
        "def add(new):",
        "    global msgs, full",
        "    msgs, full = add_messages(msgs, new), add_messages(full, new)",
        "",
    ]
    for event in events:
        if event[0] == "tools" and any(isinstance(r, tuple) for r in event[1]):
            lines.insert(lines.index("def add(new):"), _RECALL_DEF)
        lines += _EVENT_LINES.get(event[0], _omitted)(event)
    lines += [
        "",
        "rebuilt = reconstruct_history(msgs, get_page, COUNTER, clusters=get_node, state=value)",
        "print('rebuilt == full history:', rebuilt == full)",
        "print('rebuilt:', [m.id for m in rebuilt])",
        "print('full:   ', [m.id for m in full])",
    ]
    return "\n".join(lines) + "\n"


_RECALL_DEF = (
    "def _recall(call, mid):\n    global value\n"
    "    answer = pager.recall('t', value, **call['args'])\n"
    "    value = paging_reducer(value, recall_delta(answer.accessed, turn=answer.turn, "
    "results=[mid]))\n"
    "    print('recall', call['args'], '->', COUNTER.count_text(answer.content), 'tokens')\n"
    "    return ToolMessage(answer.content, tool_call_id=call['id'], name='recall', id=mid, "
    "artifact=answer.artifact)\n"
)
"""The script's recall tool (defined before the first event whose tool results hold a recall)."""


def _add_lines(event: tuple) -> list[str]:
    msgs = event[1] if event[0] == "add" else [event[1]]
    return [f"add([{', '.join(repr(m) for m in msgs)}])"]


def _tools_lines(event: tuple) -> list[str]:
    out = [f"_recall({r[1]!r}, {r[2]!r})" if isinstance(r, tuple) else repr(r) for r in event[1]]
    return [f"add([{', '.join(out)}])"]


def _remove_lines(event: tuple) -> list[str]:
    return [
        f"msgs = add_messages(msgs, [RemoveMessage(id={event[1]!r})]); "
        f"full = add_messages(full, [RemoveMessage(id={event[1]!r})])"
    ]


def _remove_all_lines(event: tuple) -> list[str]:
    return [
        f"keep = msgs[len(msgs) - {event[1]}:] if {event[1]} else []",
        "while keep and isinstance(keep[0], ToolMessage): keep = keep[1:]",
        f"summary = {event[2]!r}",
        "full = [summary, *in_history_order(reconstruct_history(keep, get_page, COUNTER, "
        "clusters=get_node), full)]",
        "msgs = add_messages(msgs, [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *keep])",
    ]


def _remove_front_lines(event: tuple) -> list[str]:
    return [
        f"gone = msgs[:{event[1]}]",
        "while len(gone) < len(msgs) and isinstance(msgs[len(gone)], ToolMessage): "
        "gone = msgs[:len(gone) + 1]",
        "dropped = {g.id for g in gone} | ({m.id for m in reconstruct_history(gone, get_page, "
        "COUNTER, clusters=get_node)} if MODE == 'replace' else set())",
        "full = [m for m in full if m.id not in dropped]",
        "msgs = add_messages(msgs, [RemoveMessage(id=g.id) for g in gone])",
    ]


def _edit_lines(event: tuple) -> list[str]:
    return [
        f"edited = next(m for m in msgs if m.id == {event[1]!r}).model_copy("
        f"update={{'content': {event[2]!r}}})",
        "msgs = add_messages(msgs, [edited])",
        "full = add_messages(full, [edited]) if any(m.id == edited.id for m in full) else full",
    ]


def _omitted(event: tuple) -> list[str]:
    return [f"# event {event[0]} omitted"]


_EVENT_LINES = {
    "add": _add_lines,
    "user": _add_lines,
    "step": lambda event: ["step()"],
    "tools": _tools_lines,
    "remove": _remove_lines,
    "remove_all": _remove_all_lines,
    "remove_front": _remove_front_lines,
    "edit": _edit_lines,
}
"""The script's lines for each kind of event (another kind is left out, with a comment)."""
