"""Bookmarks v5 (issue 24, "bookmarks worth choosing"): one test per rule, each failing without it.

- the default bookmark is ``compact``: words space-separated, the date after a comma (twice the
  words of a comma list in the same tokens); ``keywords`` is the comma form ``[pN:kw1,kw2,...]``;
- a page's term frequency counts linearly (what the page keeps coming back to leads);
- interjections are never keywords; a weekday's abbreviation is a date (at most one date);
- forgetting a message drops only its words from a bookmark's run of words.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging import KeywordBookmarker, PageDraft, TokenCounter, page_messages, parse_bookmark
from langmem_paging.core.records import Page
from langmem_paging.storage.lifecycle import forget_in_page
from langmem_paging.strategies.bookmarks import BookmarkContext, render_bookmark, shown_keywords
from langmem_paging.strategies.keywords import is_date

COUNTER = TokenCounter()

WORDS = [
    "kayak",
    "glacier",
    "lantern",
    "violin",
    "orchard",
    "pottery",
    "harbour",
    "meteor",
    "canyon",
    "falcon",
    "tulip",
    "marathon",
    "telescope",
    "quilt",
    "bakery",
    "compass",
]


def _mark(messages, doc_freq=None, n_docs=0, separator=","):
    ctx = BookmarkContext(count_text=COUNTER.count_text, doc_freq=doc_freq or {}, n_docs=n_docs)
    return KeywordBookmarker(separator=separator).bookmark([PageDraft("p5", messages)], ctx)[0]


def _date_page() -> list:
    history = [
        HumanMessage(f"On 25 May we talked about the {a} and the {b}.", id=f"h{i}")
        for i, (a, b) in enumerate(zip(WORDS[::2], WORDS[1::2], strict=True))
    ]
    return [*history, HumanMessage("and now?", id="q1"), AIMessage("now this.", id="q2")]


def _view_bookmark(bookmarker: str | None) -> str:
    """The bookmark of `_date_page`'s first page, through the pure paging function."""
    options = {} if bookmarker is None else {"bookmarker": bookmarker}
    result = page_messages(
        _date_page(),
        max_tokens=4,
        low_water_tokens=3,
        boundary="fixed_8",
        token_counter=len,
        bookmark_share=1.0,
        **options,
    )
    return str(result.view[0].content)


@pytest.mark.parametrize(
    ("bookmarker", "compact"),
    [(None, True), ("compact", True), ("keywords", False), ("discriminative", False)],
)
def test_each_bookmarker_shows_its_form_and_the_default_is_compact(bookmarker, compact):
    """The default (``bookmarker=None``) and ``compact``: the words space-separated, the date after
    a comma, 12+ words in at most 23 tokens (``[p1:w1 w2 ...,25 May]``); ``keywords`` and
    ``discriminative``: the comma form, one word per keyword (``[p1:w1,w2,...,25 May]``), at most
    24 tokens. Swapping the default for another strategy fails the first case."""
    bookmark = _view_bookmark(bookmarker)
    page_id, groups = parse_bookmark(bookmark)
    assert page_id == "p1" and groups[-1] == "25 May", bookmark  # the date last, after a comma
    if compact:
        assert len(groups) == 2 and len(groups[0].split()) >= 12, bookmark
        assert 8 <= COUNTER.count_text(bookmark) <= 23
    else:
        assert len(groups) >= 5 and all(len(g.split()) == 1 for g in groups[:-1]), bookmark
        assert 8 <= COUNTER.count_text(bookmark) <= 24


def test_the_default_bookmark_is_the_compact_one_byte_for_byte():
    assert _view_bookmark(None) == _view_bookmark("compact")
    assert _view_bookmark(None) != _view_bookmark("keywords")


def test_render_bookmark_puts_the_words_first_and_the_date_last():
    assert render_bookmark("p3", ["Bailey", "12 March", "dog"]) == "[p3:Bailey,dog,12 March]"
    text = render_bookmark("p3", ["Bailey", "12 March", "dog"], separator=" ")
    assert text == "[p3:Bailey dog,12 March]"
    assert shown_keywords(text) == ["Bailey", "dog", "12 March"]


def test_a_word_the_page_keeps_coming_back_to_outranks_a_one_off():
    """The compact bookmarker counts a page's terms linearly. kayak: 3 times here, on 4 of 10 pages;
    zeppelin: once, on this page only. With ``1 + ln tf`` (the default's) zeppelin scores 2.50
    against kayak's 2.33; counted linearly kayak leads (3.33)."""
    page = [
        HumanMessage("The kayak tipped over, the kayak is fine, I love that kayak.", id="m1"),
        AIMessage("A zeppelin flew over.", id="m2"),
    ]
    mark = _mark(page, doc_freq={"kayak": 4, "zeppelin": 1}, n_docs=10, separator=" ")
    assert mark.keywords.index("kayak") < mark.keywords.index("zeppelin"), mark.keywords
    default = _mark(page, doc_freq={"kayak": 4, "zeppelin": 1}, n_docs=10)
    assert default.keywords.index("zeppelin") < default.keywords.index("kayak"), default.keywords


def test_interjections_are_never_keywords():
    page = [
        HumanMessage("Yep, wanna see the glacier? Btw the lantern broke. Bye, Wow!", id="m1"),
        AIMessage("Hey! Okay, bye.", id="m2"),
    ]
    words = {w.lower() for w in _mark(page).keywords}
    assert {"glacier", "lantern"} <= words
    assert not words & {"yep", "wanna", "btw", "bye", "wow", "hey", "okay"}, words


def test_a_weekday_abbreviation_is_a_date_so_one_date_is_shown():
    page = [HumanMessage("Fri was the regatta at the harbour; on 12 March it was the Tues race.", id="m1")]
    mark = _mark(page)
    dates = [w for w in mark.keywords if is_date(w.lower())]
    assert dates == ["12 March"], mark.keywords
    assert not {"fri", "tues"} & {w.lower() for w in mark.keywords}, mark.keywords  # nor beside it
    assert "harbour" in shown_keywords(mark.text)


def test_forgetting_a_message_keeps_the_other_words_of_the_bookmark():
    messages = [
        HumanMessage("My card is 4111222233334444, the harbour photo is lovely.", id="m1"),
        AIMessage("The boat moored in the harbour, great photo of the lighthouse.", id="m2"),
    ]
    mark = _mark(messages)
    assert "4111222233334444" in mark.text and "lighthouse" in mark.text, mark.text
    page = Page(
        id="p5",
        messages=messages,
        bookmark=mark.text,
        keywords=mark.keywords,
        token_count=20,
        boundary="fixed_2",
        created_turn=1,
    )
    scrubbed, gone = forget_in_page(page, "m1")
    assert "4111222233334444" in gone and "4111222233334444" not in scrubbed.bookmark
    assert {"boat", "lighthouse", "moored"} <= set(shown_keywords(scrubbed.bookmark)), scrubbed.bookmark
