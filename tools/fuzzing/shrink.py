"""Shrinking a failing pure case, and a standalone script replaying it."""

from __future__ import annotations

import inspect
import time
import warnings

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
    # shorten message texts where the failure survives it
    for k, event in enumerate(events):
        if time.monotonic() > deadline:
            break
        if event[0] in ("add", "user", "tools"):
            msgs = event[1] if event[0] != "user" else [event[1]]
            short = []
            for _j, m in enumerate(msgs):
                if isinstance(m, tuple) or not isinstance(m.content, str) or len(m.content) < 20:
                    short.append(m)
                else:
                    short.append(m.model_copy(update={"content": " ".join(m.content.split()[:3])}))
            new_event = (event[0], short[0]) if event[0] == "user" else (event[0], short)
            candidate = events[:k] + [new_event] + events[k + 1 :]
            found = fails(candidate)
            if found is not None:
                events, best = candidate, found
    return events, best


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
        kind = event[0]
        if kind in ("add", "user"):
            msgs = event[1] if kind == "add" else [event[1]]
            lines.append(f"add([{', '.join(repr(m) for m in msgs)}])")
        elif kind == "step":
            lines.append("step()")
        elif kind == "tools":
            out = []
            for r in event[1]:
                if isinstance(r, tuple):
                    out.append(f"_recall({r[1]!r}, {r[2]!r})")
                else:
                    out.append(repr(r))
            if any(isinstance(r, tuple) for r in event[1]):
                lines.insert(
                    lines.index("def add(new):"),
                    "def _recall(call, mid):\n    global value\n"
                    "    answer = pager.recall('t', value, **call['args'])\n"
                    "    value = paging_reducer(value, recall_delta(answer.accessed, turn=answer.turn, "
                    "results=[mid]))\n"
                    "    print('recall', call['args'], '->', COUNTER.count_text(answer.content), 'tokens')\n"
                    "    return ToolMessage(answer.content, tool_call_id=call['id'], name='recall', id=mid, "
                    "artifact=answer.artifact)\n",
                )
            lines.append(f"add([{', '.join(out)}])")
        elif kind == "remove":
            lines.append(
                f"msgs = add_messages(msgs, [RemoveMessage(id={event[1]!r})]); "
                f"full = add_messages(full, [RemoveMessage(id={event[1]!r})])"
            )
        elif kind == "remove_all":
            lines.append(f"keep = msgs[len(msgs) - {event[1]}:] if {event[1]} else []")
            lines.append("while keep and isinstance(keep[0], ToolMessage): keep = keep[1:]")
            lines.append(f"summary = {event[2]!r}")
            lines.append(
                "full = [summary, *in_history_order(reconstruct_history(keep, get_page, COUNTER, "
                "clusters=get_node), full)]"
            )
            lines.append("msgs = add_messages(msgs, [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *keep])")
        elif kind == "remove_front":
            lines.append(f"gone = msgs[:{event[1]}]")
            lines.append(
                "while len(gone) < len(msgs) and isinstance(msgs[len(gone)], ToolMessage): "
                "gone = msgs[:len(gone) + 1]"
            )
            lines.append(
                "dropped = {g.id for g in gone} | ({m.id for m in reconstruct_history(gone, get_page, "
                "COUNTER, clusters=get_node)} if MODE == 'replace' else set())"
            )
            lines.append("full = [m for m in full if m.id not in dropped]")
            lines.append("msgs = add_messages(msgs, [RemoveMessage(id=g.id) for g in gone])")
        elif kind == "edit":
            lines.append(
                f"edited = next(m for m in msgs if m.id == {event[1]!r}).model_copy("
                f"update={{'content': {event[2]!r}}})"
            )
            lines.append("msgs = add_messages(msgs, [edited])")
            lines.append(
                "full = add_messages(full, [edited]) if any(m.id == edited.id for m in full) else full"
            )
        else:
            lines.append(f"# event {kind} omitted")
    lines += [
        "",
        "rebuilt = reconstruct_history(msgs, get_page, COUNTER, clusters=get_node, state=value)",
        "print('rebuilt == full history:', rebuilt == full)",
        "print('rebuilt:', [m.id for m in rebuilt])",
        "print('full:   ', [m.id for m in full])",
    ]
    return "\n".join(lines) + "\n"
