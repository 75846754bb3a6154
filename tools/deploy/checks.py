"""The invariants checked after each load run, on the database itself (not on timings):

* every thread rebuilds lossless from its latest branch and the store (`verify_thread`), and no
  checkpoint off that branch holds a turn the branch lacks (no turn lost to a concurrent write);
* every turn a client sent (both clients of the shared thread included) is on the latest branch;
* no page number was given two contents (each page record is the content its number was claimed
  for, `langmem_paging_claims`), and no page holds another thread's words or turns;
* a forgotten message's text is nowhere: store records, checkpointed state (`where_text`), any text
  column of any table of the database but what a forget does not reach (`NOT_REACHED`);
* a thread deleted through the server leaves no row in the library's tables (`rows_of_thread`).
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
    if forgotten is not None:
        left = rows_holding(uri, forgotten.text, skip=NOT_REACHED)
        problems += [
            f"forgotten {forgotten.key}: {n} row(s) of {t} hold {forgotten.text!r}" for t, n in left.items()
        ]
    return problems


NOT_REACHED = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "runs")
"""What a forget does not reach (docs/operators.md): the checkpointer's history (its latest checkpoint
is checked, `where_text`) and the Agent Server's record of each run's input (what the client sent)."""


def rows_holding(
    uri: str, text: str, *, only_library: bool = False, skip: tuple[str, ...] = ()
) -> dict[str, int]:
    """``schema.table`` -> how many rows hold `text` in a text column, over every table of the
    database (`only_library`: the library's, ``langmem_paging*`` and the store's, which have a
    ``prefix`` column), but those named in `skip`; tables with none left out."""
    import psycopg

    with psycopg.connect(uri) as conn:
        columns = conn.execute(
            "SELECT c.table_schema, c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t USING (table_schema, table_name) "
            "WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') AND t.table_type = 'BASE TABLE' "
            "AND c.data_type IN ('text', 'character varying', 'jsonb', 'json', 'tsvector', 'ARRAY', 'bytea')"
        ).fetchall()
        tables: dict[tuple[str, str], list[str]] = {}
        for schema, table, column, kind in columns:
            if table not in skip:
                tables.setdefault((schema, table), []).append(
                    f'position(%(raw)s in "{column}") > 0'
                    if kind == "bytea"
                    else f'position(%(text)s in "{column}"::text) > 0'
                )
        if only_library:
            tables = {
                (s, t): cols
                for (s, t), cols in tables.items()
                if t.startswith("langmem_paging") or any('"prefix"' in c for c in cols)
            }
        found = {}
        for (schema, table), matches in tables.items():
            query = f'SELECT count(*) FROM "{schema}"."{table}" WHERE {" OR ".join(matches)}'
            (count,) = conn.execute(query, {"text": text, "raw": text.encode()}).fetchone()
            if count:
                found[f"{schema}.{table}"] = count
    return found


def rows_of_thread(uri: str, thread: str) -> dict[str, int]:
    """The library's rows that name `thread` (its id in a thread column or a store namespace)."""
    return rows_holding(uri, thread, only_library=True)


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
