"""Background word frequencies and the stemmer (langmem_paging.core.background)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from importlib import resources

import pytest

from langmem_paging.core.background import BACKGROUND, BackgroundFrequencies, stem

COMMON = ["the", "said", "really", "interesting", "tell", "else", "thing"]
DISTINCTIVE = ["greyhound", "pottery", "Farid", "marathon", "adoption", "kickboxing"]


@pytest.mark.parametrize("common", COMMON)
@pytest.mark.parametrize("distinctive", DISTINCTIVE)
def test_common_words_are_less_rare_than_distinctive_ones(common, distinctive):
    assert BACKGROUND.rarity(common) < BACKGROUND.rarity(distinctive)
    assert BACKGROUND.zipf(common) > BACKGROUND.zipf(distinctive)


def test_unknown_words_are_rarest():
    assert BACKGROUND.zipf("farid") == 0.0 and "farid" not in BACKGROUND
    for unknown in ("farid", "qzxv", "lgbtq"):
        assert BACKGROUND.rarity(unknown) == 1.0
    for known in COMMON + ["greyhound", "pottery", "marathon", "zygote"]:
        assert known in BACKGROUND
        assert 0.0 <= BACKGROUND.rarity(known) < 1.0
    assert BACKGROUND.rarity("the") == 0.0  # the commonest word of the table


def test_scale_and_size_of_the_shipped_table():
    assert BACKGROUND.zipf("the") == pytest.approx(7.63)
    assert 3.0 < BACKGROUND.zipf("greyhound") < 4.0
    assert 80_000 < len(BACKGROUND) < 100_000
    data = resources.files("langmem_paging").joinpath("data")
    assert len(data.joinpath("en_zipf.txt.gz").read_bytes()) < 1_000_000
    readme = data.joinpath("README.md").read_text(encoding="utf-8")
    for credit in ("Google Books Ngram", "CC BY 3.0", "Kevin Atkinson", "symspellpy"):
        assert credit in readme  # the attribution the data licences ask for ships with it


def test_lookups_ignore_case_and_curly_apostrophes():
    assert BACKGROUND.zipf("Greyhound") == BACKGROUND.zipf("GREYHOUND") == BACKGROUND.zipf("greyhound")
    assert BACKGROUND.zipf("didn’t") == BACKGROUND.zipf("didn't") > 5.0


def test_american_spellings_and_inflections_are_covered():
    # The source list is British-leaning and cut at ~80k words; these were added from SCOWL.
    for word in ("favorite", "favorites", "mom", "theater", "neighborhood", "counseling", "colors"):
        assert 3.0 < BACKGROUND.zipf(word) < 6.0, word


def test_clitics_and_compounds_are_scored_by_their_parts():
    assert BACKGROUND.zipf("must've") == BACKGROUND.zipf("must")
    assert BACKGROUND.zipf("can't") == BACKGROUND.zipf("can")
    assert BACKGROUND.zipf("didn't") == BACKGROUND.zipf("did")
    assert BACKGROUND.zipf("go-to") == min(BACKGROUND.zipf("go"), BACKGROUND.zipf("to"))
    assert BACKGROUND.zipf("o'clock") == BACKGROUND.zipf("clock")
    assert BACKGROUND.rarity("to-do") < BACKGROUND.rarity("greyhound")
    assert BACKGROUND.zipf("thought-provoking") == BACKGROUND.zipf("provoking")
    assert BACKGROUND.zipf("farid-style") == 0.0  # an unknown part makes the compound unknown
    assert BACKGROUND.zipf("-") == BACKGROUND.zipf("x-") == 0.0


def test_stems_merge_inflections_and_derivations():
    assert {stem(w) for w in ("adopt", "adopted", "adopting", "adoption", "adopts", "adoptive")} == {"adopt"}
    assert {stem(w) for w in ("paint", "painted", "painting", "paintings")} == {"paint"}
    assert {stem(w) for w in ("friend", "friends", "friendly")} == {"friend"}
    assert stem("Marathons") == stem("marathon") == "marathon"
    assert stem("farid") == "farid" and stem("caroline") == "carolin"


def test_stems_keep_apart_what_they_should():
    assert stem("painter") != stem("paint")
    assert stem("counselor") != stem("counseling")
    assert stem("ran") != stem("run")  # no lemmatisation of irregular forms
    assert len({stem("universe"), stem("university"), stem("universal")}) == 3
    assert stem("news") != stem("new")


def test_stems_are_snowball_3_english():
    # Snowball 3.x changed a few English stems (2.x: univers, intern, ad); a change here
    # means the snowballstemmer pin moved and merged keywords may differ.
    assert [stem(w) for w in ("university", "international", "adding", "skis")] == [
        "universiti",
        "internat",
        "add",
        "ski",
    ]


def test_stemming_is_thread_safe():
    words = [
        f"{root}{suffix}"
        for root in ("adopt", "paint", "walk", "jump", "talk")
        for suffix in ("ed", "ing", "s", "er")
    ]
    words = words * 50
    expected = [stem.__wrapped__(w) for w in words]
    results: list[list[str]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        results[i] = [stem.__wrapped__(w) for w in words]  # bypass the cache: hit the shared stemmer

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)


_PROBE = """
import json, sys
import langmem_paging.core.background as bg
before = {"loaded": bg.BACKGROUND.loaded, "stemmer_imported": "snowballstemmer" in sys.modules}
words = ["the", "greyhound", "farid", "go-to", "must've", "favorite"]
values = [[bg.BACKGROUND.zipf(w), bg.BACKGROUND.rarity(w), bg.stem(w)] for w in words]
print(json.dumps({"before": before, "after": bg.BACKGROUND.loaded, "values": values}))
"""


def _probe(seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_loads_nothing_and_lookups_are_deterministic():
    first, second = _probe("1"), _probe("2")
    assert first["before"] == {"loaded": False, "stemmer_imported": False}
    assert first["after"] is True
    assert first["values"] == second["values"]  # across processes and hash seeds
    here = [
        [BACKGROUND.zipf(w), BACKGROUND.rarity(w), stem(w)]
        for w in ["the", "greyhound", "farid", "go-to", "must've", "favorite"]
    ]
    assert first["values"] == here


def test_a_fresh_instance_is_lazy_and_agrees():
    fresh = BackgroundFrequencies()
    assert not fresh.loaded
    assert fresh.zipf("pottery") == BACKGROUND.zipf("pottery")
    assert fresh.loaded


def test_custom_table(tmp_path):
    path = tmp_path / "t.txt.gz"
    path.write_bytes(gzip.compress(b"# a comment\n6.00\tcat dog\n2.00\taardvark\n\n"))
    table = BackgroundFrequencies(path)
    assert len(table) == 3 and "Dog" in table
    assert table.rarity("cat") == 0.0
    assert table.rarity("aardvark") == pytest.approx(1 - 2 / 6)
    assert table.rarity("zebra") == 1.0


@pytest.mark.parametrize("content", [b"# only a comment\n", b"0.00\tnothing\n"])
def test_unusable_table_is_refused(tmp_path, content):
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(gzip.compress(content))
    with pytest.raises(ValueError):
        len(BackgroundFrequencies(path))


@pytest.mark.parametrize(
    "word",
    [
        "mirela57",
        "bohinj12",
        "2023",
        "'kestrel9",
        "Ying4",
        "studies1",
        "runs's7",
        "running-3",
        "y2",
        "Éclair5",
    ],
)
def test_a_word_ending_in_a_digit_skips_the_stemmer_with_its_stem(word: str) -> None:
    from langmem_paging.core.background import _english_stemmer

    assert stem.__wrapped__(word) == _english_stemmer().stemWord(word.lower())
