from __future__ import annotations

import hashlib

import pytest
from langchain_core.messages import HumanMessage

from langmem_paging import PagingMiddleware, TokenCounter
from langmem_paging import tokens as tokens_module


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_tokens": 100, "policy": "lfuu"}, "Unknown policy 'lfuu'. Available: 'fifo', 'lru', 'lfu', 'semantic'"),
        ({"max_tokens": 100, "boundary": "fixed"}, "Unknown boundary 'fixed'"),
        ({"max_tokens": 100, "boundary": "fixed_0"}, "`fixed_N` needs N >= 1"),
        ({"max_tokens": 100, "low_water_tokens": 200}, "`low_water_tokens` must be positive and at most"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 100, "mode": "both"}, "mode"),
        ({"max_tokens": 100, "token_counter": 3}, "`token_counter` must be callable"),
    ],
)
def test_bad_options_name_what_to_fix(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        PagingMiddleware(**kwargs)


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
    assert TokenCounter(model="gpt-4o-mini").encoding.name == "o200k_base"
    assert TokenCounter(model="openai/gpt-4.1").encoding.name == "o200k_base"
    assert TokenCounter(model="gpt-3.5-turbo").encoding.name == "cl100k_base"
    assert TokenCounter(model="gpt-4o", encoding="cl100k_base").encoding.name == "cl100k_base"


def test_counts_are_cached_per_message_and_refreshed_when_replaced(monkeypatch):
    counter = TokenCounter()
    calls = []
    original = counter.count_text
    monkeypatch.setattr(counter, "count_text", lambda text: calls.append(text) or original(text))
    history = [HumanMessage(f"message number {i}", id=f"m{i}") for i in range(50)]
    first = counter(history)
    assert counter(history) == first and len(calls) == 50
    history[0] = HumanMessage("[p1:replaced]", id="m0")  # a bookmark takes the id of its page
    assert counter(history) != first and len(calls) == 51


def test_custom_token_counter_is_used_for_the_budget():
    from langmem_paging import page_messages

    history = [HumanMessage("x" * 1000, id=f"m{i}") for i in range(10)]
    result = page_messages(history, max_tokens=10, token_counter=len, boundary="fixed_1")
    assert not result.pages  # ten messages = ten "tokens": within budget
