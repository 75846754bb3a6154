"""A static, self-contained HTML report of one thread, for a person to open in a browser.

The tokens the model received at each model call against the budget (an inline SVG chart), a
timeline of the thread's pages in history order (each with its bookmark, its size on a token
scale, where it stands now: resident, shown as a bookmark, folded into a cluster, and its exact
messages on demand), the cluster forest (each root with its member pages, flat), the bookmarks in
the context, and recalls. Inline CSS and a few lines of vanilla JavaScript (expand or collapse
everything); no external assets. Every piece of thread content is HTML-escaped, so page text
holding markup or scripts shows as text and never runs.

Example:
    >>> from langmem_paging.ops import Inspection
    >>> html = render_report(Inspection(thread_id="<t1>", records={}, pages=[], clusters=[], recalls=[]), {})
    >>> "&lt;t1&gt;" in html and "<t1>" not in html
    True
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from langchain_core.messages import BaseMessage

from langmem_paging.core.messages import library_mark
from langmem_paging.core.records import Page, cluster_number, page_number
from langmem_paging.ops import ClusterRow, Inspection, PageRow, PagingStep, RecallRow, Verification

__all__ = ["check_report_path", "nice_ceiling", "render_report", "tokens_chart"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header,main{max-width:1100px;margin:0 auto;padding:12px 20px}
header{background:#fff;border-bottom:1px solid #dde1e7;max-width:none}
h1{font-size:20px;margin:4px 0}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #dde1e7}
.stats{display:flex;flex-wrap:wrap;gap:8px 20px;color:#4a5263}.stats b{color:#1d2330}
.ok{color:#0a7a3e;font-weight:600}.bad{color:#b3261e;font-weight:600}
nav a{margin-right:14px}button{font:inherit;margin:6px 8px 6px 0}
ol.timeline{list-style:none;padding:0;margin:0}
.page,.tail{background:#fff;border:1px solid #dde1e7;border-left:5px solid #9aa3b2;border-radius:4px;
  margin:6px 0;padding:6px 10px}
.status-resident{border-left-color:#2e7d32}.status-bookmark{border-left-color:#1565c0}
.status-digest{border-left-color:#00838f}.status-cluster{border-left-color:#6a1b9a}
.status-stub{border-left-color:#8d6e00}.status-other-branch{opacity:.6;border-left-style:dashed}.status-unshown{border-left-color:#b3261e}
.page-head{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:baseline}
.pid{font-weight:700;font-family:ui-monospace,monospace}.badge{border-radius:9px;padding:0 8px;background:#eef0f4}
.bar{display:inline-block;height:6px;background:#9aa3b2;border-radius:3px;vertical-align:middle}
.bar-scale{display:flex;align-items:center;gap:8px}.bar-scale svg{overflow:visible}
figure{margin:0;background:#fff;border:1px solid #dde1e7;border-radius:4px;padding:8px}
figcaption{color:#4a5263;font-size:12.5px;margin-top:4px}svg text{font:11px system-ui,sans-serif;fill:#4a5263}
.step-mark{fill:#1565c0}.step-mark.over{fill:#b3261e}.tokens-line{fill:none;stroke:#1565c0;stroke-width:1.5}
.budget-line{fill:none;stroke:#b3261e;stroke-width:1.5;stroke-dasharray:6 4}.axis{stroke:#4a5263}.grid{stroke:#eef0f4}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0 6px;background:#f6f7f9;padding:4px 6px;border-radius:3px}
.msg .meta{color:#4a5263;font-size:12px}.msg-human .meta{color:#1565c0}.msg-tool .meta{color:#8d6e00}
ul.forest{list-style:none;padding:0;margin:2px 0}
.cluster-root{background:#fff;border:1px solid #dde1e7;border-left:5px solid #6a1b9a;border-radius:4px;margin:6px 0;padding:6px 10px}
.members{display:flex;flex-wrap:wrap;gap:2px 8px}.member{font-family:ui-monospace,monospace}
table.subclusters td{font-size:12.5px}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #dde1e7;padding:3px 8px;text-align:left}
.muted{color:#6b7385}
"""

_JS = """
function setAll(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
"""

