"""Background English statistics: how common a word is outside this thread, and its stem.

A thread's first pages have no other pages to compare against, so IDF over the
thread's own pages cannot tell ``interesting`` from ``greyhound``. This module
gives the missing prior: a Zipf frequency table of about 90,000 lower-case English
words (``data/en_zipf.txt.gz``, 385 KB: Google Books Ngram counts intersected with
SCOWL; provenance and licences in ``data/README.md``) and a Snowball (Porter2)
stemmer for merging inflections.

The table is read on first use, once per process (about 30 ms and 9 MB); importing
this module reads nothing and does not import the stemmer.

Example:
    >>> from langmem_paging.core.background import BACKGROUND, stem
    >>> BACKGROUND.zipf("the") > BACKGROUND.zipf("greyhound") > BACKGROUND.zipf("farid") == 0.0
    True
    >>> BACKGROUND.rarity("the"), BACKGROUND.rarity("Farid")
    (0.0, 1.0)
    >>> BACKGROUND.rarity("interesting") < BACKGROUND.rarity("greyhound")
    True
    >>> [stem(w) for w in ("adopted", "adopting", "adoption", "adoptive")]
    ['adopt', 'adopt', 'adopt', 'adopt']
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import re
import sys
import threading
import types
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["BACKGROUND", "BackgroundFrequencies", "stem"]

_TABLE = "en_zipf.txt.gz"


class BackgroundFrequencies:
    """Zipf frequencies of English words, loaded lazily from a gzipped table.

    The table format is one line per Zipf value, ``<zipf>\\t<word> <word> ...``;
    lines starting with ``#`` are comments. Zipf is ``log10`` of occurrences per
    10^9 words: 7.63 for "the", 3.51 for "greyhound", and 0.0 here for a word
    the table does not have.

    Args:
        path: A table in that format; None for the one shipped with the package.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = path
        self._zipf: dict[str, float] | None = None
        self._max = 0.0
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the table has been read (it is read on the first lookup)."""
        return self._zipf is not None

    def _table(self) -> dict[str, float]:
        table = self._zipf
        if table is None:
            with self._lock:
                if self._zipf is None:
                    self._zipf, self._max = _read(self._path)
                table = self._zipf
        return table

    def zipf(self, term: str) -> float:
        """Zipf frequency of `term` (case-insensitive); 0.0 when the table lacks it.

        A word the table lacks that is made of table words is scored from its parts:
        a clitic form by its host (``must've`` and ``didn't`` as ``must`` and ``did``),
        any other compound by its rarest part of two letters or more (``go-to`` as
        ``go``, ``dog-friendly`` as ``friendly``, ``o'clock`` as ``clock``).
        """
        table = self._table()
        term = _normal(term)
        found = table.get(term)
        if found is not None:
            return found
        if "'" in term:
            host, _, clitic = term.partition("'")
            if clitic in _CLITICS:
                for word in (host[:-1] if clitic == "t" else host, host):  # didn't -> did, can't -> can
                    if word in table:
                        return table[word]
        pieces = _JOINERS.split(term)
        if len(pieces) > 1:
            long_pieces = [p for p in pieces if len(p) > 1]
            if long_pieces:
                return min(self.zipf(p) for p in long_pieces)
        return 0.0

    def rarity(self, term: str) -> float:
        """How rare `term` is in English, from 0.0 (the most common word) to 1.0 (not in the table).

        ``1 - zipf(term) / zipf(most common word)``: an IDF-like weight to multiply
        a term's score by, so that everyday words fall behind distinctive ones
        even on a thread's first page.
        """
        zipf = self.zipf(term)
        return 1.0 - zipf / self._max

    def __contains__(self, term: object) -> bool:
        """Whether the table lists `term` itself (case-insensitive; no scoring by parts)."""
        return isinstance(term, str) and _normal(term) in self._table()

    def __len__(self) -> int:
        return len(self._table())


_CLITICS = frozenset({"s", "t", "d", "ll", "m", "re", "ve"})
_JOINERS = re.compile(r"[-'/.]+")


def _normal(term: str) -> str:
    return term.lower().replace("’", "'")


def _read(path: str | Path | None) -> tuple[dict[str, float], float]:
    if path is None:
        raw = resources.files("langmem_paging").joinpath("data", _TABLE).read_bytes()
    else:
        raw = Path(path).read_bytes()
    table: dict[str, float] = {}
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        value, _, words = line.partition("\t")
        zipf = float(value)
        for word in words.split():
            table.setdefault(word, zipf)
    top = max(table.values(), default=0.0)
    if top <= 0.0:
        raise ValueError(f"Background frequency table without positive Zipf values: {path or _TABLE}")
    return table, top


BACKGROUND = BackgroundFrequencies()
"""The shared table shipped with the package; read on its first lookup."""


_STEM_LOCK = threading.Lock()
_STEMMER = None


MAX_STEMS = 32768
"""Stems the process remembers (a bounded cache shared by all threads: it grows with the
vocabulary seen, not with pages; past the bound the older half is forgotten)."""
_STEMS: dict[str, str] = {}


_SNOWBALL = "_langmem_paging_snowball"


def _english_stemmer() -> Any:
    """Snowball's pure-Python English stemmer alone, loaded on first use.

    Not `snowballstemmer.stemmer("english")`: it switches to PyStemmer where that is installed, and
    stems must not depend on that. Not `from snowballstemmer.english_stemmer import ...` either: that
    runs the package's ``__init__``, which imports all of its 30 languages (20 ms idle, hundreds of
    ms on a busy machine, on whatever thread forms the first page: an event loop's). The English
    module needs only its two siblings, so the package's directory is mounted under a private name
    with no ``__init__`` run (an app importing `snowballstemmer` itself still gets the real one)."""
    if _SNOWBALL not in sys.modules:
        spec = importlib.util.find_spec("snowballstemmer")  # locates the package without running it
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("langmem-paging needs the snowballstemmer package: pip install snowballstemmer")
        package = types.ModuleType(_SNOWBALL)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[_SNOWBALL] = package
    return importlib.import_module(f"{_SNOWBALL}.english_stemmer").EnglishStemmer()


def _stem_uncached(term: str) -> str:
    global _STEMMER
    normal = _normal(term)
    if normal[-1:].isascii() and normal[-1:].isdigit() and normal[:1] != "'":
        return normal  # Porter2 only rewrites letter suffixes (and drops a leading apostrophe)
    with _STEM_LOCK:  # a Snowball stemmer keeps its working string on the instance
        if _STEMMER is None:
            _STEMMER = _english_stemmer()
        return str(_STEMMER.stemWord(normal))


def stem(term: str) -> str:
    """Snowball (Porter2) English stem of the lower-cased `term`, cached.

    ``stem("Adoption") == stem("adopted") == "adopt"``; names pass through mostly
    unchanged (``stem("farid") == "farid"``, ``stem("caroline") == "carolin"``).
    """
    global _STEMS
    cached = _STEMS.get(term)
    if cached is not None:
        return cached
    result = _stem_uncached(term)
    if result == term:
        result = term  # one string for key and value (most words are their own stem)
    stems = _STEMS
    if len(stems) >= MAX_STEMS:
        # keep the newer half (a plain dict, no per-entry links: about half the memory of functools.lru_cache)
        _STEMS = stems = dict(list(stems.items())[len(stems) // 2 :])
    stems[term] = result
    return result


setattr(stem, "__wrapped__", _stem_uncached)  # noqa: B010 - the uncached stemmer, as functools.wraps would name it


def _clear_stems() -> None:
    _STEMS.clear()


stem.cache_clear = _clear_stems  # type: ignore[attr-defined]
