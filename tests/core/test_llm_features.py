"""LLM-written bookmarks and digests (scripted models and the local OpenAI-compatible server),
hybrid search, tracing events, and the page-size warning."""

from __future__ import annotations

import asyncio
import time
import warnings

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import Page, PagingMiddleware
from langmem_paging.index.base import InMemoryBM25Index
from langmem_paging.strategies.bookmarks import BookmarkContext, PageDraft
from langmem_paging.strategies.embeddings import Embedder
from langmem_paging.strategies.llm import LLMBookmarker, LLMDigester
from langmem_paging.strategies.tiers import TierScoring
from langmem_paging.testing import ScriptedChatModel
from tests.support.harness import COUNTER, replay

CTX = BookmarkContext(count_text=COUNTER.count_text)


def draft(page_id, text):
    return PageDraft(page_id, [HumanMessage(text, id=f"m-{page_id}")])


def test_llm_bookmarks_are_the_models_keywords_one_call_per_page_and_cached():
    # the pages are asked about in parallel (model.batch): each reply answers its own page's prompt
    def reply(messages):
        return (
            "Farid, greyhound, adoption" if "Farid" in messages[-1].content else "Tuesday pottery, blue bowl"
        )

    model = ScriptedChatModel(responses=[reply, reply])
    bookmarker = LLMBookmarker(model)
    pages = [draft("p1", "Farid adopted a greyhound."), draft("p2", "Pottery on Tuesday: a blue bowl.")]
    marks = bookmarker.bookmark(pages, CTX)
    assert [m.text for m in marks] == ["[p1:Farid,greyhound,adoption]", "[p2:Tuesday pottery,blue bowl]"]
    assert len(model.prompts) == 2 and any(
        "Farid adopted a greyhound." in p[-1].content for p in model.prompts
    )
    assert bookmarker.bookmark(pages, CTX) == marks and len(model.prompts) == 2  # cached: no new call
    assert marks[0].terms.get("Farid") == 1.0 and len(marks[0].terms) > 3  # keyword terms feed clusters


def test_llm_bookmarks_fall_back_to_keywords_when_the_model_fails_or_rambles():
    def reply(messages):  # parallel calls: the page decides, not the order of arrival
        if "Caroline" in messages[-1].content:
            return ""
        raise RuntimeError("rate limited")

    model = ScriptedChatModel(responses=[reply, reply])
    marks = LLMBookmarker(model).bookmark(
        [
            draft("p1", "Caroline joined the LGBTQ support group in May."),
            draft("p2", "Melanie painted a sunset at the lake."),
        ],
        CTX,
    )
    assert marks[0].text.startswith("[p1:") and "Caroline" in marks[0].text
    assert marks[1].text.startswith("[p2:") and "Melanie" in marks[1].text


def test_llm_bookmarks_async_and_through_an_agent():
    model = ScriptedChatModel(responses=["city0 booking"] * 40)
    marks = asyncio.run(LLMBookmarker(model).abookmark([draft("p1", "Trip to city0.")], CTX))
    assert marks[0].text == "[p1:city0 booking]"

    bookmark_model = ScriptedChatModel(
        responses=[lambda msgs: msgs[-1].content.split(":")[1].split()[0]] * 40
    )
    store = InMemoryStore()
    paging = PagingMiddleware(
        max_tokens=296, boundary="fixed_2", store=store, bookmarker=LLMBookmarker(bookmark_model)
    )
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 12),
        middleware=[paging],
        store=store,
        checkpointer=InMemorySaver(),
    )
    for i in range(12):
        agent.invoke(
            {"messages": [f"Trip{i}: a flight to City{i} on day {i}."]}, {"configurable": {"thread_id": "t"}}
        )
    page = paging.page_store.get("t", "p1")
    assert page.bookmark.startswith("[p1:") and bookmark_model.prompts


def test_llm_bookmarks_through_the_openai_client_and_a_local_server():
    from langchain_openai import ChatOpenAI

    from tests.support.openai_stub import OpenAIStub

    with OpenAIStub(lambda body: {"content": "Zarko, beehives, Bled"}) as server:
        model = ChatOpenAI(model="stub", base_url=server.base_url, api_key="test", temperature=0)
        marks = LLMBookmarker(model).bookmark([draft("p4", "Zarko keeps beehives near Bled.")], CTX)
    assert marks[0].text == "[p4:Zarko,beehives,Bled]"
    assert server.requests[0]["messages"][0]["role"] == "system"
    assert "Zarko keeps beehives near Bled." in server.requests[0]["messages"][1]["content"]


def _digest_history():
    history = []
    for i in range(24):
        history += [
            HumanMessage(f"Note {i}: Zarko{i} keeps {i} beehives near lake Bled{i}.", id=f"h{i}"),
            AIMessage(f"Noted, Zarko{i} and Bled{i}.", id=f"a{i}"),
        ]
    return history


