"""The HTML report of a real paged thread: escaped, self-contained, and as a browser builds it.

The browser test opens the report in Debian's headless Chromium (``--dump-dom``) and reads the
DOM it built: skipped without a chromium binary, failed instead under CI=true.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from contextlib import closing
from html.parser import HTMLParser

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

from langmem_paging.cli import main
from langmem_paging.core.state import PagingState
from langmem_paging.ops import load_snapshots
from langmem_paging.ops.report import BAR_PX, nice_ceiling
from langmem_paging.storage.page_store import PageStore
from tests.support.ops_thread import INJECTED, TURNS, build_thread

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_thread(tmp_path_factory.mktemp("report") / "thread.sqlite")


@pytest.fixture(scope="module")
def stored(built):
    with closing(sqlite3.connect(built.path, check_same_thread=False, isolation_level=None)) as conn:
        page_store = PageStore(SqliteStore(conn))
        return page_store.list_pages(built.thread_id), page_store.list_clusters(built.thread_id)


@pytest.fixture(scope="module")
def branch(built, stored):
    """The latest checkpoint's paging state, and the pages under each cluster root it shows
    (`PageStore.members`, the store's own walk)."""
    with closing(sqlite3.connect(built.path, check_same_thread=False)) as conn:
        state = PagingState.from_value(
            load_snapshots(SqliteSaver(conn), built.thread_id, lineage=False)[-1].paging
        )
    with closing(sqlite3.connect(built.path, check_same_thread=False, isolation_level=None)) as conn:
        page_store = PageStore(SqliteStore(conn))
        members = {root: page_store.members(built.thread_id, root) for root in state.clusters}
    return state, members


@pytest.fixture(scope="module")
def report(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-out") / "report.html"
    assert main(["report", built.thread_id, "--store", built.uri, "--out", str(out)]) == 0
    return out


class Dom(HTMLParser):
    """Elements by attribute, the title, and the text of elements by class, from an HTML document."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.ancestors: list[list[tuple[str, str]]] = []  # per element: (tag, class) of the open elements
        self.title = ""
        self.scripts: list[str] = []
        self.text_by_class: dict[str, list[str]] = {}
        self._open: list[tuple[str, str | None]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attrs))
        self.ancestors.append([(t, c or "") for t, c in self._open])
        if tag not in ("meta", "br", "link", "input"):
            self._open.append((tag, attrs.get("class")))
            if attrs.get("class"):
                self.text_by_class.setdefault(attrs["class"], []).append("")

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self._open and self._open[-1][0] == "title" and not any(t == "svg" for t, _ in self._open):
            self.title += data  # the document's title, not an SVG mark's tooltip
        if self._open and self._open[-1][0] == "script":
            self.scripts.append(data)
        for _, cls in self._open:
            if cls:
                self.text_by_class[cls][-1] += data

    def with_attr(self, name: str) -> list[str]:
        return [attrs[name] for _, attrs in self.elements if name in attrs]

    def find(self, tag: str | None = None, cls: str | None = None) -> list[tuple[int, dict[str, str]]]:
        """(index, attributes) of elements by tag and by one of their classes."""
        return [
            (i, a)
            for i, (t, a) in enumerate(self.elements)
            if (tag is None or t == tag) and (cls is None or cls in a.get("class", "").split())
        ]

    def inside(self, index: int, cls: str) -> int:
        """How many open elements around element `index` have class `cls`."""
        return sum(1 for _, c in self.ancestors[index] if cls in c.split())


def check_structure(dom: Dom, pages, clusters, state: PagingState, members: dict[str, list[str]]) -> None:
    """The tokens chart, the flat cluster forest, the token bars' scale and the navigation order."""
    # The chart: one mark per model call (each user turn one; the recall question two), the budget line.
    assert len(dom.find("svg", "tokens-chart")) == 1
    marks = [(i, a) for i, a in dom.find("circle", "step-mark") if dom.inside(i, "tokens-chart")]
    assert len(marks) == TURNS + 2
    assert [int(a["data-step"]) for _, a in marks] == list(range(1, TURNS + 3))
    assert {int(a["data-budget"]) for _, a in marks} == {state.budget}
    assert int(marks[-1][1]["data-tokens"]) == state.tokens  # the latest checkpoint's step
    assert all(0 < int(a["data-tokens"]) <= state.budget for _, a in marks)
    assert max(int(a["data-tokens"]) for _, a in marks) > 0.8 * state.budget  # paging kept it near the line
    ((_, line),) = dom.find("polyline", "budget-line")
    assert int(line["data-budget"]) == state.budget
    caption = "".join(dom.text_by_class["chart-caption"])
    assert f"each of the {TURNS + 2} model calls" in caption and f"{state.budget} tokens" in caption

    # The forest: each root once, its member pages flat under it, the clusters folded into it listed flat.
    roots = dom.find("li", "cluster-root")
    assert {a["data-cluster-id"] for _, a in roots} >= set(state.clusters)
    assert all(dom.inside(i, "cluster-root") == 0 for i, _ in roots)  # no root inside another: no staircase
    ends = [i for i, _ in roots[1:]] + [
        len(dom.elements)
    ]  # roots are siblings: one ends where the next starts
    for (i, attrs), end in zip(roots, ends, strict=False):
        listed = [a["data-member-page"] for j, a in dom.find("a", "member") if i < j < end]
        assert listed == sorted(listed, key=lambda p: int(p[1:])) and listed
        if attrs["data-cluster-id"] in members:
            assert listed == members[attrs["data-cluster-id"]]
    subs = dom.find("tr", "subcluster")
    assert all(dom.inside(i, "cluster-root") == 1 for i, _ in subs)
    assert sorted(
        [a["data-cluster-id"] for _, a in roots] + [a["data-cluster-id"] for _, a in subs]
    ) == sorted(n.id for n in clusters)
    assert (
        max(sum(1 for t, _ in dom.ancestors[i] if t in ("ul", "ol")) for i, _ in dom.find(cls="member")) == 1
    )

    # Token bars on one scale, drawn with its axis.
    ((_, scale_el),) = dom.find("div", "bar-scale")
    scale = int(scale_el["data-scale-tokens"])
    assert scale == nice_ceiling(max(p.token_count for p in pages)) >= max(p.token_count for p in pages)
    bars = dom.find("span", "bar")
    assert len(bars) == len(pages)
    for _, bar in bars:
        width = int(re.search(r"width:(\d+)px", bar["style"]).group(1))
        assert width == max(1, round(BAR_PX * int(bar["data-tokens"]) / scale))
    scale_text = "".join(dom.text_by_class["bar-scale"])
    assert "tokens" in scale_text and f"{scale}" in scale_text

    # Navigation in section order.
    sections = [a["id"] for _, a in dom.find("section")]
    nav = [a["href"] for i, a in dom.find("a") if any(t == "nav" for t, _ in dom.ancestors[i])]
    assert nav == [f"#{s}" for s in sections] and sections[:3] == ["verification", "tokens", "timeline"]


def test_report_escapes_page_text_and_loads_nothing_external(report):
    html = report.read_text()
    assert INJECTED not in html and "<script>document.title" not in html
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)  # no external assets
    assert html.count("<script>") == 1  # ours: the expand/collapse helper


def test_report_lists_pages_in_history_order_with_clusters_and_bookmarks(report, stored, branch):
    pages, clusters = stored
    dom = Dom(report.read_text())
    check_structure(dom, pages, clusters, *branch)
    ordered = [p.id for p in sorted(pages, key=lambda p: p.order)]
    assert dom.with_attr("data-page-id") == ordered
    assert sorted(dom.with_attr("data-cluster-id")) == sorted(n.id for n in clusters)
    assert [t.strip() for t in dom.text_by_class["bookmark"]] == [
        p.bookmark for p in sorted(pages, key=lambda p: p.order)
    ]
    assert dom.text_by_class["bookmark-line"], "the context's bookmark lines"
    assert "Lossless" in "".join(dom.text_by_class["ok"])


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and (path := shutil.which(name)):
            return path
    reason = "no chromium binary (apt-get install -y chromium, or set CHROMIUM=/path/to/chrome)"
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def test_report_in_headless_chromium(report, stored, built, branch, tmp_path):
    browser = chromium()
    run = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    dom = Dom(run.stdout)
    pages, clusters = stored

    assert dom.title == f"langmem-paging: thread {built.thread_id}"  # the page's script did not run
    assert sorted(dom.with_attr("data-page-id")) == sorted(p.id for p in pages)
    assert len(dom.with_attr("data-page-id")) == len(pages)
    assert sorted(dom.with_attr("data-cluster-id")) == sorted(n.id for n in clusters)
    texts = "".join(t for cls, ts in dom.text_by_class.items() if cls.startswith("msg") for t in ts)
    assert INJECTED in texts  # shown as text
    assert not any("pwned" in s for s in dom.scripts)
    assert {t.strip() for t in dom.text_by_class["bookmark"]} == {p.bookmark for p in pages}
    check_structure(dom, pages, clusters, *branch)  # as the browser built it: SVG chart, forest, scale, nav
