"""Part 3, rss: resident memory per idle thread, measured in a fresh process."""

from __future__ import annotations

import gc
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.graph.message import add_messages

from langmem_paging import InMemoryBM25Index, PagingState

from .conversation import Chat, shared_vocabulary
from .pagers import make_pager, sqlite_store
from .settings import REPO
from .stats import rss_bytes

SCRIPT = REPO / "tools" / "bench_scale.py"
"""The worker runs through the script, as the parent did (a fresh interpreter, nothing imported yet)."""


def rss_worker(params: dict[str, Any]) -> dict[str, Any]:
    """Grow `threads` threads to `pages` pages each through the pager, let them go idle (the
    paging state goes where a checkpointer would put it: out of this process's memory), and
    measure this process's RSS; then search each thread once and measure again."""
    workdir = Path(params["workdir"])
    vocabulary = shared_vocabulary()
    store = sqlite_store(workdir / f"rss-{params['pages']}.sqlite")
    index = InMemoryBM25Index()
    pager = make_pager(store, policy=params["policy"], index=index)
    checkpoints = workdir / f"rss-{params['pages']}-checkpoints"
    checkpoints.mkdir(exist_ok=True)

    def grow(thread: str, seed: int) -> None:
        chat = Chat(vocabulary, seed=seed)
        messages: list[BaseMessage] = []
        paging: dict[str, Any] = {}
        calls = 0
        for segment in chat.segments():
            messages = add_messages(messages, segment)
            calls += 1
            if calls % params["every"]:
                continue
            result = pager.step(list(messages), paging, thread, overhead=0)
            if result.updates:
                messages = result.apply(messages)
            paging = result.state.to_value()
            if PagingState.from_value(paging).next["p"] - 1 >= params["pages"]:
                break
        (checkpoints / f"{thread}.json").write_text(json.dumps(paging))

    grow("warmup", seed=10_000)  # the same work once first, so allocator arenas are already grown
    gc.collect()
    base = rss_bytes()
    for t in range(params["threads"]):
        grow(f"t{t}", seed=t)
    gc.collect()
    idle = rss_bytes()
    rng = random.Random(0)
    for t in range(params["threads"]):
        paging = json.loads((checkpoints / f"t{t}.json").read_text())
        pager.recall(f"t{t}", paging, query=" ".join(rng.sample(vocabulary.topics, 2)))
    gc.collect()
    searched = rss_bytes()
    counter = pager.counter_for()
    return {
        "threads": params["threads"],
        "pages_per_thread": params["pages"],
        "step_every": params["every"],
        "rss_base_bytes": base,
        "rss_idle_bytes": idle,
        "rss_searched_bytes": searched,
        "idle_bytes_per_thread": (idle - base) / params["threads"],
        "searched_bytes_per_thread": (searched - idle) / params["threads"],
        "token_cache_entries": len(counter._cache),
        "token_cache_cap": counter._cache.capacity,
        "index_threads": len(index._threads),
        "index_postings": sum(i.size for i in index._threads.values()),
        "index_max_postings": index.max_postings,
    }


def bench_rss(args, workdir: Path) -> list[dict[str, Any]]:
    rows = []
    for pages in args.rss_pages:
        params = {
            "workdir": str(workdir),
            "threads": args.rss_threads,
            "pages": pages,
            "policy": args.policy,
            "every": args.rss_every,
        }
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--rss-worker", json.dumps(params)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"rss worker failed:\n{done.stderr[-4000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows
