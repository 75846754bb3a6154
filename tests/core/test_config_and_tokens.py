from __future__ import annotations

import hashlib

import pytest
from langchain_core.messages import HumanMessage

from langmem_paging import PagingMiddleware, TokenCounter
from langmem_paging.core import tokens as tokens_module


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"max_tokens": 100, "policy": "lfuu"},
            "Invalid paging option `policy`: Unknown policy 'lfuu'. Available: 'fifo', 'lru', 'lfu', 'semantic'",
        ),
        (
            {"max_tokens": 100, "boundary": "fixed"},
            "Invalid paging option `boundary`: Unknown boundary 'fixed'",
        ),
        ({"max_tokens": 100, "boundary": "fixed_0"}, "`fixed_N` needs N >= 1"),
        (
            {"max_tokens": 100, "low_water_tokens": 200},
            "Invalid paging option `low_water_tokens`: 200 is above `max_tokens` (100)",
        ),
        ({"max_tokens": 0}, "Invalid paging option `max_tokens`: must be a positive number of tokens"),
        (
            {"max_tokens": ("fraction", 2)},
            "Invalid paging option `max_tokens`: use an int, ('tokens', n) with n > 0, or ('fraction', x)",
        ),
        ({"max_tokens": 100, "mode": "both"}, "Invalid paging option `mode`"),
        (
            {"max_tokens": 100, "token_counter": 3},
            "Invalid paging option `token_counter`: must be a callable messages -> int",
        ),
        (
            {"max_tokens": 100, "bookmarker": "kw"},
            "Unknown bookmarker 'kw'. Available: 'keywords', 'compact', 'discriminative'",
        ),
        ({"max_tokens": 100, "encoding": "p50k_base"}, "cannot be loaded offline"),
        ({"max_tokens": 100, "bookmark_share": 0}, "Invalid paging option `bookmark_share`"),
    ],
)
def test_bad_options_name_what_to_fix(kwargs, message):
    with pytest.raises(
        (ValueError, TypeError), match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
    ) as error:
        PagingMiddleware(**kwargs)
    assert "validation error" not in str(error.value) and "_Options" not in str(error.value)


def test_unknown_or_missing_options_are_type_errors_naming_them():
    with pytest.raises(TypeError, match="Unknown paging option `max_token`"):
        PagingMiddleware(max_token=100)
    with pytest.raises(TypeError, match="Paging needs `max_tokens`"):
        PagingMiddleware()
    with pytest.raises(TypeError, match="LangGraph BaseStore"):
        PagingMiddleware(max_tokens=100, store="sqlite")


def test_tiktoken_loads_offline_from_bundled_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens_module.get_encoding.cache_clear()
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    try:
        for name in ("cl100k_base", "o200k_base"):
            encoding = tokens_module.get_encoding(name)
            cached = tmp_path / hashlib.sha1(tokens_module._BLOB_URLS[name].encode()).hexdigest()
            assert cached.exists()
            assert hashlib.sha256(cached.read_bytes()).hexdigest() == tokens_module._EXPECTED_SHA256[name]
            assert encoding.encode("hello world") in ([15339, 1917], [24912, 2375])
    finally:
        tokens_module.get_encoding.cache_clear()


def test_encoding_follows_the_model_name():
    from langmem_paging.testing import ScriptedChatModel

    assert TokenCounter(model="openai:gpt-4o-mini").encoding.name == "o200k_base"  # the README's own string
    assert TokenCounter(model="gpt-5").encoding.name == "o200k_base"
    assert TokenCounter(model="o3-mini").encoding.name == "o200k_base"
    chat = ScriptedChatModel()
    assert TokenCounter(model=chat).encoding.name == "cl100k_base"
    assert TokenCounter(model="gpt-4o-mini").encoding.name == "o200k_base"
    assert TokenCounter(model="openai/gpt-4.1").encoding.name == "o200k_base"
    assert TokenCounter(model="gpt-3.5-turbo").encoding.name == "cl100k_base"
    assert TokenCounter(model="gpt-4o", encoding="cl100k_base").encoding.name == "cl100k_base"


