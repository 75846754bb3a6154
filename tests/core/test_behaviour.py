"""Behaviour tests: each policy, boundary and tier mode does what its name says, so each test
fails if the component is swapped for another (the conformance suite only checks invariants)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging import page_messages, paging_reducer
from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.core.state import recall_delta
from langmem_paging.strategies.policies import get_policy
from langmem_paging.strategies.policy import Candidate, PolicyContext
from langmem_paging.strategies.tiers import TierScoring, UtilityScoring
from tests.support.harness import COUNTER, replay


def candidate(key, position, *, created=1, last=1, count=0, text="", tokens=10):
    return Candidate(
        key=key,
        kind="page",
        page_ids=(key,),
        position=position,
        tokens=tokens,
        created_turn=created,
        last_access=last,
        access_count=count,
        messages=(HumanMessage(text or key, id=f"m-{key}"),),
    )


# -- policies -----------------------------------------------------------------------------

PAGES = [
    candidate("p2", 0, created=2, last=5, count=1, text="Pottery class: glazing the blue bowl on Tuesday."),
    candidate("p1", 1, created=1, last=4, count=2, text="We booked the Lisbon flight and the seaside hotel."),
    candidate("p3", 2, created=3, last=3, count=0, text="The kiln fired the pottery glazing overnight."),
]
CONTEXT = PolicyContext(turn=6, recent_text="How did the glazing go at the pottery class?")


@pytest.mark.parametrize(
    "policy, expected",
    [
        ("fifo", "p2"),  # the oldest position
        ("lru", "p3"),  # the least recent use (turn 3)
        ("lfu", "p3"),  # the fewest recalls (0)
        ("semantic", "p1"),  # the least like the recent context (pottery, glazing)
    ],
)
def test_each_policy_picks_its_own_victim(policy, expected):
    assert get_policy(policy).victim(PAGES, CONTEXT).key == expected


def test_lfu_and_lru_differ_when_the_most_recalled_page_is_the_least_recent():
    pages = PAGES[:2]  # p1: recalled twice, last at turn 4; p2: once, at turn 5
    assert get_policy("lfu").victim(pages, CONTEXT).key == "p2"
    assert get_policy("lru").victim(pages, CONTEXT).key == "p1"


def _turns(n, prefix="t"):
    out = []
    for i in range(n):
        out += [
            HumanMessage(f"{prefix} question {i} about city{i}", id=f"{prefix}h{i}"),
            AIMessage(f"{prefix} answer {i} about city{i}", id=f"{prefix}a{i}"),
        ]
    return out


def test_recall_a_page_then_lru_evicts_the_next_one_first_and_fifo_the_recalled_one():
    """Through the paging step: a recall is an access, so LRU keeps the recalled page."""
    history = _turns(5) + [HumanMessage("now", id="n1")]
    victims = {}
    for policy in ("lru", "fifo"):
        first = page_messages(
            history,
            max_tokens=10,
            low_water_tokens=10,
            boundary="fixed_2",
            policy=policy,
            token_counter=len,
            text_counter=COUNTER,
            bookmark_share=1.0,
        )
        older, newer = sorted(first.state.pages, key=lambda p: int(p[1:]))[:2]  # both still resident
        # the model recalls it in the next user turn
        state = paging_reducer(first.state.to_value(), recall_delta([older], turn=first.state.turn + 1))
        later = [*first.view, AIMessage("ok", id="x1"), HumanMessage("next", id="n2")]
        second = page_messages(
            later,
            max_tokens=11,
            low_water_tokens=11,
            boundary="fixed_2",
            policy=policy,
            state=state,
            token_counter=len,
            text_counter=COUNTER,
            bookmark_share=1.0,
        )
        victims[policy] = (second.evicted[0], older, newer)
    assert victims["lru"][0] == victims["lru"][2] and victims["fifo"][0] == victims["fifo"][1]


# -- boundaries -------------------------------------------------------------------------


def _pages(history, boundary, **kw):
    run = replay(
        history,
        max_tokens=kw.pop("max_tokens", 60),
        boundary=boundary,
        token_counter=len,
        bookmark_share=1.0,
        **kw,
    )
    return [p for p in run.pages.values() if p.kind == "page"]


def test_fixed_n_cuts_every_n_messages():
    pages = _pages(_turns(12), "fixed_3", max_tokens=16)
    assert pages and all(len(p.messages) <= 3 for p in pages)
    assert sum(len(p.messages) == 3 for p in pages) >= 0.8 * len(pages)  # a tail may close short


def test_tokens_n_cuts_before_a_page_would_pass_n_tokens():
    history = [HumanMessage("word " * (5 + i % 7), id=f"h{i}") for i in range(40)]
    run = replay(
        history,
        max_tokens=120,
        boundary="tokens_40",
        text_counter=COUNTER,
        points=list(range(1, 41)),
        bookmark_share=1.0,
    )
    pages = [p for p in run.pages.values() if p.kind == "page"]
    assert pages and all(sum(COUNTER.count_message(m) for m in p.messages) <= 40 for p in pages)
    assert any(len(p.messages) > 1 for p in pages)


def test_exchange_cuts_at_each_user_turn():
    history = []
    for i in range(10):
        history += [
            HumanMessage(f"q{i}", id=f"h{i}"),
            AIMessage(f"a{i}", id=f"a{i}"),
            AIMessage(f"more {i}", id=f"b{i}"),
        ]
    pages = _pages(history, "exchange", max_tokens=10)
    assert pages
    for page in pages:
        assert isinstance(page.messages[0], HumanMessage) and len(page.messages) == 3


def test_session_cuts_where_the_session_changes():
    history = []
    for s in range(5):
        for i in range(4):
            meta = {"session_id": f"s{s}"}
            history += [
                HumanMessage(f"s{s} q{i}", id=f"h{s}{i}", additional_kwargs=meta),
                AIMessage(f"s{s} a{i}", id=f"a{s}{i}", additional_kwargs=meta),
            ]
    pages = _pages(history, "session", max_tokens=12)
    assert pages
    for page in pages:
        sessions = {m.additional_kwargs["session_id"] for m in page.messages}
        assert len(sessions) == 1 and len(page.messages) == 8  # a whole session each


def test_topic_shift_cuts_where_the_words_change():
    topics = ["violin bow rosin concerto strings", "garden tomatoes compost seedlings soil"]
    history = []
    for t, (words, turns) in enumerate(
        zip(topics * 3, [3, 5, 2, 4, 3, 5], strict=False)
    ):  # uneven: no fixed size fits
        for i in range(turns):
            history.append(HumanMessage(f"{words} {i}", id=f"h{t}{i}"))
            history.append(AIMessage(f"yes {words}", id=f"a{t}{i}"))
    pages = _pages(history, "topic_shift", max_tokens=16)
    assert pages
    for page in pages:
        first = {w for w in page.messages[0].content.split() if len(w) > 3}
        assert all(first & set(m.content.split()) for m in page.messages)


# -- tiers --------------------------------------------------------------------------------


def _tier_history():
    history = []
    for i in range(24):
        crowd = (
            f" Ana{i}, Petra{i}, Ivo{i} and Mojca{i} came from Ljubljana{i} and Koper{i}."
            if i % 4 == 1
            else ""
        )
        history += [
            HumanMessage(
                f"Note {i}: Zarko{i} keeps {120 + i} beehives near lake Bled{i}. The queen is calm." + crowd,
                id=f"h{i}",
            ),
            AIMessage(f"Noted, Zarko{i} and the bees of Bled{i}.", id=f"a{i}"),
        ]
    history[14] = history[14].model_copy(update={"additional_kwargs": {METADATA_KEY: {"importance": 10.0}}})
    return history


@pytest.mark.parametrize(
    "tiers",
    [TierScoring(w_rec=0, w_acc=0, w_sem=0, w_ent=0, w_uniq=0.1), UtilityScoring(tau=2.0)],
    ids=["importance", "utility"],
)
def test_an_important_page_stays_warm_as_a_digest_of_its_own_lines(tiers):
    run = replay(_tier_history(), max_tokens=700, boundary="fixed_2", tiers=tiers, text_counter=COUNTER)
    holder = next(pid for pid, p in run.pages.items() if any(m.id == "h7" for m in p.messages))
    warm = {pid for pid, s in run.paging["shown"].items() if s.get("tier") == "warm"}
    assert holder in warm, "the page with the importance marker is scored highest"
    digest = next(m for m in run.state if m.additional_kwargs.get(METADATA_KEY, {}).get("bookmark") == holder)
    assert digest.content.startswith(f"[{holder} digest of")
    for line in digest.content.splitlines()[1:]:
        said = line.split(": ", 1)[1]
        assert any(said in m.content for m in run.pages[holder].messages)  # extractive: verbatim


def test_importance_and_utility_choose_different_warm_pages():
    history = _tier_history()
    warm = {}
    # importance by its entity term alone (names, numbers, dates on the page) against utility's
    # recency: with every term on, both end up ranking by recency on this history
    for tiers in (TierScoring(w_rec=0, w_acc=0, w_sem=0, w_ent=1, w_uniq=0), UtilityScoring(tau=2.0)):
        run = replay(history, max_tokens=700, boundary="fixed_2", tiers=tiers, text_counter=COUNTER)
        warm[tiers.name] = {pid for pid, s in run.paging["shown"].items() if s.get("tier") == "warm"}
        assert warm[tiers.name]
    assert warm["importance"] != warm["utility"]


def test_utility_prunes_by_utility_per_token():
    mode = UtilityScoring(alpha=0.6, beta=0.4, tau=10)
    from langmem_paging.strategies.tiers import TierItem

    cheap = TierItem("p1", tokens=10, created_turn=1, last_access=5, access_count=1)
    dear = TierItem("p2", tokens=400, created_turn=1, last_access=5, access_count=1)
    scores = mode.scores([cheap, dear], turn=6, recent_terms=[])
    assert scores["p1"] == scores["p2"]  # the same utility...
    assert mode.rank_key(cheap, scores["p1"]) > mode.rank_key(dear, scores["p2"])  # ...the big one goes first


def test_a_tool_result_keeps_its_call_in_every_tier():
    history = [HumanMessage("look it up", id="h")]
    for i in range(12):
        call = {"name": "lookup", "args": {"q": f"bees {i}"}, "id": f"c{i}"}
        history += [
            AIMessage("", tool_calls=[call], id=f"t{i}"),
            ToolMessage(f"Bled{i} has {i} hives", tool_call_id=f"c{i}", id=f"r{i}"),
        ]
    from tests.support.harness import assert_valid_chat

    run = replay(history, max_tokens=260, boundary="fixed_2", tiers=TierScoring(), text_counter=COUNTER)
    for result in run.steps:
        assert_valid_chat(result.view)
