"""Lexical search over a thread's pages, at the grain of messages (passages).

The `SearchIndex` interface, and `InMemoryBM25Index`, the index of stores that have no full-text
search of their own. A file-backed SQLite store gets `SqliteSearchIndex` by default (FTS5 in the
store's file, `langmem_paging.index.sqlite`), a Postgres deployment passes `PostgresSearchIndex`
(`langmem_paging.index.postgres`); any other store gets `InMemoryBM25Index` (`langmem_paging.index.defaults.default_index` chooses). It
keeps one BM25 inverted index per thread, extended as pages form (pages never change), bounded in
memory (least recently used threads' indexes are dropped) and rebuilt from the store the first time
a thread is searched in a process.
A document is one message of a page, so a search can return passages; page-level
ranking takes each page's best passage. Which pages a branch may see is the caller's
filter (`allow`): the index itself is per thread, across branches.
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
from abc import ABC, abstractmethod
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langmem_paging.core.records import Page, page_number
from langmem_paging.core.text import search_terms
from langmem_paging.core.tokens import message_text

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Hit", "InMemoryBM25Index", "SearchIndex", "best_pages", "bm25_scores", "fuse_scores"]


@dataclass(frozen=True)
class Hit:
    """One matching message of a page."""

    page_id: str
    """The page."""
    index: int
    """Position of the message in the page."""
    score: float
    """BM25 score (higher is better)."""


class SearchIndex(ABC):
    """Per-thread passage search; implementations may live in the process or in a database.

    Write the sync methods; the async ones run them in a worker thread by default, so an
    async agent never blocks its event loop on an index (override them where the index has
    native async I/O, as `PostgresSearchIndex` does on an async connection).
    """

    @abstractmethod
    def has(self, thread_id: str) -> bool:
        """True if the index holds every page of the thread (else `load` it first)."""

    def indexed_through(self, thread_id: str) -> int | None:
        """The highest page number up to which the index holds every stored page of the thread
        (None: it does not hold the thread; `load` it). `load` and `add` raise it to the highest
        page they were given, so a caller gives them every stored page between it and that one
        (`ThreadIO` reads the gap from the store first): a page whose index write failed is then
        indexed by the next step or search. An index that does not track it answers as if it held
        every page of a thread it `has` (no repair)."""
        return sys.maxsize if self.has(thread_id) else None

    async def aindexed_through(self, thread_id: str) -> int | None:
        """Async `indexed_through` (the sync one in a worker thread)."""
        return await asyncio.to_thread(self.indexed_through, thread_id)

    @abstractmethod
    def load(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index a thread's pages from scratch (a cold start)."""

    @abstractmethod
    def add(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index new pages of a thread the index `has`; pages already indexed are skipped."""

    @abstractmethod
    def search(self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]) -> list[Hit]:
        """The best `limit` passages of pages `allow` accepts, best first."""

    @abstractmethod
    def drop(self, thread_id: str) -> None:
        """Forget a thread."""

    def update(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index pages whose content changed (a message forgotten). By default the thread is dropped,
        so the next search loads it again from the store; an index that can replace a page's
        passages overrides this."""
        self.drop(thread_id)

    def follow(self, thread_id: str, generation: str | None) -> None:
        """Agree with the thread's lifecycle generation in the store (None: no record, the thread was
        deleted or has none yet), read before each search. An index living in one process drops a
        thread it holds at another generation (a forget or delete by another worker), so the search
        loads it again from the records. By default nothing: a shared index (a database's) has its
        rows rewritten by the forget or delete itself. Called on the event loop too: never block."""
        return None

    def score(self, thread_id: str, query: str, texts: Sequence[str]) -> list[float]:
        """BM25 scores of `texts` (messages still in the context) for `query`, on the scale of
        `search`'s hits where the index can (a recall ranks the resident turns beside the paged
        ones). By default the texts are scored among themselves with `search_terms`."""
        return bm25_scores(query, texts)

    async def ascore(self, thread_id: str, query: str, texts: Sequence[str]) -> list[float]:
        """Async `score` (the sync one in a worker thread)."""
        return await asyncio.to_thread(self.score, thread_id, query, list(texts))

    async def aupdate(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `update` (the sync one in a worker thread)."""
        await asyncio.to_thread(self.update, thread_id, list(pages))

    async def ahas(self, thread_id: str) -> bool:
        """Async `has` (the sync one in a worker thread)."""
        return await asyncio.to_thread(self.has, thread_id)

    async def aload(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `load` (the sync one in a worker thread)."""
        await asyncio.to_thread(self.load, thread_id, list(pages))

    async def aadd(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `add` (the sync one in a worker thread)."""
        await asyncio.to_thread(self.add, thread_id, list(pages))

    async def asearch(
        self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]
    ) -> list[Hit]:
        """Async `search` (the sync one in a worker thread)."""
        return await asyncio.to_thread(lambda: self.search(thread_id, query, limit=limit, allow=allow))

    async def adrop(self, thread_id: str) -> None:
        """Async `drop` (the sync one in a worker thread)."""
        await asyncio.to_thread(self.drop, thread_id)


@dataclass
class _ThreadIndex:
    matrix: np.ndarray | None = (
        None  # passage vectors (float16), rows [0, n_vectors) in use; grown by doubling
    )
    n_vectors: int = 0
    pages: list[str] = field(default_factory=list)
    page_of: array[int] = field(default_factory=lambda: array("i"))
    message_of: array[int] = field(default_factory=lambda: array("i"))
    length: array[float] = field(default_factory=lambda: array("f"))
    postings: dict[str, tuple[array[int], array[float]]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    digests: dict[str, str] = field(default_factory=dict)
    through: int = 0
    generation: str | None = None
    total_length: float = 0.0
    size: int = 0
    norm: Any = None


class InMemoryBM25Index(SearchIndex):
    """BM25 (k1, b) over messages, one inverted index per thread, numpy-scored.

    Args:
        analyzer: Text -> terms (default `search_terms`: stemmed words minus stopwords).
        max_postings: Postings kept across all threads; past it the least recently used
            threads are dropped (and rebuilt from the store if searched again).
        k1: BM25 term-frequency saturation.
        b: BM25 length normalization.
        embedder: With an embedder (an `Embedder`, a name for `get_embedder` such as ``"default"``,
            a LangChain ``Embeddings``, or a `TextVectors` to share with other indexes), a passage's score is `fuse_scores` of its BM25 score
            and its cosine similarity to the query (score fusion: on LoCoMo dev it beat
            reciprocal-rank fusion at every budget, issue "Recall v3"). Off by default. Each text
            is embedded once (`TextVectors`: a message when its page is indexed, or earlier while it
            was a resident turn a recall ranked; a query once per distinct query); the index keeps
            768 bytes per message at 384 dimensions.
        semantic_weight: The cosine's weight in the fused score.
        vector_cache_size: Texts whose vectors are remembered beyond the index (resident turns,
            queries, pages of threads dropped and loaded again).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> index = InMemoryBM25Index()
        >>> page = Page(id="p1", messages=[HumanMessage("We adopted a greyhound.", id="a"),
        ...                                HumanMessage("Pottery on Tuesday.", id="b")],
        ...             bookmark="[p1:x]", keywords=[], token_count=9, boundary="fixed_2", created_turn=1)
        >>> index.load("t", [page])
        >>> [(h.page_id, h.index) for h in index.search("t", "greyhound", limit=3, allow=lambda p: True)]
        [('p1', 0)]
    """

    def __init__(
        self,
        *,
        analyzer: Callable[[str], list[str]] = search_terms,
        max_postings: int = 5_000_000,
        k1: float = 1.2,
        b: float = 0.75,
        embedder: Any = None,
        semantic_weight: float = 1.0,
        vector_cache_size: int = 20_000,
    ) -> None:
        self._vectors = None
        if embedder is not None:
            from langmem_paging.strategies.vectors import (
                TextVectors,  # numpy and embedders load only when used
            )

            # a TextVectors given is shared (indexes of one process embedding the same texts once)
            self._vectors = (
                embedder
                if isinstance(embedder, TextVectors)
                else TextVectors(embedder, max_vectors=vector_cache_size)
            )
            embedder = self._vectors.embedder
        self.embedder, self.semantic_weight = embedder, semantic_weight
        self.analyzer = analyzer
        self.max_postings = max_postings
        self.k1, self.b = k1, b
        self._threads: OrderedDict[str, _ThreadIndex] = OrderedDict()
        self._generations: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def has(self, thread_id: str) -> bool:
        with self._lock:
            return thread_id in self._threads

    def indexed_through(self, thread_id: str) -> int | None:
        with self._lock:
            index = self._threads.get(thread_id)
            return None if index is None else index.through

    def follow(self, thread_id: str, generation: str | None) -> None:
        """Drop the thread if it is held at another lifecycle generation; a load that follows holds
        it at `generation`."""
        with self._lock:
            index = self._threads.get(thread_id)
            if index is not None and index.generation != generation:
                self._threads.pop(thread_id)
            self._generations[thread_id] = generation

    def load(self, thread_id: str, pages: Iterable[Page]) -> None:
        with self._lock:
            index = _ThreadIndex(generation=self._generations.get(thread_id))
        for page in pages:  # streamed: a thread's pages need not all be in memory at once
            self._index_page(index, page)
        with self._lock:
            self._threads[thread_id] = index
            self._threads.move_to_end(thread_id)
            self._bound(keep=thread_id)

    def add(self, thread_id: str, pages: Iterable[Page]) -> None:
        with self._lock:
            index = self._threads.get(thread_id)
            if index is None:
                return  # not loaded here: the first search rebuilds it from the store
            pages = list(pages)
            if any(index.digests.get(p.id, p.digest) != p.digest for p in pages):
                # a page id it holds now names other content: the thread was deleted and its id reused,
                # or a message forgotten, by another process. Rebuilt from the store on its next search.
                self._threads.pop(thread_id)
                return
            for page in pages:
                self._index_page(index, page)
            self._bound(keep=thread_id)

    def update(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Forget the thread: its next search rebuilds it from the store, which holds the changed pages
        (postings are append-only arrays; a rebuild costs what a cold start does, and forgetting is rare)."""
        self.drop(thread_id)

    def drop(self, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(thread_id, None)
            self._generations.pop(thread_id, None)

    def _index_page(self, index: _ThreadIndex, page: Page) -> None:
        index.through = max(index.through, page_number(page.id))
        if page.id in index.seen:
            return
        index.seen.add(page.id)
        index.digests[page.id] = page.digest
        if self._vectors is not None:
            self._append_vectors(index, [message_text(m) for m in page.messages])
        slot = len(index.pages)
        index.pages.append(page.id)
        for position, message in enumerate(page.messages):
            terms = self.analyzer(message_text(message))
            doc = len(index.length)
            index.norm = None
            index.page_of.append(slot)
            index.message_of.append(position)
            index.length.append(float(len(terms)))
            index.total_length += len(terms)
            counts: dict[str, int] = {}
            for term in terms:
                counts[term] = counts.get(term, 0) + 1
            for term, tf in counts.items():
                docs, tfs = index.postings.setdefault(term, (array("i"), array("f")))
                docs.append(doc)
                tfs.append(float(tf))
            index.size += len(counts) + 1

    def _bound(self, *, keep: str) -> None:
        total = sum(i.size for i in self._threads.values())
        while total > self.max_postings and len(self._threads) > 1:
            oldest = next(t for t in self._threads if t != keep)
            total -= self._threads.pop(oldest).size
            self._generations.pop(oldest, None)

    def _append_vectors(self, index: _ThreadIndex, texts: list[str]) -> None:
        """Add the passages' vectors in document order; amortized O(new passages) (the matrix doubles)."""
        import numpy as np  # lazy: importing the package must not pay for numpy

        assert self._vectors is not None
        rows = self._vectors.rows(texts).astype(np.float16)
        if not len(rows):
            return
        end = index.n_vectors + len(rows)
        if index.matrix is None or end > len(index.matrix):
            grown = np.zeros((max(end, 2 * index.n_vectors, 64), rows.shape[1]), dtype=np.float16)
            if index.matrix is not None:
                grown[: index.n_vectors] = index.matrix[: index.n_vectors]
            index.matrix = grown
        index.matrix[index.n_vectors : end] = rows
        index.n_vectors = end
        index.size += len(rows) * 8

    def _cosine(self, index: _ThreadIndex, query_vector: np.ndarray) -> np.ndarray:
        """Cosine of every passage of the thread with the query (hold the lock)."""
        import numpy as np  # lazy: importing the package must not pay for numpy

        assert index.matrix is not None  # the callers saw n_vectors > 0
        cosine: np.ndarray = (index.matrix[: index.n_vectors].astype(np.float32) @ query_vector).astype(
            np.float64
        )
        return cosine

    def score(self, thread_id: str, query: str, texts: Sequence[str]) -> list[float]:
        """BM25 of `texts` with the thread's document frequencies and lengths: on the scale of its hits
        (hybrid: fused like the hits, BM25 over the thread's best BM25 score plus the cosine)."""
        query_vector = text_vectors = None
        if self._vectors is not None:  # embedded outside the lock (remembered: each text once)
            query_vector, text_vectors = self._vectors.query(query), self._vectors.rows(list(texts))
        with self._lock:
            index = self._threads.get(thread_id)
            if index is None or not len(index.length):
                return bm25_scores(query, texts, analyzer=self.analyzer, k1=self.k1, b=self.b)
            n, mean = len(index.length), index.total_length / len(index.length)
            postings = index.postings

            def df(term: str) -> int:
                posting = postings.get(term)
                return len(posting[0]) if posting is not None else 0

            raw = bm25_scores(
                query, texts, analyzer=self.analyzer, k1=self.k1, b=self.b, df=df, n_docs=n, mean_length=mean
            )
            if query_vector is None or text_vectors is None or not index.n_vectors:
                return raw
            top = max(
                float(self._bm25(index, list(dict.fromkeys(self.analyzer(query)))).max(initial=0.0)),
                max(raw, default=0.0),
            )
        import numpy as np

        cosine = text_vectors @ query_vector if len(text_vectors) else np.zeros(0)
        fused: list[float] = fuse_scores(
            np.asarray(raw, dtype=np.float64), cosine, self.semantic_weight, top=top
        ).tolist()
        return fused

    def _bm25(self, index: _ThreadIndex, terms: list[str]) -> np.ndarray:
        """BM25 of every message of the thread for `terms` (hold the lock)."""
        import numpy as np  # lazy: importing the package must not pay for numpy

        n = len(index.length)
        if index.norm is None or len(index.norm) != n:  # kept until the thread gains pages
            lengths = np.frombuffer(index.length, dtype=np.float32)
            index.norm = self.k1 * (1 - self.b + self.b * lengths / (index.total_length / n or 1.0))
        norm = index.norm
        scores = np.zeros(n, dtype=np.float64)
        for term in terms:
            posting = index.postings.get(term)
            if posting is None:
                continue
            docs = np.frombuffer(posting[0], dtype=np.int32)
            tfs = np.frombuffer(posting[1], dtype=np.float32)
            idf = math.log(1 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
            scores[docs] += idf * tfs * (self.k1 + 1) / (tfs + norm[docs])
        return scores

    def search(self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]) -> list[Hit]:
        import numpy as np  # lazy: importing the package must not pay for numpy

        terms = list(dict.fromkeys(self.analyzer(query)))
        # embedded before the lock: a model's forward pass must not hold up other threads' searches
        query_vector = self._vectors.query(query) if self._vectors is not None and terms else None
        with self._lock:
            index = self._threads.get(thread_id)
            if index is None or not terms or not len(index.length):
                return []
            self._threads.move_to_end(thread_id)
            scores = self._bm25(index, terms)
            if query_vector is not None and index.n_vectors:
                scores = fuse_scores(scores, self._cosine(index, query_vector), self.semantic_weight)
            hits: list[Hit] = []
            matched = np.flatnonzero(scores)
            take = limit
            while matched.size:
                top = (
                    matched
                    if matched.size <= take
                    else matched[np.argpartition(-scores[matched], take)[:take]]
                )
                ranked = sorted(
                    top.tolist(), key=lambda d: (-scores[d], index.page_of[d], index.message_of[d])
                )
                hits = [
                    Hit(index.pages[index.page_of[d]], index.message_of[d], float(scores[d]))
                    for d in ranked
                    if allow(index.pages[index.page_of[d]])
                ]
                if len(hits) >= limit or top.size == matched.size:
                    break
                take *= 4
            return hits[:limit]


def bm25_scores(
    query: str,
    texts: Sequence[str],
    *,
    analyzer: Callable[[str], list[str]] = search_terms,
    k1: float = 1.2,
    b: float = 0.75,
    df: Callable[[str], int] | None = None,
    n_docs: int = 0,
    mean_length: float = 0.0,
) -> list[float]:
    """BM25 of each text for `query`; document frequencies from `df` over `n_docs` documents of
    mean length `mean_length` (a thread's index), else from the texts themselves."""
    docs = [analyzer(text) for text in texts]
    terms = list(dict.fromkeys(analyzer(query)))
    if df is None:
        sets = [set(d) for d in docs]
        n_docs, mean_length = len(docs), sum(map(len, docs)) / max(1, len(docs))

        def df(term: str) -> int:
            return sum(term in s for s in sets)

    idf = {t: math.log(1 + (n_docs - df(t) + 0.5) / (df(t) + 0.5)) for t in terms}
    out = []
    for doc in docs:
        norm = k1 * (1 - b + b * len(doc) / (mean_length or 1.0))
        counts: dict[str, int] = {}
        for term in doc:
            counts[term] = counts.get(term, 0) + 1
        out.append(sum(idf[t] * counts[t] * (k1 + 1) / (counts[t] + norm) for t in terms if t in counts))
    return out


def fuse_scores(
    bm25: np.ndarray, cosine: np.ndarray, weight: float = 1.0, *, top: float | None = None
) -> np.ndarray:
    """Hybrid score: BM25 over the best BM25 score (`top`, default the best of `bm25`), plus `weight`
    times the cosine clipped at 0 (a passage unlike the query gains nothing, loses nothing).

    Example:
        >>> import numpy as np
        >>> fuse_scores(np.array([4.0, 2.0, 0.0]), np.array([0.1, 0.5, 0.6])).round(2).tolist()
        [1.1, 1.0, 0.6]
    """
    import numpy as np  # lazy: importing the package must not pay for numpy

    best = (float(bm25.max()) if len(bm25) else 0.0) if top is None else top
    lexical = bm25 / best if best > 0 else np.zeros_like(bm25)
    fused: np.ndarray = lexical + weight * np.clip(cosine, 0.0, None)
    return fused


def best_pages(hits: Sequence[Hit], limit: int) -> list[str]:
    """Page ids ranked by their best passage."""
    out: list[str] = []
    for hit in hits:
        if hit.page_id not in out:
            out.append(hit.page_id)
        if len(out) >= limit:
            break
    return out
