"""Several worker *processes* of one deployment on one Postgres (store and checkpointer), running the
compiled agent on threads of their own and all on one thread: no two workers take the same page
number (numbers are claimed atomically in the database), and every page record is the one its
worker formed, so each branch rebuilds from its own pages."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from langmem_paging import PageStore, reconstruct_history
from tests.support.postgres_server import fresh_database

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4


def _run_workers(uri: str, tmp_path: Path, threads_of, turns: int) -> list[dict]:
    processes, outs = [], []
    for worker in range(WORKERS):
        out = tmp_path / f"worker{worker}.json"
        outs.append(out)
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.paging_worker",
                    uri,
                    str(worker),
                    ",".join(threads_of(worker)),
                    str(turns),
                    str(out),
                ],
                cwd=ROOT,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for process in processes:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-3000:]
    return [json.loads(out.read_text()) for out in outs]


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True], ids=["own-threads", "one-thread"])
def test_four_worker_processes_never_share_a_page_number(postgres_uri, tmp_path, shared):
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    uri = fresh_database(postgres_uri, f"langmem_workers_{'shared' if shared else 'own'}")
    with PostgresStore.from_conn_string(uri) as store, PostgresSaver.from_conn_string(uri) as saver:
        store.setup()
        saver.setup()
    reports = _run_workers(
        uri, tmp_path, (lambda w: ["shared"]) if shared else (lambda w: [f"t{w}"]), turns=12
    )
    digests: dict[tuple[str, str], set[str]] = {}
    for report in reports:
        for thread, page, digest in report["formed"]:
            digests.setdefault((thread, page), set()).add(digest)
    formed = Counter({key: len(found) for key, found in digests.items()})
    assert formed, "the workers paged"
    # one content per number: workers on one branch may form the very same page (a claim with the same
    # digest is granted again); another content under a number taken is what claims prevent
    assert max(formed.values()) == 1, [key for key, n in formed.items() if n > 1][:5]
    with PostgresStore.from_conn_string(uri) as store, PostgresSaver.from_conn_string(uri) as saver:
        page_store = PageStore(store)
        threads = {thread for thread, _ in formed}
        stored = {(t, p.id): p.digest for t in threads for p in page_store.list_pages(t)}
        assert all(stored.get(key) in found for key, found in digests.items()), "a page record was replaced"
        sent = {text for report in reports for text in report["sent"]}
        for thread in threads:
            for snapshot in saver.list({"configurable": {"thread_id": thread}}):
                values = snapshot.checkpoint["channel_values"]
                if "paging" not in values:
                    continue
                rebuilt = reconstruct_history(
                    values["messages"],
                    lambda p, t=thread: page_store.get(t, p),
                    clusters=lambda c, t=thread: page_store.get_cluster(t, c),
                    state=values["paging"],
                )
                humans = [m.content for m in rebuilt if m.type == "human"]
                assert set(humans) <= sent and len(humans) == len(set(humans)), "a page of another branch"
                by_worker: dict[str, list[int]] = {}
                for text in humans:
                    worker, turn = text.split(":")[0].split(" turn ")
                    by_worker.setdefault(worker, []).append(int(turn))
                assert all(turns == sorted(turns) for turns in by_worker.values()), "history out of order"
