"""Bookmarks a model can choose from (issue 24): no participant's name, at most one date, words
distinctive within the thread, at least one topic word; cluster terms likewise."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging import (
    KeywordBookmarker,
    PageDraft,
    TokenCounter,
    is_bookmark,
    page_messages,
    parse_bookmark,
)
from langmem_paging.strategies.bookmarks import BookmarkContext, shown_keywords
from langmem_paging.strategies.keywords import is_date

COUNTER = TokenCounter()


def _mark(messages, doc_freq=None, n_docs=0, **context):
    ctx = BookmarkContext(count_text=COUNTER.count_text, doc_freq=doc_freq or {}, n_docs=n_docs, **context)
    return KeywordBookmarker().bookmark([PageDraft("p5", messages)], ctx)[0]


def _shown(mark) -> list[str]:
    parsed = parse_bookmark(mark.text)
    assert parsed is not None
    return shown_keywords(mark.text)


CHAT = [
    HumanMessage(
        "Mel, Caroline here: I finally went to the pottery class with Caroline's cousin Tamsin.",
        id="m1",
        name="Caroline",
    ),
    AIMessage(
        "Caroline, that's great! Did Tamsin make a bowl? Caroline, send pics.", id="m2", name="Melanie"
    ),
    HumanMessage(
        "She made a bowl and a mug, Melanie. The kiln broke twice though, Melanie.", id="m3", name="Caroline"
    ),
]


def test_participants_names_are_never_keywords():
    mark = _mark(CHAT)
    words = {w.lower() for w in mark.keywords}
    assert not words & {"caroline", "melanie", "mel"}, mark.keywords  # nor a short form of one
    assert "Tamsin" in _shown(mark)  # a name that is not a participant's stays
    assert not {t.lower() for t in mark.terms} & {"caroline", "melanie", "mel"}  # cluster terms likewise


def test_participants_known_to_the_thread_are_left_out_even_when_silent_on_the_page():
    page = [HumanMessage("Farid said the greyhound race was fun; Farid won, Farid!", id="m1", name="Jon")]
    assert "Farid" in _mark(page).keywords
    assert "Farid" not in _mark(page, participants=frozenset({"Farid Haddad"})).keywords


def test_a_bookmark_shows_at_most_one_date_the_most_specific():
    page = [
        HumanMessage(
            "(1:56 pm on 8 May, 2023) On Friday in May we sailed to Hvar; 12 March 2024 was the "
            "regatta, and 2022 the first one.",
            id="m1",
            name="Jon",
        ),
        AIMessage("Hvar in May! Friday regatta again in 2024?", id="m2", name="Gina"),
    ]
    mark = _mark(page)
    dates = [w for w in mark.keywords if is_date(w.lower())]
    assert len(dates) == 1 and " " in dates[0], mark.keywords  # a day with its month, not "May" or "2024"
    assert "Hvar" in _shown(mark)
    assert not [t for t in mark.terms if is_date(t.lower())]  # clusters span many dates: none in their terms


def test_a_word_distinctive_in_the_thread_beats_a_globally_rare_word_the_thread_shares():
    page = [
        HumanMessage(
            "The greyhound chased the greyhound next door; my greyhound then ate bread.", id="m1", name="Jon"
        )
    ]
    # "greyhound" is rare in English but on 9 of the thread's 10 pages; "bread" is on this page only
    mark = _mark(page, doc_freq={"greyhound": 9, "bread": 1}, n_docs=10)
    assert mark.keywords.index("bread") < mark.keywords.index("greyhound"), mark.keywords
    alone = _mark(page)  # with no thread yet, the page's own frequent word leads
    assert alone.keywords.index("greyhound") < alone.keywords.index("bread")


def test_a_bookmark_has_a_topic_word_even_among_many_names_and_numbers():
    names = "Tromsø Bergen Lisbon Haifa Kyoto Quito Lagos Hanoi Oaxaca Tbilisi Yerevan Bukhara Samarkand"
    page = [HumanMessage(f"and {names} and {names} and 4471 and 8823 and kayak", id="m1", name="Jon")]
    mark = _mark(page, doc_freq={"kayak": 9}, n_docs=10)  # the topic word scores below every place
    shown = _shown(mark)
    assert "kayak" in shown, mark.text
    assert 8 <= COUNTER.count_text(mark.text) <= 24


def test_bookmarks_in_the_view_leave_out_the_speakers():
    """Through the pure paging function: the view's bookmarks carry no participant's name."""
    history = [
        HumanMessage(f"Caroline here: my {w} story, Melanie!", id=f"h{i}", name="Caroline")
        if i % 2 == 0
        else AIMessage(f"Caroline, lovely {w}! Melanie loves a {w}.", id=f"h{i}", name="Melanie")
        for i, w in enumerate(["pottery", "pottery", "camping", "camping", "violin", "violin", "x", "y"])
    ]
    result = page_messages(
        history, max_tokens=4, boundary="fixed_2", token_counter=len, text_counter=COUNTER, bookmark_share=1.0
    )
    marks = " ".join(str(m.content) for m in result.view if is_bookmark(m)).lower()  # pages and clusters
    assert "pottery" in marks and "camping" in marks, marks
    assert "caroline" not in marks and "melanie" not in marks, marks
