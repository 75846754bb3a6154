"""The `lexical` reader: a fixed, offline measuring instrument for bookmark discrimination.

What it does, exactly (change it only in a commit of its own, and report the change):
1. It sees only what a model would see: the resident messages and the bookmarks,
   never the text of evicted pages, plus the question. When bookmarks alone push the
   view over the budget, the harness first cuts it from the front to fit (as a hard
   context limit would); the reader sees what is left.
2. Each bookmark ``[pN:kw1 kw2 ...]`` (or ``[pN:kw1,kw2,...]``) is a document of its keywords, lower-cased and
   split into content words (`langmem_paging.core.text.content_terms`).
   A cluster bookmark ``[cN:kw,...|p1-p9]`` is a document of its keywords too; when it
   ranks, its member pages take its place, ranked by their own bookmarks (what a model
   gets by recalling the cluster id). (lexical-2; lexical-1 had no clusters to read.)
3. It scores every bookmark with BM25 (rank-bm25 `BM25Okapi`, default k1=1.5, b=0.75)
   against the question's content words, and keeps bookmarks sharing a word with it.
4. It recalls pages best-first (ties: lower page number) while they fit the budget.

Reader modes (lexical-3; the `bookmarks` mode ranks exactly as lexical-2):
- ``bookmarks``: steps 1-4.
- ``search``: the reader ignores the bookmarks and calls the library's passage search,
  ``recall(query=question)``; what the tool returns is what reaches the context.
- ``bookmarks_then_search``: pages whose bookmarks match the question *strongly* are recalled
  by id, and the same recall call searches with the question for the rest (the library
  puts the named pages first and fills the recall cap with search hits). A bookmark matches
  strongly (`strong_bookmarks`) when both hold:
  (a) it shares with the question a term that is rare in English (background rarity at least
  `STRONG_RARITY`, i.e. Zipf frequency at most about 4.6, under 40 per million words: names,
  "pottery", "greyhound"; not "park", "support") and rare
  among the visible bookmarks (on at most `STRONG_MAX_BOOKMARKS` of them), and
  (b) its BM25 score is at least `STRONG_RELATIVE_SCORE` of the best bookmark's score.
  At most `MAX_STRONG` pages are named; with that many, no search is made.
- ``semantic`` (`evals.readers.semantic`): steps 1 and 4, but bookmarks are ranked by MiniLM
  cosine similarity between the question and the bookmark's keywords.
In every mode the reader recalls nothing when the view it sees shows no bookmark (nothing has
been paged out, so there is nothing to search).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage
from rank_bm25 import BM25Okapi

from langmem_paging.core.background import BACKGROUND
from langmem_paging.core.library_messages import parse_bookmark
from langmem_paging.core.messages import is_bookmark, library_mark
from langmem_paging.core.text import content_terms

_CLUSTER = re.compile(r"\[(c\d+):([^\[\]|\n]*)\|[^\[\]\n]*\]")

READER_VERSION = "lexical-3"
READER_MODES = ("bookmarks", "search", "bookmarks_then_search", "semantic")
"""How the paging method's offline reader finds pages (see the module docstring)."""
STRONG_RARITY = 0.4
STRONG_MAX_BOOKMARKS = 2
STRONG_RELATIVE_SCORE = 0.5
MAX_STRONG = 3


def visible_bookmarks(view: Sequence[BaseMessage]) -> list[tuple[str, list[str]]]:
    """``(page_or_cluster_id, keywords)`` of each library bookmark in the view, in order. A warm
    page (tier scoring) is shown by a digest instead: its words stand for the page."""
    out = []
    for message in view:
        if not is_bookmark(message):
            continue
        text = str(message.content)
        meta = library_mark(message)
        if meta.get("tier") == "warm" and isinstance(meta.get("bookmark"), str):
            out.append((meta["bookmark"], content_terms(text.split("\n", 1)[-1])))
            continue
        parsed = parse_bookmark(text)
        cluster = _CLUSTER.fullmatch(text.strip())
        if parsed:
            out.append(parsed)
        elif cluster:
            out.append((cluster.group(1), [k for k in cluster.group(2).split(",") if k]))
    return out


def score_bookmarks(
    question: str, bookmarks: Sequence[tuple[str, list[str]]]
) -> list[tuple[str, float, set[str]]]:
    """``(id, BM25 score, shared terms)`` of each bookmark sharing a word with the question,
    best first (ties: page before cluster, lower number)."""
    if not bookmarks:
        return []
    docs = [content_terms(" ".join(keywords)) for _, keywords in bookmarks]
    terms = content_terms(question)
    if not terms:
        return []
    scores = BM25Okapi([d or ["\0"] for d in docs]).get_scores(terms)
    ranked = [
        ((-score, page_id[0] == "c", int(page_id[1:])), (page_id, float(score), set(terms) & set(doc)))
        for (page_id, _), score, doc in zip(bookmarks, scores, docs, strict=True)
        if set(terms) & set(doc)
    ]
    return [item for _, item in sorted(ranked, key=lambda r: r[0])]


def rank_bookmarks(question: str, bookmarks: Sequence[tuple[str, list[str]]]) -> list[str]:
    """Page (and cluster) ids whose bookmarks share a word with the question, best BM25 score first."""
    return [page_id for page_id, _, _ in score_bookmarks(question, bookmarks)]


def strong_bookmarks(question: str, bookmarks: Sequence[tuple[str, list[str]]]) -> list[tuple[str, set[str]]]:
    """``(id, rare shared terms)`` of the bookmarks that match `question` strongly, best first
    (the rule is in the module docstring).

    Example:
        >>> marks = [("p1", ["greyhound", "park"]), ("p2", ["park", "weather"]), ("p3", ["dinner"])]
        >>> strong_bookmarks("Where does the greyhound run?", marks)
        [('p1', {'greyhound'})]
        >>> strong_bookmarks("How was the park?", marks)  # common word on two bookmarks: not strong
        []
    """
    scored = score_bookmarks(question, bookmarks)
    if not scored:
        return []
    frequency: dict[str, int] = {}
    for _, keywords in bookmarks:
        for term in set(content_terms(" ".join(keywords))):
            frequency[term] = frequency.get(term, 0) + 1
    best = scored[0][1]
    out = []
    for page_id, score, shared in scored:
        rare = {
            t
            for t in shared
            if BACKGROUND.rarity(t) >= STRONG_RARITY and frequency[t] <= STRONG_MAX_BOOKMARKS
        }
        if rare and score >= STRONG_RELATIVE_SCORE * best:
            out.append((page_id, rare))
    return out