_STATUS_TEXT = {
    "resident": "resident: its messages are in the context",
    "bookmark": "evicted, shown by its bookmark",
    "digest": "evicted, shown by a digest",
    "cluster": "evicted, folded into a cluster bookmark",
    "stub": "a large tool result paged on arrival, shown by its stub",
    "other-branch": "made by another branch (fork or time travel)",
    "unshown": "stored, but nothing in the context points at it",
    "-": "no checkpoint read",
}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _content(message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return json.dumps(message.content, indent=2, ensure_ascii=False, default=str)


def _message_html(message: BaseMessage) -> str:
    meta = [message.type, f"id {message.id}"]
    if message.name:
        meta.append(f"name {message.name}")
    if call_id := getattr(message, "tool_call_id", None):
        meta.append(f"answers {call_id}")
    mark = library_mark(message)
    if mark.get("shrunk"):
        meta.append("recall result, kept as a reference")
    calls = "".join(
        f"<div class='meta'>calls {_e(c.get('name'))}({_e(json.dumps(c.get('args', {}), ensure_ascii=False))})"
        f" <span class='muted'>{_e(c.get('id'))}</span></div>"
        for c in getattr(message, "tool_calls", None) or []
    )
    text = _content(message)
    body = f"<pre>{_e(text)}</pre>" if text else ""
    return (
        f"<div class='msg msg-{_e(message.type)}' data-message-id='{_e(message.id)}'>"
        f"<div class='meta'>{_e(' · '.join(meta))}</div>{calls}{body}</div>"
    )


BAR_PX = 120
"""Width of a token bar at the top of the timeline's scale."""


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above `value` (an axis' end).

    Example:
        >>> [nice_ceiling(v) for v in (0, 7, 70, 71, 660, 1001)]
        [1, 10, 100, 100, 1000, 2000]
        >>> nice_ceiling(230)
        250
    """
    if value <= 0:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            nice = step * power
            return int(nice) if float(nice).is_integer() else nice
    return int(10 * power)  # pragma: no cover - the loop ends at 10 * power >= value


def _bar_scale(scale: int) -> str:
    """The token bars' scale: an axis under a full-width bar, 0 to `scale` tokens."""
    ticks = "".join(
        f"<line class='axis' x1='{x}' y1='0' x2='{x}' y2='5'/>"
        f"<text x='{x}' y='17' text-anchor='middle'>{v:g}</text>"
        for v, x in ((v, round(BAR_PX * v / scale)) for v in (0, scale / 2, scale))
    )
    return (
        f"<div class='bar-scale' data-scale-tokens='{scale}'><span>token bars:</span>"
        f"<svg width='{BAR_PX + 40}' height='20' viewBox='-10 0 {BAR_PX + 40} 20' role='img' "
        f"aria-label='bar scale, 0 to {scale} tokens'><line class='axis' x1='0' y1='0' x2='{BAR_PX}' y2='0'/>"
        f"{ticks}</svg><span>tokens</span></div>"
    )


def _page_html(row: PageRow, page: Page | None, scale: int) -> str:
    status = row.status if row.status != "cluster" else f"in {row.cluster}"
    width = max(1, round(BAR_PX * row.tokens / scale))
    recalled = f"<span>recalled {row.access_count}×</span>" if row.access_count else ""
    messages = (
        "".join(_message_html(m) for m in page.messages)
        if page is not None
        else ("<p class='bad'>not readable from the store</p>")
    )
    return (
        f"<li class='page status-{_e(row.status)}' id='page-{_e(row.id)}' data-page-id='{_e(row.id)}' "
        f"data-status='{_e(row.status)}'>"
        f"<div class='page-head'><span class='pid'>{_e(row.id)}</span>"
        f"<span class='badge' title='{_e(_STATUS_TEXT.get(row.status, row.status))}'>{_e(status)}</span>"
        f"<span>turn {row.created_turn}</span><span>{row.tokens} tokens "
        f"<span class='bar' data-tokens='{row.tokens}' style='width:{width}px' title='{row.tokens} tokens'></span>"
        f"</span><span>{row.messages} messages</span>"
        f"{recalled}{'<span class=muted>tool result</span>' if row.kind == 'tool_result' else ''}</div>"
        f"<div class='bookmark'><code>{_e(row.bookmark)}</code></div>"
        f"<details><summary>messages</summary>{messages}</details></li>"
    )


def _forest_html(clusters: Sequence[ClusterRow], statuses: Mapping[str, str]) -> str:
    """Each cluster root with its member pages flat, and the clusters folded into it in one table.

    Clusters fold one into the next (c2 holds c1 and p2, c3 holds c2 and p3, ...), so drawn as
    nested trees they make a staircase as deep as the thread is long; a root's members are what a
    reader wants, and the merge history is a flat list.
    """
    by_id = {c.id: c for c in clusters}
    roots = [c.id for c in clusters if c.root is None or c.root not in by_id]
    folded: dict[str, list[ClusterRow]] = {r: [] for r in roots}
    for c in clusters:
        if c.id not in folded:
            folded[c.root].append(c)  # type: ignore[index]

    def pages_under(cid: str) -> list[str]:
        pages, stack, seen = set(), [cid], set()
        while stack:
            node = by_id.get(stack.pop())
            if node is None or node.id in seen:
                continue
            seen.add(node.id)
            for child in node.children:
                (
                    stack.append(child)
                    if child in by_id
                    else pages.add(child)
                    if child.startswith("p")
                    else None
                )
        return sorted(pages, key=page_number)

    def root_html(cid: str) -> str:
        c = by_id[cid]
        members = pages_under(cid)
        links = "".join(
            f"<a class='member status-{_e(statuses.get(p, '-'))}' data-member-page='{_e(p)}' "
            f"href='#page-{_e(p)}'>{_e(p)}</a>"
            for p in members
        )
        rows = "".join(
            f"<tr class='subcluster' id='cluster-{_e(f.id)}' data-cluster-id='{_e(f.id)}' data-root='{_e(cid)}'>"
            f"<td class='pid'>{_e(f.id)}</td><td>{f.size}</td><td>{_e(f.span)}</td><td><code>{_e(f.bookmark)}</code></td></tr>"
            for f in sorted(folded[cid], key=lambda f: cluster_number(f.id), reverse=True)
        )
        history = (
            (
                f"<details><summary>folded into it: {len(folded[cid])} earlier cluster"
                f"{'' if len(folded[cid]) == 1 else 's'}</summary><table class='subclusters'><tr><th>cluster</th>"
                f"<th>pages</th><th>span</th><th>bookmark</th></tr>{rows}</table></details>"
            )
            if rows
            else ""
        )
        shown = " <span class='badge'>shown in the context</span>" if c.shown else ""
        return (
            f"<li class='cluster-root' id='cluster-{_e(cid)}' data-cluster-id='{_e(cid)}'>"
            f"<div class='page-head'><span class='pid'>{_e(cid)}</span><span>{c.size} page"
            f"{'' if c.size == 1 else 's'} ({_e(c.span)})</span>{shown}</div>"
            f"<div class='bookmark-of-cluster'><code>{_e(c.bookmark)}</code></div>"
            f"<div class='members'><span class='muted'>pages:</span>{links}</div>{history}</li>"
        )

    if not roots:
        return "<p class='muted'>No clusters.</p>"
    order = sorted(roots, key=lambda r: (not by_id[r].shown, -cluster_number(r)))
    return "<ul class='forest'>" + "".join(root_html(r) for r in order) + "</ul>"


@dataclass(frozen=True)
class _ChartFrame:
    """Where a chart's plot area lies and how values map onto it."""

    width: int
    height: int
    steps: int
    y_max: float
    left: int = 56
    right: int = 78
    top: int = 12
    bottom: int = 40

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom

    def x(self, i: float) -> float:
        """Centre of step `i` (1-based): bands of equal width."""
        return round(self.left + (i - 0.5) * self.plot_w / self.steps, 1)

    def y(self, value: float) -> float:
        return round(self.top + self.plot_h * (1 - value / self.y_max), 1)


def tokens_chart(steps: Sequence[PagingStep], *, width: int = 760, height: int = 260) -> str:
    """An inline SVG chart: the tokens the model received at each model call (one mark per step)
    against the budget line, in a figure whose caption says where the numbers come from.

    Hand-written SVG, not matplotlib: matplotlib measured 20-40x slower for 200 calls (and a 1-2 s
    import), needs the `evals` extra, and cannot give each mark its data-* attributes and hover title.

    Example:
        >>> html = tokens_chart([PagingStep(1, 1, 120, 500, "a"), PagingStep(2, 2, 510, 500, "b")])
        >>> html.count("class='step-mark"), html.count("class='step-mark over'"), "class='budget-line'" in html
        (2, 1, True)
    """
    if not steps:
        return (
            "<p class='muted' id='tokens-chart-missing'>No tokens per model call: no checkpoint with paging "
            "state was read (pass the checkpointer's URI with --checkpoints).</p>"
        )
    frame = _ChartFrame(
        width,
        height,
        len(steps),
        nice_ceiling(max(max(s.tokens for s in steps), max(s.budget for s in steps)) * 1.05),
    )
    svg = (
        f"<svg class='tokens-chart' width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img' "
        f"aria-label='tokens the model received per model call, against the budget'>"
        f"{_chart_axes(frame)}{_chart_lines(frame, steps)}</svg>"
    )
    return f"<figure id='tokens-figure'>{svg}<figcaption class='chart-caption'>{_e(_chart_caption(steps))}</figcaption></figure>"


def _chart_axes(f: _ChartFrame) -> str:
    """Grid, axes, ticks and axis labels."""
    grid = "".join(
        f"<line class='grid' x1='{f.left}' x2='{f.left + f.plot_w}' y1='{f.y(v)}' y2='{f.y(v)}'/>"
        f"<text x='{f.left - 6}' y='{f.y(v) + 4}' text-anchor='end'>{v:g}</text>"
        for v in (f.y_max * k / 5 for k in range(6))
    )
    every = max(1, int(nice_ceiling(f.steps / 10)))
    ticks = [1] + [i for i in range(every, f.steps + 1, every) if i > 1]
    bottom = f.top + f.plot_h
    xt = "".join(
        f"<line class='axis' x1='{f.x(i)}' x2='{f.x(i)}' y1='{bottom}' y2='{bottom + 4}'/>"
        f"<text x='{f.x(i)}' y='{bottom + 16}' text-anchor='middle'>{i}</text>"
        for i in ticks
    )
    middle = f.top + f.plot_h / 2
    return (
        f"{grid}<line class='axis' x1='{f.left}' x2='{f.left}' y1='{f.top}' y2='{bottom}'/>"
        f"<line class='axis' x1='{f.left}' x2='{f.left + f.plot_w}' y1='{bottom}' y2='{bottom}'/>{xt}"
        f"<text x='14' y='{middle}' text-anchor='middle' transform='rotate(-90 14 {middle})'>tokens</text>"
        f"<text x='{f.left + f.plot_w / 2}' y='{f.height - 6}' text-anchor='middle'>model call (paging step "
        f"before it)</text>"
    )


def _chart_lines(f: _ChartFrame, steps: Sequence[PagingStep]) -> str:
    """The budget line (a step per model call), the tokens line and one mark per call."""
    band = f.plot_w / f.steps
    budget_points = " ".join(
        f"{round(f.x(s.step) - band / 2, 1)},{f.y(s.budget)} "
        f"{round(f.x(s.step) + band / 2, 1)},{f.y(s.budget)}"
        for s in steps
    )
    token_points = " ".join(f"{f.x(s.step)},{f.y(s.tokens)}" for s in steps)
    marks = "".join(
        f"<circle class='step-mark{' over' if s.tokens > s.budget else ''}' cx='{f.x(s.step)}' cy='{f.y(s.tokens)}' "
        f"r='{3 if f.steps <= 150 else 2}' data-step='{s.step}' data-turn='{s.turn}' data-tokens='{s.tokens}' "
        f"data-budget='{s.budget}'><title>model call {s.step} (user turn {s.turn}): {s.tokens} tokens of a "
        f"{s.budget}-token budget</title></circle>"
        for s in steps
    )
    last = steps[-1]
    return (
        f"<polyline class='budget-line' data-budget='{last.budget}' points='{budget_points}'/>"
        f"<text x='{f.left + f.plot_w + 4}' y='{f.y(last.budget) + 4}'>budget {last.budget}</text>"
        f"<polyline class='tokens-line' points='{token_points}'/>{marks}"
    )


def _chart_caption(steps: Sequence[PagingStep]) -> str:
    n = len(steps)
    over = sum(1 for s in steps if s.tokens > s.budget)
    peak = max(steps, key=lambda s: (s.tokens, -s.step))
    budgets = sorted({s.budget for s in steps})
    budget_text = f"{budgets[0]}" if len(budgets) == 1 else f"{budgets[0]} to {budgets[-1]}"
    return (
        f"Tokens of the messages the model received at each of the {n} model calls the checkpoints record "
        f"(dots, red when over the budget), against the message budget (dashed: {budget_text} tokens, that is "
        f"max_tokens minus the system prompt and the tool schemas, which neither line counts). From the paging "
        f"state each checkpoint holds (tokens and budget of the paging step before the call); calls a run did "
        f"not checkpoint are missing. {over} of {n} calls over the budget; the most was {peak.tokens} tokens "
        f"at call {peak.step} (user turn {peak.turn})."
    )


def _tail_html(info: Inspection, context: Sequence[BaseMessage] | None) -> str:
    if not context:
        return ""
    return (
        f"<li class='tail' id='context'><div class='page-head'><span class='pid'>context</span>"
        f"<span>{len(context)} messages in the latest checkpoint (bookmarks, resident pages and the live "
        f"tail)</span></div><details><summary>messages</summary>"
        + "".join(_message_html(m) for m in context)
        + "</details></li>"
    )


def _page_link(page_id: str) -> str:
    return f"<a href='#page-{_e(page_id)}'>{_e(page_id)}</a>"


def _recall_html(row: RecallRow) -> str:
    return (
        f"<tr class='recall'><td><code>{_e(row.message_id)}</code></td>"
        f"<td>{_e(json.dumps(row.args, ensure_ascii=False))}</td>"
        f"<td>{' '.join(_page_link(p) for p in row.pages) or '-'}</td>"
        f"<td>{_e(row.where)}</td><td>{'reference' if row.shrunk else 'full text'}</td></tr>"
    )


def _verification_html(result: Verification | None) -> str:
    if result is None:
        return "<p class='muted'>Not verified (no checkpoints read).</p>"
    head = (
        f"<p><span class='{'ok' if result.lossless else 'bad'}' id='lossless'>"
        f"{'Lossless' if result.lossless else 'NOT lossless'}</span>: {result.rebuilt} messages rebuilt "
        f"from {result.pages_used} stored pages and the latest of {result.checkpoints} checkpoints; "
        f"{result.seen} distinct messages seen in checkpoints; {result.user_turns} user turns.</p>"
    )
    issues = "".join(f"<li><code>{_e(i.code)}</code> {_e(i.detail)}</li>" for i in result.issues)
    return head + (f"<ul class='issues'>{issues}</ul>" if issues else "")


def check_report_path(path: str | os.PathLike[str]) -> None:
    """Where a report is to be written can be written, checked before the thread is read.

    Raises:
        ValueError: Naming the path and what is wrong with it.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise ValueError(
            f"cannot write the report to {str(path)!r}: it is a directory; pass a file, e.g. "
            f"--out {target / 'report.html'}"
        )
    if not parent.is_dir():
        raise ValueError(
            f"cannot write the report to {str(path)!r}: the directory {str(parent)!r} does not exist "
            "(create it first, or pass --out in an existing directory)"
        )
    if not os.access(parent, os.W_OK):
        raise ValueError(
            f"cannot write the report to {str(path)!r}: the directory {str(parent)!r} is not writable"
        )


def render_report(
    info: Inspection,
    pages: Mapping[str, Page],
    *,
    verification: Verification | None = None,
    context: Sequence[BaseMessage] | None = None,
    steps: Sequence[PagingStep] | None = None,
    title: str | None = None,
) -> str:
    """The report as one HTML document.

    Args:
        info: `inspect_thread`'s result.
        pages: The thread's stored pages by id (their messages are shown).
        verification: `verify_thread`'s result, shown at the top if given.
        context: The latest checkpoint's messages, shown after the pages.
        steps: The model calls' tokens and budgets (`paging_steps` of the checkpoints), charted.
        title: The document title (default names the thread).

    Returns:
        A complete, self-contained HTML document.
    """
    title = title or f"langmem-paging: thread {info.thread_id}"
    sections = [
        ("verification", "Verification", _verification_html(verification)),
        ("tokens", "Tokens per model call", tokens_chart(steps or [])),
        ("timeline", "Timeline: pages in history order", _timeline_html(info, pages, context)),
        ("clusters", "Cluster forest", _forest_html(info.clusters, {p.id: p.status for p in info.pages})),
        ("bookmarks", "Bookmarks in the context", _bookmarks_html(info)),
        ("recalls", "Recalls", _recalls_html(info)),
    ]
    nav = "".join(f'<a href="#{sid}">{_e(heading.split(":")[0])}</a>' for sid, heading, _ in sections)
    body = "\n".join(
        f'<section id="{sid}"><h2>{_e(heading)}</h2>{html}</section>' for sid, heading, html in sections
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{_CSS}</style>
</head><body>
<header><h1>Thread <code>{_e(info.thread_id)}</code></h1>
<div class="stats">{"".join(_stats(info))}</div>
<nav>{nav}</nav></header>
<main>
{body}
</main>
<script>{_JS}</script>
</body></html>
"""


def _stats(info: Inspection) -> list[str]:
    cp = info.checkpoint
    stats = [
        f"<span><b>{len(info.pages)}</b> pages</span>",
        f"<span><b>{len(info.clusters)}</b> clusters</span>",
        f"<span><b>{sum(p.tokens for p in info.pages)}</b> tokens in pages</span>",
        f"<span>store records: {_e(', '.join(f'{n} {k}' for k, n in info.records.items()))}</span>",
    ]
    if cp is not None:
        stats += [
            f"<span>view <b>{cp.tokens}</b> of a <b>{cp.budget}</b>-token budget</span>",
            f"<span>{cp.messages} messages in state ({_e(cp.mode)} mode), user turn {cp.turn}</span>",
            f"<span class='muted'>checkpoint {_e(cp.checkpoint_id)} · {_e(cp.created_at)}</span>",
        ]
    return stats


def _timeline_html(info: Inspection, pages: Mapping[str, Page], context: Sequence[BaseMessage] | None) -> str:
    scale = int(nice_ceiling(max((p.tokens for p in info.pages), default=0)))
    legend = "".join(
        f"<li><span class='badge'>{_e(k)}</span> {_e(v)}</li>"
        for k, v in _STATUS_TEXT.items()
        if any(p.status == k for p in info.pages)
    )
    timeline = "".join(_page_html(row, pages.get(row.id), scale) for row in info.pages)
    return (
        '<button type="button" onclick="setAll(true)">Expand all</button>'
        '<button type="button" onclick="setAll(false)">Collapse all</button>'
        f'{_bar_scale(scale)}<ul class="legend muted">{legend}</ul>'
        f'<ol class="timeline">{timeline or "<li class=muted>No pages.</li>"}{_tail_html(info, context)}</ol>'
    )


def _bookmarks_html(info: Inspection) -> str:
    lines = info.checkpoint.bookmarks if info.checkpoint else []
    bookmarks = "".join(f"<li class='bookmark-line'><code>{_e(b)}</code></li>" for b in lines)
    return (
        f'<ul class="bookmarks">{bookmarks}</ul>'
        if bookmarks
        else "<p class='muted'>None (or no checkpoint read).</p>"
    )


def _recalls_html(info: Inspection) -> str:
    recall_rows = "".join(_recall_html(r) for r in info.recalls)
    accessed = sorted(
        (p for p in info.pages if p.access_count), key=lambda p: (-p.access_count, page_number(p.id))
    )
    access_rows = "".join(f"<tr><td>{_page_link(p.id)}</td><td>{p.access_count}</td></tr>" for p in accessed)
    return (
        (
            f"<table><tr><th>result message</th><th>asked</th><th>pages returned</th><th>where</th><th>kept as</th>"
            f"</tr>{recall_rows}</table>"
            if recall_rows
            else "<p class='muted'>No recall results found.</p>"
        )
        + "<h3>Access counts</h3>"
        + (
            f"<table><tr><th>page</th><th>recalls</th></tr>{access_rows}</table>"
            if access_rows
            else "<p class='muted'>No page was recalled.</p>"
        )
    )
