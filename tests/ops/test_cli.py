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

from langmem_paging.cli import main
from langmem_paging.core.messages import dump_messages
from langmem_paging.core.state import PagingState
from langmem_paging.ops import export_records, load_snapshots, record_counts
from langmem_paging.storage.page_store import KINDS, PageStore, thread_namespace
from tests.support.ops_thread import INJECTED, TURNS, build_thread, build_tool_thread, run_thread


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
                page.token_count,
                len(page.messages),
                page.bookmark,
            )
        assert info["records"] == record_counts(store, built.thread_id)
    statuses = {row["id"]: row["status"] for row in info["pages"]}
    assert {p for p, s in statuses.items() if s == "bookmark"} == set(state.shown)
    assert {p for p, s in statuses.items() if s == "resident"} == set(state.pages)
    assert {p for p, s in statuses.items() if s == "cluster"} == {
        p for members in info["checkpoint"]["clusters"].values() for p in members
    }
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
    assert code == 1 and f"no such thread 'no-such-thread' in {built.uri}" in err

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the postgres extra were not installed
    code, _, err = run(capsys, "inspect", "t", "--store", "postgresql://u@127.0.0.1:1/db")
    assert code == 2 and 'pip install "langmem-paging[postgres]"' in err


@pytest.mark.parametrize(
    "command",
    [
        ["threads"],
        ["inspect", "t"],
        ["verify", "t"],
        ["show", "t", "p1"],
        ["export", "t"],
        ["delete", "t", "--yes"],
        ["forget", "t", "m1", "--yes"],
        ["where", "t", "--text", "x"],
        ["report", "t", "--out", "r.html"],
    ],
)
def test_a_file_that_is_not_a_sqlite_database_is_one_line_and_exit_2(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a database, just notes\n" * 20)
    code, out, err = run(capsys, *command, "--store", "sqlite:///notes.txt")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"langmem-paging {command[0]}: {str(tmp_path / 'notes.txt')!r}" in err
    assert "is not a SQLite database" in err


def test_import_of_a_missing_or_unreadable_file_is_one_line_and_exit_2(built, capsys, tmp_path):
    target = ["--store", f"sqlite:///{tmp_path / 'target.sqlite'}"]
    code, out, err = run(capsys, "import", tmp_path / "missing.jsonl", *target)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"langmem-paging import: cannot read {tmp_path / 'missing.jsonl'}: ")
    (tmp_path / "bad.sqlite").write_bytes(b"\x00\xff not a database" * 50)
    code, out, err = run(capsys, "import", tmp_path / "bad.sqlite", *target)
    assert code == 2 and out == "" and err.count("\n") == 1 and "cannot read" in err
    (tmp_path / "records.jsonl").write_text('{"namespace": ["langmem_paging", "t", "pages"]}\n')
    code, out, err = run(
        capsys, "import", tmp_path / "records.jsonl", "--store", "sqlite:///" + str(tmp_path / "bad.sqlite")
    )
    assert code == 2 and out == "" and "is not a SQLite database" in err and err.count("\n") == 1


# -- threads, --version, --help, unknown threads ----------------------------------------------------


def test_threads_lists_every_thread_unescaped_with_its_page_count(thread, capsys, tmp_path):
    dump = tmp_path / "thread.jsonl"
    assert run(capsys, "export", thread.thread_id, "--store", thread.uri, "--out", dump)[0] == 0
    for copy in ("copy.of.thread", "100%.sure", "50%2E"):  # labels escape '.' and '%'
        assert run(capsys, "import", dump, "--thread", copy, "--store", thread.uri)[0] == 0
    with sqlite_store(thread.path) as store:
        pages = len(PageStore(store).list_pages(thread.thread_id))
        clusters = len(PageStore(store).list_clusters(thread.thread_id))
        records = sum(record_counts(store, thread.thread_id).values())
        assert thread_namespace("100%.sure", "pages")[1] == "100%25%2Esure"

    code, out, _ = run(capsys, "threads", "--store", thread.uri, "--json")
    assert code == 0
    expected = {"pages": pages, "clusters": clusters, "records": records}
    assert json.loads(out) == [
        {"thread_id": t, **expected}
        for t in sorted([thread.thread_id, "copy.of.thread", "100%.sure", "50%2E"])
    ]

    code, out, _ = run(capsys, "threads", "--store", thread.uri)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["thread_id", "pages", "clusters", "records"]
    assert [line.split()[:2] for line in lines[1:5]] == [
        [t, str(pages)] for t in sorted([thread.thread_id, "copy.of.thread", "100%.sure", "50%2E"])
    ]
    assert lines[5] == f"4 threads, {4 * pages} pages"

    assert run(capsys, "delete", "100%.sure", "--store", thread.uri, "--yes")[0] == 0
    assert "100%.sure" not in run(capsys, "threads", "--store", thread.uri)[1]


