"""The invariants a case checks at every model call (oracles over prompts, recalls, histories)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langmem_paging import (
    Page,
    PagingState,
    reconstruct_history,
)
from langmem_paging.core.library_messages import bookmark_message
from langmem_paging.core.messages import is_pinned, is_user_turn, library_mark, tool_call_ids
from langmem_paging.core.rendering import render_message

from .vocabulary import COUNTER

# -- checks ------------------------------------------------------------------------------------


def chat_problems(messages: list[BaseMessage]) -> list[tuple[str, frozenset]]:
    """Violations of the chat APIs' tool-pair rules (`tests/harness.assert_valid_chat`), as
    ``(problem, call ids involved)``."""
    out: list[tuple[str, frozenset]] = []
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                before = messages[i - 1] if i else None
                what = (
                    "bookmark"
                    if before is not None and library_mark(before)
                    else (before.type if before else "start")
                )
                out.append(
                    (
                        f"tool result at {i} without its call (after a {what} message)",
                        frozenset([message.tool_call_id]),
                    )
                )
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            out.append((f"unanswered tool calls before message {i} ({message.type})", frozenset(open_calls)))
            open_calls = set()
        if isinstance(message, AIMessage):
            open_calls = set(tool_call_ids(message))
        if isinstance(message, SystemMessage) and i != 0:
            out.append(("system message not first", frozenset()))
    return out


_HEADER = re.compile(r"=== ([pc]\d+)(?: · (.*))? ===")
_SPEAKER = re.compile(r"[^\s:\[\]=](?:[^:\[\]=\n]*[^\s:\[\]=])?(?: \[[^\]\n]*\])?: ")
_OTHER = re.compile(r"\.\.\.$|\[p\d+:|\(\d+ more member pages|\[(recall )?size cap")
_NOTICE = re.compile(r"\[(recall )?size cap")

GetPage = Callable[[str], "Page | None"]


def recall_structure_problems(
    content: str, get_page: GetPage | None = None, edits: Mapping[str, BaseMessage] | None = None
) -> list[str]:
    """Recall results (spec versions 2 and 3) put only the library's lines at the margin: a note
    first, page and cluster headers, one ``Name: text`` line per message shown (its further lines
    indented), ``...`` between runs, cluster member lines and the size notice. Stored text at the
    margin (a forged header, a forged speaker line) shows as a line of no such kind, or as more
    speaker lines under a header than the messages it names.

    A search's passage group (``=== p3 ===``, version 3) names no messages: with `get_page` (the
    thread's stored pages), its lines must be whole messages of that page as the library renders
    them, in the page's order, ``...`` only where messages are left out, and each message's further
    lines indented; a forged header names a page whose messages are not there. `edits`: messages
    the recall may show in another version than the stored one (view mode: the history's, by id)."""
    problems: list[str] = []
    expected: int | None = None
    speakers = 0
    lines = content.split("\n")
    passage: tuple[str, int] | None = None  # the open passage group: its page id, its header's line

    def close(end: int) -> None:
        if expected is not None and speakers != expected:
            problems.append(f"{speakers} speaker lines under a header naming {expected} messages")
        if passage is not None and get_page is not None:
            page_id, at = passage
            body = lines[at + 1 : end]
            if end == len(lines) and body and _NOTICE.match(body[-1]):
                body = body[:-1]  # the size notice closes the result
            problems.extend(_passage_problems(page_id, at, body, get_page, edits or {}))

    for k, line in enumerate(lines):
        if not line.strip() or line.startswith("  "):  # (blank lines carry nothing to forge)
            continue
        header = _HEADER.fullmatch(line)
        if header:
            close(k)
            detail = header.group(2)
            expected, speakers = (None if detail is None else _messages_named(detail)), 0
            passage = (header.group(1), k) if detail is None else None
            if detail is None and not header.group(1).startswith("p"):
                problems.append(f"line {k}: a cluster header naming no size: {line[:80]!r}")
        elif _SPEAKER.match(line):
            speakers += 1
        elif not _OTHER.match(line) and k > 0:
            problems.append(f"line {k} at the margin is no recall structure: {line[:80]!r}")
    close(len(lines))
    return problems


def _passage_problems(
    page_id: str, at: int, body: list[str], get_page: GetPage, edits: Mapping[str, BaseMessage]
) -> list[str]:
    """Why the lines under passage header `page_id` (line `at`) are not messages of that page."""
    page = get_page(page_id)
    if page is None:
        return [f"line {at}: a passage header names {page_id}, no page of this thread"]
    versions = [_renderings(m, edits) for m in page.messages]
    # which messages the lines are: identical messages (a tool's repeated error) make the first
    # match wrong, so every reading is followed: (line, message shown last, '...' since) states
    reached: dict[int, set[tuple[int | None, bool]]] = {0: {(None, False)}}
    furthest = 0
    for k in range(len(body) + 1):
        states = reached.get(k, set())
        furthest = k if states else furthest
        for last, gap in states:
            if _follow(body, k, last, gap, versions, reached):
                return []
    if furthest == len(body):
        return [f"line {at}: the passage group of {page_id} ends without a message after it"]
    line = body[furthest]
    return [
        f"line {at + 1 + furthest} (passage group of {page_id}) is no line of that page's messages "
        f"in order: {line[:80]!r}"
    ]


def _renderings(m: BaseMessage, edits: Mapping[str, BaseMessage]) -> list[list[str]]:
    """The lines `m` may show as in a passage: as paged, and as edited since (view mode)."""
    return [render_message(m).split("\n")] + (
        [render_message(edits[m.id]).split("\n")] if m.id in edits and edits[m.id] != m else []
    )


def _follow(
    body: list[str],
    k: int,
    last: int | None,
    gap: bool,
    versions: list[list[list[str]]],
    reached: dict[int, set[tuple[int | None, bool]]],
) -> bool:
    """One reading of a passage group's `body` at line `k` (message `last` shown last, `gap`: a
    ``...`` since): the states it reaches are added to `reached`; True when the body ends here."""
    if k == len(body):
        return last is not None and not gap
    if body[k] == "...":
        if last is not None and not gap:
            reached.setdefault(k + 1, set()).add((last, True))
        return False
    if last is None:
        after: range = range(len(versions))
    else:
        after = range(last + 2, len(versions)) if gap else range(last + 1, min(last + 2, len(versions)))
    for j in after:
        for lines in versions[j]:
            n = len(lines)
            if body[k : k + n] == lines and all(line.startswith("  ") for line in body[k + 1 : k + n]):
                reached.setdefault(k + n, set()).add((j, False))
    return False


def shows_page(content: str, page_id: str) -> bool:
    """True when a recall result shows `page_id` (its header line, not stored text naming it)."""
    return re.search(rf"^=== {re.escape(page_id)}( · .*)? ===$", content, re.MULTILINE) is not None


def left_to_sibling(content: str, page_id: str, served: Mapping[str, Any]) -> bool:
    """True when a recall result leaves `page_id` to the recall call of the same message that
    asked for it first (`served`: the library's ``Served`` by id), pointing to that call: the
    sibling's own result answers for the id, and is checked for it (graph seed 27: two parallel
    calls asked for a page of an abandoned branch; the first said "No such page", the second
    pointed to it)."""
    sibling = served.get(page_id)
    if sibling is None:
        return False
    for ids, calls in re.findall(
        r"^(.*): in the result of your other \S+ call \(([^)]*)\), not repeated\.", content, re.MULTILINE
    ):
        if page_id in ids.split(", ") and sibling.call in calls.split(", "):
            return True
    return False


def _messages_named(detail: str) -> int | None:
    """How many message lines a header's detail promises (None: a part, or a cluster)."""
    whole = re.fullmatch(r"(\d+) messages?", detail)
    if whole:
        return int(whole.group(1))
    spans = re.fullmatch(r"messages ([\d, -]+) of \d+", detail)
    if spans:  # a passage group of version 2
        total = 0
        for span in spans.group(1).split(", "):
            a, _, b = span.partition("-")
            total += int(b) - int(a) + 1 if b else 1
        return total
    return None


def same_messages(a: list[BaseMessage], b: list[BaseMessage]) -> str | None:
    """None if equal, else where they first differ."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return (
                f"first difference at {i} of {len(a)} vs {len(b)}: "
                f"got {x.type}:{x.id}:{str(x.content)[:80]!r} "
                f"expected {y.type}:{y.id}:{str(y.content)[:80]!r}"
            )
    extra = a[len(b) :] or b[len(a) :]
    which = "rebuilt has extra" if len(a) > len(b) else "rebuilt is missing"
    return f"{which} {len(extra)} messages at the end ({len(a)} vs {len(b)}): " + ", ".join(
        f"{m.type}:{m.id}:{str(m.content)[:40]!r}" for m in extra[:4]
    )


def order_label(got: list[BaseMessage], want: list[BaseMessage]) -> str:
    """Name a loss that is only a reordering."""

    def key(m):
        return (m.id or "", m.type, repr(m.content))

    if sorted(map(key, got)) == sorted(map(key, want)):
        return " (same messages, another order)"
    return ""


def without_patches(history: list[BaseMessage], expected: list[BaseMessage]) -> list[BaseMessage]:
    """`history` without the error results `create_agent` added for malformed calls `expected` left
    unanswered: it inserts each right after its call, before the results of the call's valid
    siblings (a run that stopped after the tools ran leaves them answered first). The app rewrote
    that part of the history; paging did not reorder it."""
    answered = {m.tool_call_id for m in expected if isinstance(m, ToolMessage)}
    malformed = {c.get("id") for m in expected if isinstance(m, AIMessage) for c in m.invalid_tool_calls}
    patched = malformed - answered
    return [m for m in history if not (isinstance(m, ToolMessage) and m.tool_call_id in patched)]


def tail_of(history: list[BaseMessage], expected: list[BaseMessage]) -> list[BaseMessage]:
    """What `history` has beyond the messages of `expected` (to compare the rest as a multiset)."""
    seen = {(m.id, repr(m.content)) for m in expected}
    return [m for m in history if (m.id, repr(m.content)) not in seen]


def kept_by_remove_all(
    keep: list[BaseMessage],
    history: list[BaseMessage],
    paging: Any,
    get_page: Callable[[str], Page | None],
    get_cluster: Callable[[str], Any],
) -> list[BaseMessage]:
    """The history an app keeps when it sends ``REMOVE_ALL_MESSAGES`` then `keep` (messages of the
    state, `paging` its paging state): the kept bookmarks' pages and the kept messages, in history
    order. Only a bookmark the paging state shows stands for pages; a user's message carrying a
    copied bookmark or cluster mark is just the user's (graph seed 22: view mode, where every
    message of the state is the app's, expanded a spoofed ``{"cluster": "c1"}``)."""
    kept = reconstruct_history(
        keep, get_page, COUNTER, clusters=get_cluster, state=PagingState.from_value(paging)
    )
    # a kept cluster bookmark stands for pages from several places in the history (some after
    # messages kept beside it): keeping messages never reorders them
    return in_history_order(kept, history)


def in_history_order(kept: list[BaseMessage], history: list[BaseMessage]) -> list[BaseMessage]:
    """The messages a rewrite kept (`kept`, bookmarks expanded in place) in the order `history`
    has them: a kept cluster bookmark stands for pages from several places in the history, and
    keeping messages never reorders them. Messages `history` lacks leave the order as it is."""
    where: dict[tuple, list[int]] = {}
    for i, m in enumerate(history):
        where.setdefault((m.id, repr(m.content)), []).append(i)
    found = []
    for m in kept:
        spots = where.get((m.id, repr(m.content)))
        if not spots:
            return list(kept)
        found.append(spots.pop(0))
    return [m for _, m in sorted(zip(found, kept, strict=False), key=lambda x: x[0])]


def stuck_pages(state: PagingState, count) -> dict[str, int]:
    """Resident pages whose bookmark costs as much as the page (evicting one frees nothing), with
    their tokens."""
    return {
        pid: page.tokens
        for pid, page in state.pages.items()
        if count(bookmark_message(pid, page.bookmark, page.ids[0])) >= page.tokens
    }


def stuck_label(state: PagingState, count) -> str:
    """The known cause of an unexplained over-budget step: resident pages whose bookmark costs as
    much as the page, and no cluster to fold them into."""
    stuck = stuck_pages(state, count)
    if stuck and not state.clusters:
        return " (resident pages no smaller than their bookmarks, no cluster to take them)"
    return ""


def library_tokens(view, count) -> int:
    return sum(count(m) for m in view if library_mark(m))


def library_ids(state: PagingState) -> set[str]:
    """The ids of the bookmarks and cluster bookmarks `state` shows: only the paging state says
    which messages are the library's (design.md: text or metadata a user copies is just theirs)."""
    return {s.anchor for s in state.shown.values()} | {c.anchor for c in state.clusters.values()}


TOOK_ID = "it took a stand-in's id this step"
"""Why a step names a message that took a bookmark's or cluster bookmark's id: it is kept the step it
arrives (the app just sent it), the one protection a prompt alone does not show."""


def stand_in_takers(result, taken: set[str] | None = None) -> set[str]:
    """Ids of the units an over-budget step names as protected because a message of theirs took a
    stand-in's id; with `taken` (the stand-ins' ids in the state before the step), only the units
    the oracle confirms hold one of them."""
    return {
        i
        for p in result.protected
        if p.why == TOOK_ID and (taken is None or set(p.ids) & taken)
        for i in p.ids
    }


def over_budget_account(result, budget: int, count) -> str | None:
    """What is wrong with an over-budget step's account of itself, or None. While what nothing may
    evict fits, the prompt fits (`tests/core/test_overshoot.py`) but for resident pages no bigger
    than their bookmarks (evicting them frees nothing: pure seed 12014, 19 tokens over a 60-token
    budget); past it, the step names what it kept, unit by unit, as its warning does, and those units
    are in its view."""
    if result.protected_tokens <= budget:
        stuck = sum(stuck_pages(result.state, count).values())
        if result.protected_tokens + stuck >= result.tokens:
            return None
        return f"protected {result.protected_tokens} <= budget {budget}, yet {result.tokens} tokens (stuck {stuck})"
    named = sum(p.tokens for p in result.protected)
    if not result.protected or named > result.protected_tokens:
        return f"named {len(result.protected)} units, {named} tokens, of {result.protected_tokens} protected"
    keys = {m.id for m in result.view}
    lost = [p.ids[0] for p in result.protected if not set(p.ids) & keys]
    return f"named units not in the view: {lost[:3]}" if lost else None


def over_budget_unexplained(
    tokens: int, generous: int, max_tokens: int, low_water: int | None, overhead: int = 0
) -> bool:
    """An over-budget prompt the protected part does not explain: what nothing may evict is within
    the low-water mark and the rest is over a quarter of the budget. All in message tokens, as the
    library pages (`config.low_water_for`): `overhead` (the system prompt and tool schemas the
    middleware adds) is counted in `tokens` and `max_tokens` and taken out of both here, once."""
    budget = max_tokens - overhead
    low = min(low_water, budget) if low_water else budget * 0.75
    return generous <= low and tokens - overhead - generous > 0.25 * budget


def generous_protected(
    view: list[BaseMessage], count, recalled: set[str] = frozenset(), library: set[str] | None = None
) -> int:
    """Tokens of what no eviction may take, counted generously: system and pinned messages,
    the library's own messages, everything from the newest user message on, unanswered calls,
    and the tool group of a recall result the last recall added or of a message with no id. With
    `library` (the ids of the bookmarks the paging state shows), a human message is a user turn
    unless it is one of them: metadata alone can be copied into a user's message, which is still
    the newest user turn."""
    newest = _newest_user_turn(view, library)
    answered = {m.tool_call_id for m in view if isinstance(m, ToolMessage)}
    kept_calls = _kept_tool_groups(view, recalled)
    total = 0
    for i, m in enumerate(view):
        if (
            i >= newest
            or is_pinned(m)
            or library_mark(m)
            or not m.id
            or m.id in recalled
            or any(c not in answered or c in kept_calls for c in tool_call_ids(m))
            or (isinstance(m, ToolMessage) and m.tool_call_id in kept_calls)
        ):
            total += count(m)
    return total


def _newest_user_turn(view: list[BaseMessage], library: set[str] | None) -> int:
    """The index of the newest user turn in `view` (its length when none; see `generous_protected`)."""
    if library is None:
        return max((i for i, m in enumerate(view) if is_user_turn(m)), default=len(view))
    return max(
        (i for i, m in enumerate(view) if isinstance(m, HumanMessage) and m.id not in library),
        default=len(view),
    )


def _kept_tool_groups(view: list[BaseMessage], recalled: set[str]) -> set:
    """The call ids of the whole tool groups kept: a recall result's, and one holding a message with
    no id (no update can remove it, `step.protect`; the error result `create_agent` remakes for a
    malformed call after a failed run has none)."""
    kept_calls = {
        m.tool_call_id for m in view if isinstance(m, ToolMessage) and (m.id in recalled or not m.id)
    }
    kept_calls |= {c for m in view if not m.id for c in tool_call_ids(m)}
    for m in view:
        if set(tool_call_ids(m)) & kept_calls:
            kept_calls |= set(tool_call_ids(m))
    return kept_calls
