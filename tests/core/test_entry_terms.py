"""Core v4 (issue 23): the shown pages' and cluster roots' terms leave the checkpoint.

Before: every shown page and cluster root of the checkpointed `paging` value carried its ~12 weighted
terms, written at every step (at B=900 most of the state). Now, with a store, the checkpoint keeps
what decides the view (ids, tokens, tier, spans) and a step that folds reads the terms back from the
page and cluster records (`LoadTerms`), once, for the entries it considers. The folds must be the
same: the same clusters, the same cluster bookmarks, so the same prompts.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import InMemoryBM25Index, PagingConfig, PagingMiddleware, page_messages
from langmem_paging.core.messages import merge_messages
from langmem_paging.core.state import PagingState
from langmem_paging.runtime.pager import Pager
from langmem_paging.runtime.thread_io import ThreadIO
from langmem_paging.step import fold as fold_phase
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import ScriptedChatModel

CONFIG = {"configurable": {"thread_id": "terms"}}
# three topics interleaved: which cluster a bookmark joins depends on its terms
TOPICS = [
    ("beehives", "Zarko keeps {n} beehives near Lake Bled, the honey is dark {c}"),
    ("ferry", "The Lisbon ferry leaves pier {n} at dawn, its hull painted {c}"),
    ("violin", "Mirela tunes violin number {n} before the concert, strings {c}"),
]
COLOURS = ["crimson", "teal", "ochre", "violet", "amber", "olive", "indigo"]
TEXTS = [
    TOPICS[(i * 7 // 3) % 3][1].format(n=i + 2, c=COLOURS[i % len(COLOURS)]) + f" (note {i})."
    for i in range(42)
]


def _agent(store, checkpointer):
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_2", store=store, bookmark_share=0.3)
    model = ScriptedChatModel(responses=[f"Noted {i}." for i in range(len(TEXTS))])
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=checkpointer)
    return agent, model


def _turns(agent, texts, *, start=0, use_async=False):
    for n, text in enumerate(texts, start):
        update = {"messages": [HumanMessage(text, id=f"h{n}")]}
        if use_async:
            asyncio.run(agent.ainvoke(update, CONFIG))
        else:
            agent.invoke(update, CONFIG)


def _views(model) -> list[list[str]]:
    return [[str(m.content) for m in prompt] for prompt in model.prompts]


def _run(*, use_async=False):
    store, checkpointer = InMemoryStore(), InMemorySaver()
    agent, model = _agent(store, checkpointer)
    _turns(agent, TEXTS, use_async=use_async)
    return _views(model), agent.get_state(CONFIG).values["paging"]


@pytest.fixture
def terms_checkpointed(monkeypatch):
    """The checkpoint of before: every entry carries its terms (as an old checkpoint does)."""
    to_value = PagingState.to_value

    def with_terms(self):
        self.terms_stored = False
        return to_value(self)

    monkeypatch.setattr(PagingState, "to_value", with_terms)


def _clusters(views) -> set[str]:
    return {text for view in views for text in view if text.startswith("[c")}


def test_the_checkpoint_holds_no_entry_terms():
    _, paging = _run()
    assert paging["shown"] and paging["clusters"], "the thread was paged and folded"
    assert all("terms" not in e for e in [*paging["shown"].values(), *paging["clusters"].values()])


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_the_prompts_are_those_of_a_checkpoint_with_terms(request, use_async):
    views, _ = _run(use_async=use_async)
    request.getfixturevalue("terms_checkpointed")
    before, paging = _run(use_async=use_async)
    assert all(e["terms"] for e in paging["clusters"].values()), "the old checkpoint kept terms"
    assert len(_clusters(before)) >= 3, "several clusters formed"
    assert views == before


def test_without_the_terms_the_clusters_would_differ(monkeypatch):
    """The scenario tells: a fold that got no terms gives other clusters (other prompts)."""
    views, _ = _run()

    def no_terms(state, page_ids=(), cluster_ids=()):
        return
        yield

    monkeypatch.setattr(fold_phase, "with_terms", no_terms)
    blind, _ = _run()
    assert _clusters(blind) != _clusters(views)


def test_an_old_checkpoint_with_terms_goes_on_folding_the_same(monkeypatch, terms_checkpointed):
    store, checkpointer = InMemoryStore(), InMemorySaver()
    agent, model = _agent(store, checkpointer)
    _turns(agent, TEXTS[:24])
    old = agent.get_state(CONFIG).values["paging"]
    assert old["clusters"] and all(e["terms"] for e in old["clusters"].values())
    monkeypatch.undo()  # the new version takes the thread over
    _turns(agent, TEXTS[24:], start=24)
    after = _views(model)
    paging = agent.get_state(CONFIG).values["paging"]
    assert all("terms" not in e for e in paging["clusters"].values())
    store2, checkpointer2 = InMemoryStore(), InMemorySaver()
    agent2, model2 = _agent(store2, checkpointer2)
    _turns(agent2, TEXTS)
    assert after == _views(model2)


def _pager_thread(pager, *, reads):
    messages, paging, steps = [], None, []
    for n, text in enumerate(TEXTS):
        messages = merge_messages(messages, [HumanMessage(text, id=f"h{n}")])
        before = len(reads)
        result = pager.step(messages, paging, "terms")
        messages, paging = result.apply(messages), result.state.to_value()
        steps.append((bool(result.evicted or result.folded or result.nodes), reads[before:]))
        messages = merge_messages(messages, [AIMessage(f"Noted {n}.", id=f"a{n}")])
    return steps, messages


@pytest.mark.parametrize("tiers", [None, "importance"])
def test_a_call_that_pages_nothing_reads_no_terms(monkeypatch, tiers):
    """With tiers the shown entries keep their terms in the checkpoint: tiers re-score the pages in
    view on every call, which would otherwise read the store on a call that pages nothing."""
    reads: list[tuple[list[str], list[str]]] = []
    load = ThreadIO.load_terms

    def counted(self, request):
        reads.append((list(request.page_ids), list(request.cluster_ids)))
        return load(self, request)

    monkeypatch.setattr(ThreadIO, "load_terms", counted)
    pager = Pager(
        PagingConfig(max_tokens=500, boundary="fixed_2", bookmark_share=0.3, tiers=tiers),
        PageStore(InMemoryStore()),
        index=InMemoryBM25Index(),
    )
    steps, _ = _pager_thread(pager, reads=reads)
    assert any(paged for paged, _ in steps) and (reads or tiers)
    assert all(not read for paged, read in steps if not paged), "a quiet call read terms"
    for _, read in steps:  # each entry read once a call (evict reads the clusters', fold the pages')
        ids = [i for pages, clusters in read for i in [*pages, *clusters]]
        assert len(ids) == len(set(ids)), read


def _pure_run(*, strip: bool):
    messages, paging, views, pages = [], None, [], {}
    for n, text in enumerate(TEXTS):
        messages = merge_messages(messages, [HumanMessage(text, id=f"h{n}")])
        if strip and paging:  # as a checkpoint without the shown pages' terms: read from `pages`
            paging = {**paging, "shown": {k: _without_terms(v) for k, v in paging["shown"].items()}}
        result = page_messages(
            messages, state=paging, pages=pages, max_tokens=500, boundary="fixed_2", bookmark_share=0.3
        )
        pages.update({p.id: p for p in result.pages})
        messages, paging = result.apply(messages), result.state.to_value()
        views.append([str(m.content) for m in result.view])
        messages = merge_messages(messages, [AIMessage(f"Noted {n}.", id=f"a{n}")])
    return views, paging


def _without_terms(entry):
    return {k: v for k, v in entry.items() if k != "terms"}


def test_the_pure_function_keeps_the_terms_and_reads_missing_ones_from_the_callers_pages():
    """No store: the terms stay in the state (nothing else holds the clusters'); a shown page that
    has none is read from the pages the caller passes (`LocalIO`) and folds the same."""
    views, paging = _pure_run(strip=False)
    assert paging["clusters"] and all(
        e["terms"] for e in [*paging["clusters"].values(), *paging["shown"].values()]
    )
    assert len(_clusters(views)) >= 3
    assert _pure_run(strip=True)[0] == views