def test_counts_are_cached_per_message_and_refreshed_when_replaced():
    counter = TokenCounter()
    calls = []

    class CountingEncoding:  # wraps tiktoken's encoding to count how often text is encoded
        def __init__(self, inner):
            self.inner = inner

        def encode_ordinary(self, text):
            calls.append(text)
            return self.inner.encode_ordinary(text)

    counter.encoding = CountingEncoding(counter.encoding)
    history = [HumanMessage(f"message number {i}", id=f"m{i}") for i in range(50)]
    first = counter(history)
    assert counter(history) == first and len(calls) == 50
    history[0] = HumanMessage("[p1:replaced]", id="m0")  # a bookmark takes the id of its page
    assert counter(history) != first and len(calls) == 51
    counter.forget(["m1"])  # paged out: its count is dropped, and counted again if it comes back
    counter(history)
    assert len(calls) == 52


def test_custom_token_counter_is_used_for_the_budget():
    from langmem_paging import page_messages

    history = [HumanMessage("x" * 1000, id=f"m{i}") for i in range(10)]
    result = page_messages(history, max_tokens=10, token_counter=len, boundary="fixed_1")
    assert not result.pages  # ten messages = ten "tokens": within budget


def test_text_count_cache_is_bounded_and_a_forgotten_text_is_counted_again(monkeypatch):
    from langmem_paging.core import tokens

    monkeypatch.setattr(tokens, "MAX_CACHED_TEXTS", 4)
    counter = tokens.TokenCounter()
    texts = [f"[p{i}:greyhound,pottery,tuesday]" for i in range(10)]
    expected = [len(counter.encoding.encode(t)) for t in texts]
    assert [counter.count_text(t) for t in texts] == expected
    assert len(counter._text_cache) <= 4 and counter._text_cache.get(texts[0]) is None
    assert counter.count_text(texts[0]) == expected[0]  # recomputed, same count


def test_stem_cache_is_bounded_and_a_forgotten_stem_is_recomputed(monkeypatch):
    from langmem_paging.core import background

    monkeypatch.setattr(background, "MAX_STEMS", 8)
    background.stem.cache_clear()
    words = [f"walk{suffix}{i}" for i in range(20) for suffix in ("ed",)] + ["adopted", "adoption", "farid"]
    expected = [background.stem.__wrapped__(w) for w in words]
    assert [background.stem(w) for w in words] == expected
    assert len(background._STEMS) <= 8
    assert "walked0" not in background._STEMS
    assert background.stem("walked0") == background.stem.__wrapped__("walked0")
    assert background.stem("Adoption") == background.stem("adopted") == "adopt"
    background.stem.cache_clear()
    assert not background._STEMS and background.stem("farid") == "farid"


def test_doc_freq_sketch_replaces_the_first_weakest_term_as_a_scan_would():
    """`count_terms` (space-saving) keeps exactly what a scan for the weakest term per new term keeps."""
    import random

    from langmem_paging.core import state as state_module
    from langmem_paging.core.state import PagingState

    def by_scan(table: dict, terms: list[str]) -> None:
        for term in terms:
            if term in table:
                table[term] += 1
            elif len(table) < state_module.MAX_TERMS:
                table[term] = 1
            else:
                weakest = min(table, key=table.__getitem__)
                table[term] = table.pop(weakest) + 1

    rng = random.Random(3)
    for _ in range(10):
        vocab = [f"w{i}" for i in range(rng.choice([300, 800, 3000]))]
        weights = [1 / (i + 1) for i in range(len(vocab))]
        state, expected = PagingState(), {}
        for _ in range(40):
            terms = list(dict.fromkeys(rng.choices(vocab, weights=weights, k=rng.randint(1, 300))))
            by_scan(expected, terms)
            state.count_terms(terms)
            assert list(state.doc_freq.items()) == list(expected.items())


def test_cluster_node_to_dict_is_asdict_and_a_copy():
    from dataclasses import asdict, fields

    from langmem_paging.core.records import ClusterNode

    node = ClusterNode(
        id="c3",
        children=["p1", "c2"],
        size=3,
        first_page=1,
        last_page=4,
        bookmark="[c3:a,b]",
        keywords=["a", "b"],
        terms={"a": 0.5, "b": 0.25},
        digest="x",
    )
    data = node.to_dict()
    assert data == asdict(node) and list(data) == [f.name for f in fields(ClusterNode)]
    data["children"].append("p9")
    data["terms"]["c"] = 1.0
    data["keywords"].append("c")
    assert node.children == ["p1", "c2"] and "c" not in node.terms and node.keywords == ["a", "b"]
    assert ClusterNode.from_dict(node.to_dict()) == node
