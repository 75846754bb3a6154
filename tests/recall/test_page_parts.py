"""A long page recalled in parts: every part is well-formed, carries text, and fits the smallest cap."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from langmem_paging import Pager, PageStore, PagingConfig, PagingState, PagingWarning
from langmem_paging.recall.render import render_page
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import step_exchanges


def test_a_long_message_cut_into_parts_is_never_cut_inside_its_tags():
    """A long message was cut by tokens from the start of its line, so with a small part size a
    part ended inside the ``<message from="user" time="...">`` tag, and that half tag swallowed
    the part's ``</page>``: the recall result was not well-formed."""
    from langmem_paging.core.records import Page
    from langmem_paging.recall.render import page_parts

    text = " ".join(f"word{i} harbor lantern" for i in range(200))
    message = HumanMessage(text, id="m", additional_kwargs={"timestamp": "2024-01-09T15:30:00+00:00"})
    page = Page(
        id="p1",
        messages=[message],
        bookmark="[p1:x]",
        keywords=[],
        token_count=600,
        boundary="fixed_1",
        created_turn=1,
    )
    parts = page_parts(page, 24, COUNTER, version=1)
    assert len(parts) > 2
    bodies = [p.split("\n", 1)[1].rsplit("\n", 1)[0] for p in parts]
    for body in bodies:  # every tag in a part is whole
        for at in [i for i in range(len(body)) if body.startswith("<message", i)]:
            assert ">" in body[at:], body
        assert not body.rstrip().endswith(("<", "</", "</mess")), body
    assert bodies[0].startswith('<message from="user" time="2024-01-09T15:30:00+00:00">')
    assert bodies[-1].endswith("</message>")
    assert "".join(bodies) == render_page(page, version=1).split("\n", 1)[1].rsplit("\n", 1)[0]


def test_every_part_of_a_long_message_carries_its_text_and_stays_at_the_indent():
    """Version 2 parts: the first holds the speaker line, the others continue its text indented;
    none is a header alone (six parallel recalls at B=700 came back as parts holding only an
    opening tag)."""
    from langmem_paging.core.records import Page
    from langmem_paging.recall.render import page_parts

    text = " ".join(f"word{i} harbor lantern" for i in range(200))
    message = HumanMessage(text, id="m", additional_kwargs={"timestamp": "2024-01-09T15:30:00+00:00"})
    page = Page(
        id="p1",
        messages=[message],
        bookmark="[p1:x]",
        keywords=[],
        token_count=600,
        boundary="fixed_1",
        created_turn=1,
    )
    parts = page_parts(page, 24, COUNTER)
    assert len(parts) > 2
    bodies = [part.split("\n", 1)[1] for part in parts]
    assert all(re.search(r"word\d+", body) for body in bodies), "a part without text"
    assert bodies[0].startswith("user [2024-01-09T15 30 00+00 00]: word0")
    assert all(body.startswith("  ") for body in bodies[1:])
    assert all(COUNTER.count_text(part) <= 40 for part in parts)


def test_long_page_recallable_with_small_cap() -> None:
    """With the smallest cap (64 tokens), part 1 of a long page is shown (not only 'not shown: p1')."""
    pager = Pager(PagingConfig(max_tokens=120, boundary="fixed_2"), PageStore(InMemoryStore()))
    with (
        pytest.warns(PagingWarning, match="usually larger than one recall returns"),
        pytest.warns(PagingWarning, match="needs .* tokens"),  # each note alone passes the 120-token budget
    ):
        value, _ = step_exchanges(
            pager,
            [
                [
                    HumanMessage(f"A long note {i}: " + "honey and beeswax from Lake Bled " * 40, id=f"h{i}"),
                    AIMessage("ok", id=f"a{i}"),
                ]
                for i in range(6)
            ],
        )
    answer = pager.recall("t", value, page_ids=["p1"])
    cap = pager.config.recall_cap_for(PagingState.from_value(value).budget)
    assert "=== p1 · part 1 of" in answer.content and "honey" in answer.content, (
        f"cap {cap}: {answer.content[:160]!r}"
    )
    tokens = COUNTER.count_text(answer.content)
    assert tokens <= cap, f"{tokens} tokens > cap {cap}"
