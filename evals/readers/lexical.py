"""The `lexical` reader: a fixed, offline measuring instrument for bookmark discrimination.

What it does, exactly (change it only in a commit of its own, and report the change):
1. It sees only what a model would see: the resident messages and the bookmarks,
   never the text of evicted pages, plus the question. When bookmarks alone push the
   view over the budget, the harness first cuts it from the front to fit (as a hard
   context limit would); the reader sees what is left.
2. Each bookmark ``[pN:kw1,kw2,...]`` is a document of its keywords, lower-cased and
   split into content words (`langmem_paging.text.content_terms`).
   A cluster bookmark ``[cN:kw,...|p1-p9]`` is a document of its keywords too; when it
   ranks, its member pages take its place, ranked by their own bookmarks (what a model
   gets by recalling the cluster id). (lexical-2; lexical-1 had no clusters to read.)
3. It scores every bookmark with BM25 (rank-bm25 `BM25Okapi`, default k1=1.5, b=0.75)
   against the question's content words, and keeps bookmarks sharing a word with it.
4. It recalls pages best-first (ties: lower page number) while they fit the budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage
from rank_bm25 import BM25Okapi

from langmem_paging.bookmarks import parse_bookmark
from langmem_paging.messages import is_bookmark
from langmem_paging.text import content_terms

_CLUSTER = re.compile(r"\[(c\d+):([^\[\]|\n]*)\|[^\[\]\n]*\]")

READER_VERSION = "lexical-2"


def visible_bookmarks(view: Sequence[BaseMessage]) -> list[tuple[str, list[str]]]:
    """``(page_or_cluster_id, keywords)`` of each library bookmark in the view, in order."""
    out = []
    for message in view:
        if not is_bookmark(message):
            continue
        text = str(message.content)
        parsed = parse_bookmark(text)
        cluster = _CLUSTER.fullmatch(text.strip())
        if parsed:
            out.append(parsed)
        elif cluster:
            out.append((cluster.group(1), [k for k in cluster.group(2).split(",") if k]))
    return out


def rank_bookmarks(question: str, bookmarks: Sequence[tuple[str, list[str]]]) -> list[str]:
    """Page (and cluster) ids whose bookmarks share a word with the question, best BM25 score first."""
    if not bookmarks:
        return []
    docs = [content_terms(" ".join(keywords)) for _, keywords in bookmarks]
    terms = content_terms(question)
    if not terms:
        return []
    scores = BM25Okapi([d or ["\0"] for d in docs]).get_scores(terms)
    ranked = [
        (-score, page_id[0] == "c", int(page_id[1:]), page_id)
        for (page_id, _), score, doc in zip(bookmarks, scores, docs)
        if set(terms) & set(doc)
    ]
    return [page_id for *_, page_id in sorted(ranked)]
