"""`storable` escapes a record exactly when one of its strings holds what a database refuses (NUL, a
lone surrogate), wherever the string sits (a message, a key of a term map), and never a record whose
text merely spells such an escape out (a literal ``\\u0000`` typed by a user); both read back exact."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from langmem_paging.core.records import ESCAPED_KEY, ClusterNode, Page, from_storable, storable


def _page(text: str) -> Page:
    return Page(
        id="p1",
        messages=[HumanMessage(text, id="m1")],
        bookmark="[p1:x]",
        keywords=["x"],
        token_count=3,
        boundary="fixed_2",
        created_turn=1,
    )


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain é 🦓", False),
        ("typed \\u0000 literally", False),
        ("typed \\\\u0000 with two backslashes", False),
        ("a\x00b", True),
        ("backslash then NUL \\\x00", True),
        ("lone \ud800 surrogate", True),
        ("lone \udfff at the end", True),
    ],
)
def test_a_record_is_escaped_only_when_a_string_holds_what_a_database_refuses(text, escaped):
    data = _page(text).to_dict()
    assert (ESCAPED_KEY in data) is escaped
    assert Page.from_dict(data).messages[0].content == text
    node = ClusterNode("c1", ["p1"], 1, 1, 1, "[c1:x]", terms={text: 1.0, "x": 0.5})
    stored = node.to_dict()
    assert (ESCAPED_KEY in stored) is escaped
    assert ClusterNode.from_dict(stored).terms == node.terms


@pytest.mark.parametrize("text", ["plain", "a\x00b", "lone \ud800", "typed \\u0000"])
@pytest.mark.parametrize("key", [7, "k"])
def test_the_check_agrees_on_a_record_orjson_refuses(text, key):
    """A record orjson will not dump (a key that is not a string) is read off `json`'s text instead."""
    data = {"id": "p1", "features": {key: text, "weight": 0.5}}
    escaped = "\x00" in text or "\ud800" in text
    assert (ESCAPED_KEY in storable(data)) is escaped
    assert from_storable(storable(data)) == data
