"""Part 2, recall: `Pager.recall` by page id and by query on a SQLite file store of many pages."""

from __future__ import annotations

import gc
import random
import sys
import time
from pathlib import Path
from typing import Any

from langmem_paging import InMemoryBM25Index, Page, PagingState, TokenCounter
from langmem_paging.core.library_messages import format_bookmark
from langmem_paging.core.records import messages_digest

from .conversation import Chat, shared_vocabulary
from .pagers import make_pager, sqlite_store
from .settings import BOUNDARY, PAGE_MESSAGES
from .stats import rss_bytes, summary


def bench_recall(args, workdir: Path) -> list[dict[str, Any]]:
    vocabulary = shared_vocabulary()
    counter = TokenCounter()
    rows = []
    for n in args.pages:
        store = sqlite_store(workdir / f"recall-{n}.sqlite")
        index = InMemoryBM25Index()
        pager = make_pager(store, policy=args.policy, index=index)
        thread = f"recall-{n}"
        chat = Chat(vocabulary, seed=args.seed + n)
        state = PagingState()
        t0 = time.perf_counter()
        generate_s = 0.0
        topics: list[tuple[str, ...]] = []
        for start in range(0, n, args.commit_batch):
            g0 = time.perf_counter()
            pages = []
            numbers = state.allocate("p", min(args.commit_batch, n - start))
            for number in numbers:
                msgs = chat.messages(PAGE_MESSAGES)
                text = "\n".join(str(m.content) for m in msgs)
                topics.append(chat._topic)
                pages.append(
                    Page(
                        id=f"p{number}",
                        messages=msgs,
                        bookmark=format_bookmark(f"p{number}", list(chat._topic)),
                        keywords=list(chat._topic),
                        token_count=counter.count_text(text) + 3 * len(msgs),
                        boundary=BOUNDARY,
                        created_turn=number,
                        order=number * PAGE_MESSAGES,
                        digest=messages_digest(msgs),
                        features={"terms": dict.fromkeys(chat._topic, 1.0)},
                    )
                )
            generate_s += time.perf_counter() - g0
            pager.page_store.commit(thread, pages=pages, nodes=[], state=state)
        write_s = time.perf_counter() - t0 - generate_s
        value = state.to_value()
        rng = random.Random(args.seed)
        by_id = []
        for _ in range(args.repeats):
            pid = f"p{rng.randint(1, n)}"
            t = time.perf_counter()
            answer = pager.recall(thread, value, page_ids=[pid])
            by_id.append((time.perf_counter() - t) * 1e3)
            assert pid in answer.accessed, answer.content[:200]

        def query(topics: list = topics, rng: random.Random = rng, n: int = n) -> str:
            topic = topics[rng.randrange(n)]
            return f"what did we say about {' '.join(rng.sample(topic, rng.choice([1, 2])))}"

        gc.collect()
        rss_before = rss_bytes()
        t = time.perf_counter()
        cold_answer = pager.recall(thread, value, query=query())
        cold_ms = (time.perf_counter() - t) * 1e3
        gc.collect()
        rss_after = rss_bytes()
        searches, hits = [], 0
        for _ in range(args.repeats):
            q = query()
            t = time.perf_counter()
            answer = pager.recall(thread, value, query=q)
            searches.append((time.perf_counter() - t) * 1e3)
            hits += bool(answer.accessed)
        index_thread = index._threads.get(thread)
        rows.append(
            {
                "pages": n,
                "messages": n * PAGE_MESSAGES,
                "generate_s": generate_s,
                "write_s": write_s,
                "db_bytes": (workdir / f"recall-{n}.sqlite").stat().st_size,
                "recall_by_id_ms": summary(by_id),
                "search_cold_ms": cold_ms,
                "search_cold_found": bool(cold_answer.accessed),
                "search_warm_ms": summary(searches),
                "search_queries_with_hits": hits,
                "index_postings": index_thread.size if index_thread else 0,
                "rss_growth_cold_start_bytes": rss_after - rss_before,
                "raw": {"by_id_ms": by_id, "search_ms": searches},
            }
        )
        store.conn.close()
        del index, pager, store
        gc.collect()
        if args.verbose:
            print(
                f"  recall {n} pages: write {write_s:.1f}s, cold search {cold_ms:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    return rows
