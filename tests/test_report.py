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
from langgraph.store.sqlite import SqliteStore
from ops_thread import INJECTED, build_thread

from langmem_paging.cli import main
from langmem_paging.store import PageStore

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
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
def report(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-out") / "report.html"
    assert main(["report", built.thread_id, "--store", built.uri, "--out", str(out)]) == 0
    return out


class Dom(HTMLParser):
    """Elements by attribute, the title, and the text of elements by class, from an HTML document."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.title = ""
        self.scripts: list[str] = []
        self.text_by_class: dict[str, list[str]] = {}
        self._open: list[tuple[str, str | None]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attrs))
        if tag not in ("meta", "br", "link", "input"):
            self._open.append((tag, attrs.get("class")))
            if attrs.get("class"):
                self.text_by_class.setdefault(attrs["class"], []).append("")

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self._open and self._open[-1][0] == "title":
            self.title += data
        if self._open and self._open[-1][0] == "script":
            self.scripts.append(data)
        for _, cls in self._open:
            if cls:
                self.text_by_class[cls][-1] += data

    def with_attr(self, name: str) -> list[str]:
        return [attrs[name] for _, attrs in self.elements if name in attrs]


def test_report_escapes_page_text_and_loads_nothing_external(report):
    html = report.read_text()
    assert INJECTED not in html and "<script>document.title" not in html
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)  # no external assets
    assert html.count("<script>") == 1  # ours: the expand/collapse helper


def test_report_lists_pages_in_history_order_with_clusters_and_bookmarks(report, stored):
    pages, clusters = stored
    dom = Dom(report.read_text())
    ordered = [p.id for p in sorted(pages, key=lambda p: p.order)]
    assert dom.with_attr("data-page-id") == ordered
    assert sorted(dom.with_attr("data-cluster-id")) == sorted(n.id for n in clusters)
    assert [t.strip() for t in dom.text_by_class["bookmark"]] == [
        p.bookmark for p in sorted(pages, key=lambda p: p.order)]
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


def test_report_in_headless_chromium(report, stored, built, tmp_path):
    browser = chromium()
    run = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", report.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
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
