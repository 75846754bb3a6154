"""Bookmarking is linear in the size of the page."""

from __future__ import annotations

import time

from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging import page_messages
from tools.fuzzing.vocabulary import COUNTER, VOCAB


def test_bookmark_linear_time() -> None:
    """Bookmarking a 200 KB message is not quadratic (it takes seconds at most)."""
    big = HumanMessage(" ".join(VOCAB[i % len(VOCAB)] + str(i % 97) for i in range(30_000)), id="big")
    msgs = [big, AIMessage("ok", id="a0"), HumanMessage("next", id="h1")]
    t0 = time.perf_counter()
    page_messages(msgs, max_tokens=200, boundary="fixed_1", text_counter=COUNTER)
    elapsed = time.perf_counter() - t0
    assert elapsed <= 20, f"{elapsed:.1f} s for a {len(big.content) // 1000} KB message"
