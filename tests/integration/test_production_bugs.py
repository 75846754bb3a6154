"""Library bugs found by the Postgres, fault, crash and concurrency work, each as its smallest repro.

Marked ``xfail(strict=True)``: a fix turns the test into an XPASS, which fails the run until the mark
is removed, so a fixed bug stays tested.
"""

from __future__ import annotations

import warnings

from langchain_core.messages import HumanMessage
from langgraph.store.memory import InMemoryStore

from langmem_paging import InMemoryBM25Index, Pager, PageStore, PagingConfig, reconstruct_history
from tests.support.conversations import conversation
from tests.support.harness import COUNTER, replay


def test_a_page_evicted_straight_into_a_cluster_stays_in_the_history():
    unanchored = []
    for seed in range(5):  # any of these shows it; which turn depends on the bookmarks' lengths
        messages = conversation(40, seed=seed, tools=True, system=False)
        out = replay(messages, max_tokens=600, boundary="fixed_2", policy="fifo")
        for k, step in enumerate(out.steps):
            view = {m.id for m in step.view}
            unanchored += [(seed, k, p) for p, s in step.state.shown.items() if s.anchor not in view]
    assert not unanchored, f"pages shown by no message (seed, step, page): {unanchored[:5]}"
    # and what that costs at such a checkpoint: seed 0 stopped after 22 turns
    messages = conversation(22, seed=0, tools=True, system=False)
    out = replay(messages, max_tokens=600, boundary="fixed_2", policy="fifo")
    history = reconstruct_history(out.state, out.pages, COUNTER, clusters=out.nodes, state=out.paging)
    assert [m.id for m in history] == [m.id for m in messages]


class _DownIndex(InMemoryBM25Index):
    """A search index whose database is down (as a PostgresSearchIndex can be)."""

    def add(self, thread_id, pages):
        raise ConnectionError("search index unreachable")


def test_on_store_error_continue_also_covers_the_search_index():
    """Pager.step/astep called index.add outside the try that applies on_store_error: with a database
    index down, on_store_error='continue' still failed the turn, after the pages were committed."""
    pager = Pager(
        PagingConfig(max_tokens=260, boundary="fixed_4"),
        PageStore(InMemoryStore()),
        index=_DownIndex(),
        on_store_error="continue",
    )
    messages = [
        HumanMessage(f"Fact {n}: Zarko{n} keeps {n} beehives near Lake Bled{n}.", id=f"h{n}")
        for n in range(30)
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pager.step(messages, None, "index-down")
    assert any(issubclass(w.category, RuntimeWarning) for w in caught)
    assert result.pages and pager.page_store.get("index-down", result.pages[0].id) is not None