def test_a_digester_written_digest_shows_for_a_warm_page_once_ready():
    model = ScriptedChatModel(responses=[lambda msgs: "LLM DIGEST: " + msgs[-1].content[:40]] * 200)
    digester = LLMDigester(model, background=False)  # written when a page turns warm, on the turn
    run = replay(
        _digest_history(),
        max_tokens=700,
        boundary="fixed_2",
        text_counter=COUNTER,
        tiers=TierScoring(digester=digester),
    )
    warm = [m for m in run.state if "digest of" in str(m.content)]
    assert warm and all("LLM DIGEST:" in m.content for m in warm)
    assert model.prompts


def test_a_background_digester_keeps_llm_calls_off_the_turn():
    slow_calls = []

    def slow(msgs):
        slow_calls.append(time.monotonic())
        return "LLM DIGEST of a page"

    model = ScriptedChatModel(responses=[slow] * 400)
    digester = LLMDigester(model)  # background: digests written after pages form
    store = InMemoryStore()
    paging = PagingMiddleware(
        max_tokens=776, boundary="fixed_2", store=store, tiers=TierScoring(digester=digester)
    )
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 60),
        middleware=[paging],
        store=store,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "bg"}}
    for message in _digest_history()[0::2]:
        agent.invoke({"messages": [message.content]}, config)
        time.sleep(0.02)
    assert slow_calls, "digests were written in the background"
    state = agent.get_state(config).values
    assert any("digest of" in str(m.content) for m in state["messages"])


class TableEmbedder(Embedder):
    """Maps known texts to given vectors (others to zero)."""

    name = "table:2"
    dim = 2

    def __init__(self, table):
        self.table = table

    def embed(self, texts):
        rows = [self.table.get(t, (0.0, 0.0)) for t in texts]
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), 2)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def test_hybrid_search_finds_a_paraphrase_that_bm25_alone_misses():
    pages = [
        Page(
            id="p1",
            messages=[HumanMessage("My kitten sleeps on the rug.", id="a")],
            bookmark="",
            keywords=[],
            token_count=8,
            boundary="x",
            created_turn=1,
        ),
        Page(
            id="p2",
            messages=[HumanMessage("The stock market fell sharply.", id="b")],
            bookmark="",
            keywords=[],
            token_count=8,
            boundary="x",
            created_turn=1,
        ),
    ]
    query = "where does the cat nap"
    table = {
        "My kitten sleeps on the rug.": (1, 0),
        "The stock market fell sharply.": (0, 1),
        query: (1, 0.1),
    }
    plain, hybrid = InMemoryBM25Index(), InMemoryBM25Index(embedder=TableEmbedder(table))
    for index in (plain, hybrid):
        index.load("t", pages)
    assert plain.search("t", query, limit=2, allow=lambda p: True) == []
    assert [h.page_id for h in hybrid.search("t", query, limit=2, allow=lambda p: True)][0] == "p1"


class Events(BaseCallbackHandler):
    def __init__(self):
        self.events = []

    def on_custom_event(self, name, data, **kwargs):
        self.events.append((name, data))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_paging_step_reports_paging_metadata_on_the_run(mode):
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=296, boundary="fixed_2", store=store)
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 12),
        middleware=[paging],
        store=store,
        checkpointer=InMemorySaver(),
    )
    events = Events()
    config = {"configurable": {"thread_id": f"trace-{mode}"}, "callbacks": [events]}
    for i in range(12):
        inputs = {"messages": [f"Fact {i}: the ferry to Bled{i} leaves at {i}."]}
        agent.invoke(inputs, config) if mode == "sync" else asyncio.run(agent.ainvoke(inputs, config))
    steps = [data for name, data in events.events if name == "langmem_paging"]
    # a step that pages reports what it did; a quiet one has nothing to report (no event)
    assert 0 < len(steps) < 12 and any(s["evicted"] for s in steps)
    assert all(s["formed"] or s["evicted"] or s["folded"] or s["over_budget"] for s in steps)
    assert all(s["tokens"] <= s["budget"] for s in steps) and all(
        s["thread_id"] == f"trace-{mode}" for s in steps
    )


def test_pages_larger_than_a_recall_bring_a_warning():
    from langgraph.graph.message import add_messages

    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=1500, boundary="fixed_40", store=store)
    messages, state = [], None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(80):  # as the middleware drives it: page, apply the updates, keep the state
            messages = add_messages(
                messages,
                [
                    AIMessage(f"Noted {i - 1}.", id=f"a{i}"),
                    HumanMessage(f"Long note {i}: " + "the ferry timetable changed again " * 12, id=f"h{i}"),
                ],
            )
            result = paging.pager.step(messages, state, "w")
            messages, state = result.apply(messages), result.state.to_value()
    assert any("usually larger than one recall returns" in str(w.message) for w in caught)
