"""A word with no spaces (a pasted key or hex dump) never breaks the budget (Correctness v5, bug 5).

Page bookmarks fit their words to their token cap, cluster bookmarks showed their strongest terms
whole: at ``max_tokens=700``, 3,000 random characters pasted three times made every later prompt
2,424 tokens, 100,000 characters 71,916 (the cluster bookmark held the word). Every word a stand-in
shows is cut to `MAX_KEYWORD_CHARS` (`clip_keyword`, applied where bookmarks are formatted and where
terms are read).
"""

from __future__ import annotations

import random
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
