"""The invariants checked after each load run, on the database itself (not on timings):

* every thread rebuilds lossless from its latest branch and the store (`verify_thread`), and no
  checkpoint off that branch holds a turn the branch lacks (no turn lost to a concurrent write);
* every turn a client sent (both clients of the shared thread included) is on the latest branch;
* no page number was given two contents (each page record is the content its number was claimed
  for, `langmem_paging_claims`), and no page holds another thread's words or turns;
* a forgotten message's text is nowhere: store records, checkpointed state (`where_text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from langmem_paging import PageStore
from langmem_paging.core.tokens import message_text
from langmem_paging.ops import load_branches, verify_thread, where_text
from tools.deploy.load import Load

MARK = re.compile(r"Zarko(L\w+?)x\d")


@dataclass
class Forgotten:
    """A message forgotten during the load: where, and the text that must be gone."""

    label: str
    key: str
    text: str
    pages: list[str]


def check_load(uri: str, load: Load, forgotten: Forgotten | None = None) -> list[str]:
    """What is wrong after `load` (empty: every invariant holds)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    problems: list[str] = []
    with PostgresStore.from_conn_string(uri) as store, PostgresSaver.from_conn_string(uri) as saver:
        page_store = PageStore(store)
        for label, thread in load.threads.items():
            problems += [f"{label} ({thread}): {p}" for p in _thread(page_store, saver, load, label)]
        skip = {(load.threads[forgotten.label], p) for p in forgotten.pages} if forgotten else set()
        problems += _claims(page_store, uri, list(load.threads.values()), skip)
        if forgotten is not None:
            problems += _forgotten(page_store, saver, load.threads[forgotten.label], forgotten)
    return problems


def _thread(page_store: PageStore, saver, load: Load, label: str) -> list[str]:
    thread = load.threads[label]
    branches = load_branches(saver, thread)
    if not branches.latest:
        return ["no checkpoints"]
    result = verify_thread(page_store, thread, branches.latest, others=branches.others)
    problems = [f"{issue.code}: {issue.detail}" for issue in [*result.issues, *result.warnings]]
    on_branch = {m.id for snapshot in branches.latest for m in snapshot.messages}
    missing = [key for key in load.keys(label) if key not in on_branch]
    if missing:
        problems.append(f"{len(missing)} turn(s) sent are not on the latest branch: {missing[:8]}")
    for page in page_store.list_pages(thread):
        for message in page.messages:
            foreign = {found for found in MARK.findall(message_text(message)) if found != label}
            if foreign or (message.type == "human" and not str(message.id).startswith(f"{label}-")):
                problems.append(
                    f"page {page.id} holds message {message.id} of another thread ({sorted(foreign)})"
                )
    return problems


def _claims(page_store: PageStore, uri: str, threads: list[str], skip: set[tuple[str, str]]) -> list[str]:
    """Each page record is the content its number was claimed for: no number formed twice."""
    import psycopg

    with psycopg.connect(uri) as conn:
        if not conn.execute("SELECT to_regclass('langmem_paging_claims') IS NOT NULL").fetchone()[0]:
            return []
        rows = conn.execute(
            "SELECT thread_id, number, digest FROM langmem_paging_claims WHERE kind = 'p' AND thread_id = ANY(%s)",
            (threads,),
        ).fetchall()
    claimed = {(thread, f"p{number}"): digest for thread, number, digest in rows}
    problems = []
    for thread in threads:
        for page in page_store.list_pages(thread):
            digest = claimed.get((thread, page.id))
            if (thread, page.id) not in skip and digest != page.digest:
                problems.append(f"page {page.id} of {thread}: record digest {page.digest}, claimed {digest}")
    return problems


def _forgotten(page_store: PageStore, saver, thread: str, forgotten: Forgotten) -> list[str]:
    from langmem_paging.ops import load_snapshots

    latest = load_snapshots(saver, thread, lineage=False)
    places = where_text(
        page_store,
        thread,
        forgotten.text,
        paging=latest[-1].paging if latest else None,
        messages=latest[-1].messages if latest else (),
    )
    return [f"forgotten {forgotten.key}: {forgotten.text!r} still in {p.place} {p.where}" for p in places]
