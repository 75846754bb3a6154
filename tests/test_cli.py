"""The ``langmem-paging`` operator commands on a real paged thread (create_agent + PagingMiddleware
on SQLite; one test on PostgreSQL), run through `langmem_paging.cli.main`."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from contextlib import closing, contextmanager

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore
from ops_thread import INJECTED, TURNS, build_thread, build_tool_thread, run_thread
from postgres_server import postgres_uri_fixture  # noqa: F401  (registers the postgres_uri fixture)

from langmem_paging.cli import main
from langmem_paging.messages import dump_messages
from langmem_paging.ops import export_records, load_snapshots, record_counts
from langmem_paging.state import PagingState
from langmem_paging.store import KINDS, PageStore, thread_namespace


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One thread for the read-only tests (copy it before changing anything)."""
    return build_thread(tmp_path_factory.mktemp("cli") / "thread.sqlite")


@pytest.fixture
def thread(built, tmp_path):
    """A private copy of the built thread, for tests that change it."""
    path = tmp_path / "thread.sqlite"
    shutil.copyfile(built.path, path)
    return type(built)(path=path, thread_id=built.thread_id, user_texts=built.user_texts)


@contextmanager
def sqlite_store(path):
    with closing(sqlite3.connect(path, check_same_thread=False, isolation_level=None)) as conn:
        store = SqliteStore(conn)
        store.setup()
        yield store


@contextmanager
def sqlite_saver(path):
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        yield SqliteSaver(conn)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def latest_paging(built):
    with sqlite_saver(built.path) as saver:
        return load_snapshots(saver, built.thread_id, lineage=False)[-1].paging


# -- inspect -----------------------------------------------------------------------------------------


def test_inspect_lists_every_page_and_cluster_and_the_checkpoint(built, capsys):
    with sqlite_store(built.path) as store:
        pages = PageStore(store).list_pages(built.thread_id)
        clusters = PageStore(store).list_clusters(built.thread_id)
    assert len(pages) >= 10 and clusters, "the sample thread should have pages and clusters"

    code, out, _ = run(capsys, "inspect", built.thread_id, "--store", built.uri)

    assert code == 0
    table = out.split("clusters (")[0]
    assert [line.split()[0] for line in table.splitlines()[4:] if line.strip()] == [p.id for p in pages]
    for node in clusters:
        assert f"\n{node.id} " in out
    assert "latest checkpoint" in out and "replace mode" in out
    assert "cluster roots: c" in out and "shown as bookmarks: p" in out


def test_inspect_json_agrees_with_the_page_store_and_the_checkpoint(built, capsys):
    code, out, _ = run(capsys, "inspect", built.thread_id, "--store", built.uri, "--json")
    assert code == 0
    info = json.loads(out)
    state = PagingState.from_value(latest_paging(built))

    with sqlite_store(built.path) as store:
        page_store = PageStore(store)
        for row in info["pages"]:
            assert row["cluster"] == page_store.find(built.thread_id, row["id"], state=state)
            page = page_store.get(built.thread_id, row["id"])
            assert (row["tokens"], row["messages"], row["bookmark"]) == (
                page.token_count, len(page.messages), page.bookmark)
        assert info["records"] == record_counts(store, built.thread_id)
    statuses = {row["id"]: row["status"] for row in info["pages"]}
    assert {p for p, s in statuses.items() if s == "bookmark"} == set(state.shown)
    assert {p for p, s in statuses.items() if s == "resident"} == set(state.pages)
    assert {p for p, s in statuses.items() if s == "cluster"} == {
        p for members in info["checkpoint"]["clusters"].values() for p in members}
    assert set(info["checkpoint"]["clusters"]) == set(state.clusters)
    assert (info["checkpoint"]["tokens"], info["checkpoint"]["budget"]) == (state.tokens, state.budget)
    recall = [r for r in info["recalls"] if r["pages"] == ["p1"]]
    assert recall and recall[0]["args"] == {"page_ids": ["p1"]}
    assert statuses and next(r for r in info["pages"] if r["id"] == "p1")["access_count"] == 1