def test_threads_of_a_store_without_any(tmp_path, capsys):
    path = tmp_path / "empty.sqlite"
    with sqlite_store(path):
        pass
    code, out, _ = run(capsys, "threads", "--store", f"sqlite:///{path}")
    assert code == 0 and "no threads" in out
    assert run(capsys, "threads", "--store", f"sqlite:///{path}", "--json")[1] == "[]\n"


def test_version_names_the_package_version(capsys):
    from importlib.metadata import version

    import langmem_paging

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert (
        out
        == f"langmem-paging {langmem_paging.__version__}\n"
        == f"langmem-paging {version('langmem-paging')}\n"
    )


@pytest.mark.parametrize(
    "command",
    [[], ["threads"], ["inspect"], ["show"], ["verify"], ["export"], ["import"], ["delete"], ["report"]],
)
def test_help_has_no_restructuredtext_markup(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: langmem-paging") and "`" not in out


@pytest.mark.parametrize(
    "command",
    [["inspect"], ["show", "p1"], ["show", "c1"], ["verify"], ["export"], ["report", "--out", "r.html"]],
)
def test_an_unknown_thread_is_no_such_thread(command, built, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, *rest = command
    code, out, err = run(capsys, name, "no.such-thread", *rest, "--store", built.uri)
    assert code == 1 and out == ""
    assert err == (
        f"langmem-paging {name}: no such thread 'no.such-thread' in {built.uri}: it has no store "
        "records and no checkpoints (langmem-paging threads lists the store's threads)\n"
    )
    assert not (tmp_path / "r.html").exists()


def test_a_thread_with_checkpoints_but_no_store_records_is_not_unknown(built, capsys, tmp_path):
    empty = tmp_path / "empty.sqlite"
    with sqlite_store(empty):
        pass
    where = ["--store", f"sqlite:///{empty}", "--checkpoints", built.uri]

    code, _, err = run(capsys, "export", built.thread_id, *where)
    assert code == 1 and "no such thread" not in err and "only checkpoints" in err
    code, out, err = run(capsys, "verify", built.thread_id, *where)
    assert code == 1 and "NOT LOSSLESS" in out and "missing-page" in out and err == ""
    code, out, _ = run(capsys, "inspect", built.thread_id, *where)
    assert code == 0 and "latest checkpoint" in out


# -- show ----------------------------------------------------------------------------------------------


def test_show_prints_a_pages_exact_messages(built, capsys):
    with sqlite_store(built.path) as store:
        page = next(
            p
            for p in PageStore(store).list_pages(built.thread_id)
            if any(m.content == INJECTED for m in p.messages)
        )

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


def test_verify_without_checkpoints_cannot_verify(thread, capsys):
    code, out, err = run(capsys, "verify", thread.thread_id, "--store", thread.uri, "--checkpoints", "none")
    assert (
        code == 2
        and not out
        and "cannot verify: no checkpoints in --checkpoints none; pass --checkpoints" in err
    )


@pytest.mark.slow
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

    assert (
        run(capsys, "delete", thread.thread_id, "--store", thread.uri, "--yes", "--with-checkpoints")[0] == 0
    )
    with sqlite_saver(thread.path) as saver:
        assert load_snapshots(saver, thread.thread_id) == []


# -- PostgreSQL ------------------------------------------------------------------------------------------------


def test_inspect_and_verify_a_postgres_thread_by_uri(postgres_uri, capsys):
    pytest.importorskip("langgraph.store.postgres", reason="pip install 'langmem-paging[postgres]'")
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    from tests.support.postgres_server import fresh_database

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
