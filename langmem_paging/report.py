"""A static, self-contained HTML report of one thread, for a person to open in a browser.

A timeline of the thread's pages in history order (each with its bookmark, where it stands now:
resident, shown as a bookmark, folded into a cluster, and its exact messages on demand), the
cluster forest, the bookmarks in the context, recalls, and tokens. Inline CSS and a few lines of
vanilla JavaScript (expand or collapse everything); no external assets. Every piece of thread
content is HTML-escaped, so page text holding markup or scripts shows as text and never runs.

Example:
    >>> from langmem_paging.ops import Inspection
    >>> html = render_report(Inspection(thread_id="<t1>", records={}, pages=[], clusters=[], recalls=[]), {})
    >>> "&lt;t1&gt;" in html and "<t1>" not in html
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape

from langchain_core.messages import BaseMessage

from langmem_paging.messages import library_mark
from langmem_paging.ops import ClusterRow, Inspection, PageRow, RecallRow, Verification
from langmem_paging.records import Page, cluster_number, page_number

__all__ = ["render_report"]

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
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0 6px;background:#f6f7f9;padding:4px 6px;border-radius:3px}
.msg .meta{color:#4a5263;font-size:12px}.msg-human .meta{color:#1565c0}.msg-tool .meta{color:#8d6e00}
ul.forest,ul.forest ul{list-style:none;padding-left:18px;margin:2px 0}
ul.forest>li{padding-left:0}.member{margin-right:6px}
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
    if getattr(message, "tool_call_id", None):
        meta.append(f"answers {message.tool_call_id}")
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
    return (f"<div class='msg msg-{_e(message.type)}' data-message-id='{_e(message.id)}'>"
            f"<div class='meta'>{_e(' · '.join(meta))}</div>{calls}{body}</div>")


def _page_html(row: PageRow, page: Page | None, widest: int) -> str:
    status = row.status if row.status != "cluster" else f"in {row.cluster}"
    width = max(2, round(120 * row.tokens / widest)) if widest else 2
    recalled = f"<span>recalled {row.access_count}×</span>" if row.access_count else ""
    messages = "".join(_message_html(m) for m in page.messages) if page is not None else (
        "<p class='bad'>not readable from the store</p>")
    return (
        f"<li class='page status-{_e(row.status)}' id='page-{_e(row.id)}' data-page-id='{_e(row.id)}' "
        f"data-status='{_e(row.status)}'>"
        f"<div class='page-head'><span class='pid'>{_e(row.id)}</span>"
        f"<span class='badge' title='{_e(_STATUS_TEXT.get(row.status, row.status))}'>{_e(status)}</span>"
        f"<span>turn {row.created_turn}</span><span>{row.tokens} tokens "
        f"<span class='bar' style='width:{width}px'></span></span><span>{row.messages} messages</span>"
        f"{recalled}{'<span class=muted>tool result</span>' if row.kind == 'tool_result' else ''}</div>"
        f"<div class='bookmark'><code>{_e(row.bookmark)}</code></div>"
        f"<details><summary>messages</summary>{messages}</details></li>"
    )


def _forest_html(clusters: Sequence[ClusterRow]) -> str:
    by_id = {c.id: c for c in clusters}
    children_of = {c.id: c.children for c in clusters}
    inner = {child for c in clusters for child in c.children if child in by_id}
    roots = [c.id for c in clusters if c.id not in inner]

    def node(cid: str, seen: frozenset) -> str:
        c = by_id[cid]
        pages = [x for x in children_of[cid] if x.startswith("p")]
        subs = [x for x in children_of[cid] if x in by_id and x not in seen]
        members = "".join(f"<a class='member' href='#page-{_e(p)}'>{_e(p)}</a>" for p in pages)
        nested = "".join(node(s, seen | {s}) for s in sorted(subs, key=cluster_number, reverse=True))
        shown = " <span class='badge'>shown in the context</span>" if c.shown else ""
        return (f"<li class='cluster' id='cluster-{_e(cid)}' data-cluster-id='{_e(cid)}'>"
                f"<details{' open' if c.shown else ''}><summary><span class='pid'>{_e(cid)}</span> "
                f"{c.size} page{'' if c.size == 1 else 's'} ({_e(c.span)}){shown} <code>{_e(c.bookmark)}</code></summary>"
                f"{'<div>pages: ' + members + '</div>' if members else ''}"
                f"{'<ul>' + nested + '</ul>' if nested else ''}</details></li>")

    if not roots:
        return "<p class='muted'>No clusters.</p>"
    return "<ul class='forest'>" + "".join(node(r, frozenset({r})) for r in
                                           sorted(roots, key=cluster_number, reverse=True)) + "</ul>"


def _tail_html(info: Inspection, context: Sequence[BaseMessage] | None) -> str:
    if not context:
        return ""
    return (f"<li class='tail' id='context'><div class='page-head'><span class='pid'>context</span>"
            f"<span>{len(context)} messages in the latest checkpoint (bookmarks, resident pages and the live "
            f"tail)</span></div><details><summary>messages</summary>"
            + "".join(_message_html(m) for m in context) + "</details></li>")


def _page_link(page_id: str) -> str:
    return f"<a href='#page-{_e(page_id)}'>{_e(page_id)}</a>"


def _recall_html(row: RecallRow) -> str:
    return (f"<tr class='recall'><td><code>{_e(row.message_id)}</code></td>"
            f"<td>{_e(json.dumps(row.args, ensure_ascii=False))}</td>"
            f"<td>{' '.join(_page_link(p) for p in row.pages) or '-'}</td>"
            f"<td>{_e(row.where)}</td><td>{'reference' if row.shrunk else 'full text'}</td></tr>")


def _verification_html(result: Verification | None) -> str:
    if result is None:
        return "<p class='muted'>Not verified (no checkpoints read).</p>"
    head = (f"<p><span class='{'ok' if result.lossless else 'bad'}' id='lossless'>"
            f"{'Lossless' if result.lossless else 'NOT lossless'}</span>: {result.rebuilt} messages rebuilt "
            f"from {result.pages_used} stored pages and the latest of {result.checkpoints} checkpoints; "
            f"{result.seen} distinct messages seen in checkpoints; {result.user_turns} user turns.</p>")
    issues = "".join(f"<li><code>{_e(i.code)}</code> {_e(i.detail)}</li>" for i in result.issues)
    return head + (f"<ul class='issues'>{issues}</ul>" if issues else "")


def render_report(
    info: Inspection,
    pages: Mapping[str, Page],
    *,
    verification: Verification | None = None,
    context: Sequence[BaseMessage] | None = None,
    title: str | None = None,
) -> str:
    """The report as one HTML document.

    Args:
        info: `inspect_thread`'s result.
        pages: The thread's stored pages by id (their messages are shown).
        verification: `verify_thread`'s result, shown at the top if given.
        context: The latest checkpoint's messages, shown after the pages.
        title: The document title (default names the thread).

    Returns:
        A complete, self-contained HTML document.
    """
    title = title or f"langmem-paging: thread {info.thread_id}"
    cp = info.checkpoint
    widest = max((p.tokens for p in info.pages), default=0)
    paged_tokens = sum(p.tokens for p in info.pages)
    stats = [
        f"<span><b>{len(info.pages)}</b> pages</span>",
        f"<span><b>{len(info.clusters)}</b> clusters</span>",
        f"<span><b>{paged_tokens}</b> tokens in pages</span>",
        f"<span>store records: {_e(', '.join(f'{n} {k}' for k, n in info.records.items()))}</span>",
    ]
    if cp is not None:
        stats += [
            f"<span>view <b>{cp.tokens}</b> of a <b>{cp.budget}</b>-token budget</span>",
            f"<span>{cp.messages} messages in state ({_e(cp.mode)} mode), user turn {cp.turn}</span>",
            f"<span class='muted'>checkpoint {_e(cp.checkpoint_id)} · {_e(cp.created_at)}</span>",
        ]
    legend = "".join(f"<li><span class='badge'>{_e(k)}</span> {_e(v)}</li>" for k, v in _STATUS_TEXT.items()
                     if any(p.status == k for p in info.pages))
    timeline = "".join(_page_html(row, pages.get(row.id), widest) for row in info.pages)
    bookmarks = "".join(f"<li class='bookmark-line'><code>{_e(b)}</code></li>" for b in (cp.bookmarks if cp else []))
    recall_rows = "".join(_recall_html(r) for r in info.recalls)
    accessed = sorted((p for p in info.pages if p.access_count), key=lambda p: (-p.access_count, page_number(p.id)))
    access_rows = "".join(f"<tr><td>{_page_link(p.id)}</td><td>{p.access_count}</td></tr>"
                          for p in accessed)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{_CSS}</style>
</head><body>
<header><h1>Thread <code>{_e(info.thread_id)}</code></h1>
<div class="stats">{''.join(stats)}</div>
<nav><a href="#timeline">Timeline</a><a href="#clusters">Clusters</a><a href="#bookmarks">Bookmarks</a>
<a href="#recalls">Recalls</a><a href="#verification">Verification</a></nav></header>
<main>
<section id="verification"><h2>Verification</h2>{_verification_html(verification)}</section>
<section id="timeline"><h2>Timeline: pages in history order</h2>
<button type="button" onclick="setAll(true)">Expand all</button><button type="button" onclick="setAll(false)">Collapse all</button>
<ul class="legend muted">{legend}</ul>
<ol class="timeline">{timeline or "<li class='muted'>No pages.</li>"}{_tail_html(info, context)}</ol></section>
<section id="clusters"><h2>Cluster forest</h2>{_forest_html(info.clusters)}</section>
<section id="bookmarks"><h2>Bookmarks in the context</h2>
{f'<ul class="bookmarks">{bookmarks}</ul>' if bookmarks else "<p class='muted'>None (or no checkpoint read).</p>"}</section>
<section id="recalls"><h2>Recalls</h2>
{f'<table><tr><th>result message</th><th>asked</th><th>pages returned</th><th>where</th><th>kept as</th></tr>{recall_rows}</table>' if recall_rows else "<p class='muted'>No recall results found.</p>"}
<h3>Access counts</h3>
{f'<table><tr><th>page</th><th>recalls</th></tr>{access_rows}</table>' if access_rows else "<p class='muted'>No page was recalled.</p>"}
</section>
</main>
<script>{_JS}</script>
</body></html>
"""