def test_inspect_reads_a_relative_sqlite_uri_and_a_store_only_file(built, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(built.path.parent)
    code, out, _ = run(capsys, "inspect", built.thread_id, "--store", f"sqlite:///{built.path.name}")
    assert code == 0 and "latest checkpoint" in out

    code, out, _ = run(capsys, "inspect", built.thread_id, "--store", built.uri, "--checkpoints", "none")
    assert code == 0 and "checkpoint: none read" in out and "p1 " in out


def test_unreachable_stores_are_clear_errors(built, capsys, tmp_path, monkeypatch):
    code, _, err = run(capsys, "inspect", "t", "--store", f"sqlite:///{tmp_path / 'missing.sqlite'}")
    assert code == 2 and "No SQLite file" in err
    assert not (tmp_path / "missing.sqlite").exists()  # looking never creates a database

    code, _, err = run(capsys, "inspect", "t", "--store", "mysql://db")
    assert code == 2 and "Available: 'postgres', 'postgresql', 'sqlite'" in err

    code, _, err = run(capsys, "inspect", "no-such-thread", "--store", built.uri)
    assert code == 1 and "no records" in err

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the postgres extra were not installed
    code, _, err = run(capsys, "inspect", "t", "--store", "postgresql://u@127.0.0.1:1/db")
    assert code == 2 and 'pip install "langmem-paging[postgres]"' in err


# -- show ----------------------------------------------------------------------------------------------


def test_show_prints_a_pages_exact_messages(built, capsys):
    with sqlite_store(built.path) as store:
        page = next(p for p in PageStore(store).list_pages(built.thread_id)
                    if any(m.content == INJECTED for m in p.messages))

    code, out, _ = run(capsys, "show", built.thread_id, page.id, "--store", built.uri)
    assert code == 0
    assert f"\n{INJECTED}\n" in out
    for message in page.messages:
        assert f"id={message.id}" in out and f"\n{message.content}\n" in out

    code, out, _ = run(capsys, "show", built.thread_id, page.id, "--store", built.uri, "--json")
    assert code == 0 and json.loads(out) == dump_messages(page.messages)


def test_show_a_cluster_and_an_unknown_page(built, capsys):
    code, out, _ = run(capsys, "show", built.thread_id, "c1", "--store", built.uri, "--json")
    assert code == 0 and json.loads(out)["members"] == ["p1"]
    code, _, err = run(capsys, "show", built.thread_id, "p999", "--store", built.uri)
    assert code == 1 and "no page 'p999'" in err


# -- verify ----------------------------------------------------------------------------------------------


def test_verify_finds_the_thread_lossless(built, capsys):
    code, out, _ = run(capsys, "verify", built.thread_id, "--store", built.uri, "--json")
    result = json.loads(out)
    assert code == 0 and result["lossless"] and result["issues"] == []
    assert result["user_turns"] == TURNS + 1 == len(built.user_texts)
    assert result["rebuilt"] == result["seen"] > 2 * TURNS

    code, out, _ = run(capsys, "verify", built.thread_id, "--store", built.uri)
    assert code == 0 and "LOSSLESS" in out


def test_verify_fails_when_a_page_record_is_deleted(thread, capsys):
    with sqlite_store(thread.path) as store:
        store.delete(thread_namespace(thread.thread_id, "pages"), "p5")

    code, out, _ = run(capsys, "verify", thread.thread_id, "--store", thread.uri)

    assert code == 1 and "NOT LOSSLESS" in out
    assert "missing-page: page p5" in out and "unresolved-bookmark" in out and "lost:" in out


def test_verify_fails_when_a_stored_message_was_altered(thread, capsys):
    with sqlite_store(thread.path) as store:
        page_store = PageStore(store)
        page = page_store.get(thread.thread_id, "p3")
        page.messages[0] = page.messages[0].model_copy(update={"content": "something else"})
        page_store.put(thread.thread_id, page)

    code, out, _ = run(capsys, "verify", thread.thread_id, "--store", thread.uri)

    assert code == 1 and f"changed: message {page.messages[0].id}" in out


def test_verify_without_checkpoints_fails(thread, capsys):
    code, out, _ = run(capsys, "verify", thread.thread_id, "--store", thread.uri, "--checkpoints", "none")
    assert code == 1 and "no-checkpoint" in out


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_a_thread_with_paged_tool_results_and_shrunk_recalls_verifies(mode, tmp_path, capsys):
    built = build_tool_thread(tmp_path / "tools.sqlite", mode=mode)

    code, out, _ = run(capsys, "verify", built.thread_id, "--store", built.uri, "--json")
    result = json.loads(out)
    assert code == 0 and result["lossless"], result["issues"]
    assert result["user_turns"] == len(built.user_texts)

    info = json.loads(run(capsys, "inspect", built.thread_id, "--store", built.uri, "--json")[1])
    tool_pages = [p for p in info["pages"] if p["kind"] == "tool_result"]
    assert len(tool_pages) == 2 and {p["status"] for p in tool_pages} == {"stub"}
    assert "unshown" not in {p["status"] for p in info["pages"]}
    assert info["checkpoint"]["mode"] == mode
    shrunk = [r for r in info["recalls"] if r["shrunk"]]
    assert shrunk and all(r["args"] == {"query": "beehives Zarko3"} for r in shrunk)


# -- export / import / delete -----------------------------------------------------------------------------


def test_export_then_import_into_a_new_thread_copies_every_record_exactly(thread, capsys, tmp_path):
    dump = tmp_path / "thread.jsonl"
    assert run(capsys, "export", thread.thread_id, "--store", thread.uri, "--out", dump)[0] == 0
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    with sqlite_store(thread.path) as store:
        original = export_records(store, thread.thread_id)
    assert lines == original and {r["kind"] for r in lines} == set(KINDS)

    code, out, _ = run(capsys, "import", dump, "--thread", "copy.of.thread", "--store", thread.uri)
    assert code == 0 and f"imported {len(lines)} records into thread copy.of.thread" in out
    with sqlite_store(thread.path) as store:
        copied = export_records(store, "copy.of.thread")
    assert [{**r, "thread": thread.thread_id} for r in copied] == original

    fresh = tmp_path / "fresh.sqlite"  # into a new file: the import creates the store
    assert run(capsys, "import", dump, "--store", f"sqlite:///{fresh}")[0] == 0
    with sqlite_store(fresh) as store:
        assert export_records(store, thread.thread_id) == original

    code, _, err = run(capsys, "import", dump, "--store", f"sqlite:///{fresh}")
    assert code == 1 and "already has records" in err  # never mixes two copies


def test_delete_removes_every_record_of_the_thread_only(thread, capsys, tmp_path):
    dump = tmp_path / "thread.jsonl"
    run(capsys, "export", thread.thread_id, "--store", thread.uri, "--out", dump)
    run(capsys, "import", dump, "--thread", "other", "--store", thread.uri)
    with sqlite_store(thread.path) as store:
        before = record_counts(store, thread.thread_id)

    code, _, err = run(capsys, "delete", thread.thread_id, "--store", thread.uri)  # no tty, no --yes
    assert code == 2 and "--yes" in err
    code, out, _ = run(capsys, "delete", thread.thread_id, "--store", thread.uri, "--yes")

    assert code == 0 and f"deleted {sum(before.values())} records" in out
    with sqlite_store(thread.path) as store:
        assert set(record_counts(store, thread.thread_id).values()) == {0}
        assert record_counts(store, "other") == before
    with sqlite_saver(thread.path) as saver:
        assert load_snapshots(saver, thread.thread_id, lineage=False)  # checkpoints stay unless asked
    assert run(capsys, "export", thread.thread_id, "--store", thread.uri)[0] == 1

    assert run(capsys, "delete", thread.thread_id, "--store", thread.uri, "--yes", "--with-checkpoints")[0] == 0
    with sqlite_saver(thread.path) as saver:
        assert load_snapshots(saver, thread.thread_id) == []


# -- PostgreSQL ------------------------------------------------------------------------------------------------


def test_inspect_and_verify_a_postgres_thread_by_uri(postgres_uri, capsys):
    pytest.importorskip("langgraph.store.postgres", reason="pip install 'langmem-paging[postgres]'")
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from postgres_server import fresh_database

    uri = fresh_database(postgres_uri, "cli_thread")
    with PostgresStore.from_conn_string(uri) as store, PostgresSaver.from_conn_string(uri) as saver:
        store.setup()
        saver.setup()
        texts = run_thread(store, saver, "pg-thread", turns=20)

    code, out, _ = run(capsys, "inspect", "pg-thread", "--store", uri, "--json")
    info = json.loads(out)
    assert code == 0 and info["pages"] and info["clusters"] and info["checkpoint"]["mode"] == "replace"
    code, out, _ = run(capsys, "verify", "pg-thread", "--store", uri, "--json")
    assert code == 0 and json.loads(out)["user_turns"] == len(texts)

