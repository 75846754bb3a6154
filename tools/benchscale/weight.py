"""Part 4, weight: bytes per checkpoint of the paging channel against the messages channel."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import InMemoryBM25Index, PagingConfig
from langmem_paging.runtime.pager import Pager
from langmem_paging.storage.page_store import PageStore

from .conversation import Chat, shared_vocabulary
from .settings import BOUNDARY

WEIGHT_WARMUP = 20
"""Checkpoints of a thread's start left out of the settled maximum: the first ones hold a message or
two, against which the state's fixed keys alone weigh ~1x."""


def bench_weight(args, workdir: Path) -> list[dict[str, Any]]:
    """Bytes the checkpoint holds per channel (the state is written at every step): the `paging`
    channel against the `messages` channel it manages, JSON as LangGraph's serializer writes them,
    replace mode, at each budget. Each row is the checkpoint at that history length, the spread
    (p50, max) of the ratio over every checkpoint since the previous row, what each key of the
    paging value weighs, and the store's keyword-sketch record (written on steps that form pages)."""
    from langmem_paging.core.messages import dump_messages
    from langmem_paging.storage.page_store import thread_namespace

    rows = []
    for budget in args.weight_budgets:
        chat = Chat(shared_vocabulary(), seed=args.seed)
        store = InMemoryStore()
        pager = Pager(
            PagingConfig(max_tokens=budget, boundary=BOUNDARY), PageStore(store), index=InMemoryBM25Index()
        )
        messages: list[BaseMessage] = []
        paging: Any = None
        seen = 0
        checkpoints = 0
        for size in args.sizes:
            ratios: list[float] = []
            settled: list[float] = []
            for segment in chat.segments():
                messages = add_messages(messages, segment)
                seen += len(segment)
                result = pager.step(messages, paging, "weight")
                messages, paging = result.apply(messages), result.state.to_value()
                ratios.append(_json_bytes(paging) / _json_bytes(dump_messages(messages)))
                checkpoints += 1
                if checkpoints > WEIGHT_WARMUP:
                    settled.append(ratios[-1])
                if seen >= size:
                    break
            paging_bytes = _json_bytes(paging)
            messages_bytes = _json_bytes(dump_messages(messages))
            sketch = store.get(thread_namespace("weight", "meta"), "sketch")
            rows.append(
                {
                    "budget": budget,
                    "history_messages": seen,
                    "paging_bytes": paging_bytes,
                    "messages_bytes": messages_bytes,
                    "ratio": round(paging_bytes / messages_bytes, 3),
                    "ratio_p50": round(statistics.median(ratios), 3),
                    "ratio_max": round(max(ratios), 3),
                    "ratio_max_settled": round(max(settled), 3) if settled else None,
                    "checkpoints": len(ratios),
                    "paging_keys": {
                        k: _json_bytes(v)
                        for k, v in sorted(paging.items(), key=lambda kv: -_json_bytes(kv[1]))
                    },
                    "store_sketch_bytes": _json_bytes(sketch.value) if sketch is not None else 0,
                }
            )
    return rows


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, default=str))
