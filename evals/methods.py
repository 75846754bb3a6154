"""Methods: the context an answerer sees for a question, at a token budget B.

Every method uses the same tokenizer (`TokenCounter`, cl100k_base) and the same B,
counted over the whole message list including the question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from rank_bm25 import BM25Okapi

from langmem_paging import TokenCounter
from langmem_paging.core.background import stem
from langmem_paging.core.messages import split_units
from langmem_paging.core.rendering import render_message
from langmem_paging.core.text import content_terms

if TYPE_CHECKING:
    from langmem_paging.strategies.vectors import TextVectors

COUNTER = TokenCounter()
METHODS = (
    "full_context",
    "truncation",
    "bm25",
    "bm25_stem",
    "bm25_stem_nb1",
    "hybrid_nb1",
    "word_overlap",
    "search_tool",
    "paging",
)
RETRIEVAL_BASELINES = ("bm25", "bm25_stem", "bm25_stem_nb1", "hybrid_nb1", "word_overlap", "search_tool")
"""Methods that retrieve turns for the question: paging is compared with the strongest of them."""
EMBEDDING_METHODS = ("hybrid_nb1",)
"""Methods that take the run's embedder (``embedder=``, a `get_embedder` name; default ``"default"``)."""


@dataclass
class Context:
    """What one method put in front of the answerer for one question."""

    messages: list[BaseMessage]
    """The final context, question last."""
    present: set[str] = field(default_factory=set)
    """``dia_id``s whose full text is in the context (resident or recalled)."""
    bookmark_tokens: int = 0
    """Tokens spent on bookmarks."""
    ranked_pages: list[list[str]] = field(default_factory=list)
    """For paging: the dia_ids of each page the reader ranked, best first."""
    recalled: list[str] = field(default_factory=list)
    """Page ids recalled (paging) or turns found by search (search_tool)."""
    resident_before: set[str] = field(default_factory=set)
    """For paging: ``dia_id``s resident before the reader recalled anything."""
    over_budget: bool = False
    """The method's context exceeded B before the harness cut it (paging: bookmarks are never
    evicted, so they alone can exceed B), or, for full_context and the llm reader, exceeds it."""

    @property
    def tokens(self) -> int:
        """Tokens of the whole context."""
        return COUNTER(self.messages)


def _question(question: str) -> HumanMessage:
    return HumanMessage(question, id="question")


def full_context(history: Sequence[BaseMessage], question: str, budget: int) -> Context:
    """Everything, whatever the budget (the ceiling the others are measured against)."""
    messages = [*history, _question(question)]
    return Context(messages, {m.id for m in history}, over_budget=COUNTER(messages) > budget)


def truncation(history: Sequence[BaseMessage], question: str, budget: int) -> Context:
    """The most recent turns that fit in B."""
    q = _question(question)
    room = budget - COUNTER.count_message(q)
    kept: list[BaseMessage] = []
    for message in reversed(history):
        cost = COUNTER.count_message(message)
        if cost > room:
            break
        kept.append(message)
        room -= cost
    kept.reverse()
    return Context([*kept, q], {m.id for m in kept})


def _best_within(
    scores: Sequence[float], cost: Callable[[int], int], room: int, skip: set | frozenset = frozenset()
) -> tuple[list[int], int]:
    """Indices of the best-scoring items (score > 0, best first, ties by position) while their
    `cost` fits `room`, skipping `skip`; returned in position order with the room left."""
    chosen = []
    for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        if scores[i] <= 0:
            break
        c = cost(i)
        if i not in skip and c <= room:
            chosen.append(i)
            room -= c
    return sorted(chosen), room


def stemmed_terms(text: str) -> list[str]:
    """Content words reduced to their Snowball stems (``adopted``, ``adoption`` -> ``adopt``).

    Example:
        >>> stemmed_terms("She adopted two greyhounds")
        ['adopt', 'two', 'greyhound']
    """
    return [stem(t) for t in content_terms(text)]


@lru_cache(maxsize=1 << 17)
def _cached_terms(text: str, stemmed: bool) -> tuple[str, ...]:
    """Terms of one turn, computed once per process: every question re-scores the same history."""
    return tuple(stemmed_terms(text) if stemmed else content_terms(text))


def _terms_of(analyzer: Callable[[str], list[str]]) -> Callable[[str], tuple[str, ...]]:
    if analyzer is content_terms or analyzer is stemmed_terms:
        return lambda text: _cached_terms(text, analyzer is stemmed_terms)
    return lambda text: tuple(analyzer(text))


def _with_neighbours(
    scores: Sequence[float], cost: Callable[[int], int], room: int, *, radius: int
) -> tuple[list[int], int]:
    """Like `_best_within`, but each hit (best first) comes with the `radius` items on either
    side; windows that overlap are merged (an item already taken costs nothing again). When a
    hit's whole window does not fit, the hit alone is taken if it fits: the neighbours are
    context, the hit is what matched."""
    chosen: set[int] = set()
    for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        if scores[i] <= 0:
            break
        window = [j for j in range(i - radius, i + radius + 1) if 0 <= j < len(scores) and j not in chosen]
        for take in (window, [i] if i in window else []):
            c = sum(cost(j) for j in take)
            if take and c <= room:
                chosen.update(take)
                room -= c
                break
    return sorted(chosen), room


def _retrieve(
    history,
    question,
    budget,
    score: Callable[[list[str], list[list[str]]], list[float]],
    pinned: Sequence[BaseMessage] = (),
    *,
    terms: Callable[[str], list[str]] = content_terms,
    neighbours: int = 0,
) -> Context:
    """Best-scoring turns (score > 0) until B, shown in conversation order; with `neighbours`,
    each hit brings the turns that far on either side (`_with_neighbours`)."""
    q = _question(question)
    room = budget - COUNTER.count_message(q) - sum(COUNTER.count_message(m) for m in pinned)
    pinned_ids = {m.id for m in pinned}
    pool = [m for m in history if m.id not in pinned_ids]
    analyze = _terms_of(terms)
    scores = score(list(analyze(question)), [list(analyze(str(m.content))) for m in pool]) if pool else []

    def cost(i: int) -> int:
        return COUNTER.count_message(pool[i])

    if neighbours:
        chosen, _ = _with_neighbours(scores, cost, room, radius=neighbours)
    else:
        chosen, _ = _best_within(scores, cost, room)
    found = [pool[i] for i in chosen]
    position = {m.id: k for k, m in enumerate(history)}
    messages = sorted([*found, *pinned], key=lambda m: position[m.id])
    return Context([*messages, q], {m.id for m in messages}, recalled=[m.id for m in found])


def _bm25_scores(query: list[str], docs: list[list[str]]) -> list[float]:
    if not query:
        return [0.0] * len(docs)
    bm25 = BM25Okapi([d or ["\0"] for d in docs])
    raw = bm25.get_scores(query)
    # BM25Okapi's IDF can go negative for very common words; only shared words may score.
    return [float(s) if set(query) & set(d) else 0.0 for s, d in zip(raw, docs, strict=True)]


def _overlap_scores(query: list[str], docs: list[list[str]]) -> list[float]:
    q = set(query)
    return [float(len(q & set(d))) for d in docs]


def bm25(history, question, budget) -> Context:
    """Turns retrieved by BM25 on the question until B."""
    return _retrieve(history, question, budget, _bm25_scores)


def bm25_stem(history, question, budget) -> Context:
    """Turns retrieved by BM25 over Snowball-stemmed content words until B."""
    return _retrieve(history, question, budget, _bm25_scores, terms=stemmed_terms)


def bm25_stem_nb1(history, question, budget) -> Context:
    """`bm25_stem`, each retrieved turn with its previous and next turn (a question's answer is
    often the reply to the turn that matched), overlapping windows merged, until B."""
    return _retrieve(history, question, budget, _bm25_scores, terms=stemmed_terms, neighbours=1)


@lru_cache(maxsize=4)
def shared_vectors(embedder: str) -> TextVectors:
    """One embedder and its vectors per process and name: every question re-scores the same turns,
    and each turn is embedded once (as paging's index embeds each message once)."""
    from langmem_paging.strategies.vectors import TextVectors

    return TextVectors(embedder, max_vectors=1 << 17)


def hybrid_nb1(history, question, budget, *, embedder: str = "default") -> Context:
    """The flat hybrid baseline: `bm25_stem_nb1` ranked by paging's hybrid score (`fuse_scores`:
    stemmed BM25 over the best BM25 score, plus the cosine of the turn's and the question's
    embeddings), each hit with its previous and next turn, until B. The strongest flat retrieval
    with the signal paging's hybrid search has; every turn like the question at all scores, so B fills."""
    import numpy as np

    from langmem_paging.core.tokens import message_text
    from langmem_paging.index.base import fuse_scores

    vectors = shared_vectors(embedder)
    texts = [message_text(m) for m in history]

    def score(query: list[str], docs: list[list[str]]) -> list[float]:
        cosine = vectors.rows(texts) @ vectors.query(question)
        return fuse_scores(np.asarray(_bm25_scores(query, docs), dtype=np.float64), cosine).tolist()

    return _retrieve(history, question, budget, score, terms=stemmed_terms, neighbours=1)


def word_overlap(history, question, budget) -> Context:
    """Turns retrieved by plain word overlap with the question until B."""
    return _retrieve(history, question, budget, _overlap_scores)


def search_window(history: Sequence[BaseMessage], budget: int) -> list[BaseMessage]:
    """The `search_tool` method's resident window: the most recent B/2 tokens."""
    return truncation(history, "", budget // 2).messages[:-1]


def search_tool(history, question, budget) -> Context:
    """A resident window of the last B/2 tokens, plus `search(question)` over the older turns
    (BM25, top results until B): what a model with a search tool over evicted history gets."""
    return _retrieve(history, question, budget, _bm25_scores, pinned=search_window(history, budget))


def make_search_tool(
    history: Sequence[BaseMessage], window: Sequence[BaseMessage], room: int
) -> StructuredTool:
    """The `search(query)` tool a model gets with the `search_tool` method (llm reader):
    BM25 over the turns outside `window`; each call returns the best turns not yet returned,
    in conversation order, while the `room` tokens left for results last."""
    in_window = {m.id for m in window}
    pool = [m for m in history if m.id not in in_window]
    docs = [content_terms(str(m.content)) for m in pool]
    left = {"room": room, "returned": set()}

    def search(query: str) -> tuple[str, dict]:
        """Search the older part of the conversation; returns the best-matching turns."""
        scores = _bm25_scores(content_terms(str(query)), docs) if pool else []
        found, left["room"] = _best_within(
            scores,
            lambda i: COUNTER.count_text(render_message(pool[i])) + 1,
            left["room"],
            skip=left["returned"],
        )
        left["returned"].update(found)
        text = "\n".join(render_message(pool[i]) for i in found) or f"No older turn matches {query!r}."
        return text, {"found": [pool[i].id for i in found]}

    return StructuredTool.from_function(search, name="search", response_format="content_and_artifact")


def search_tool_with_reader(history: Sequence[BaseMessage], question: str, budget: int, reader):
    """`search_tool` answered by a real model (`LLMReader`): the B/2 window and the question,
    and a `search` tool over the older turns whose results stay within B. ``(Context, Answer)``."""
    from evals.readers.llm import SEARCH_HINT

    window = search_window(history, budget)
    q = _question(question)
    tool = make_search_tool(history, window, budget - COUNTER([*window, q]))
    answer = reader.run_agent([*window, q], tools=[tool], hint=SEARCH_HINT)
    final = answer.final_prompt or [*window, q]
    present = {m.id for m in final if not isinstance(m, ToolMessage)} | set(_found_by_search(final))
    context = Context(
        final,
        present,
        recalled=_found_by_search(answer.tool_results),
        resident_before={m.id for m in window},
        over_budget=COUNTER(final) > budget,
    )
    return context, answer


def _found_by_search(messages: Sequence[BaseMessage]) -> list[str]:
    """Turn ids the `search` results among `messages` returned."""
    return [
        mid
        for t in messages
        if isinstance(t, ToolMessage) and t.name == "search"
        for mid in (t.artifact or {}).get("found", [])
    ]


def cap_to_budget(
    messages: Sequence[BaseMessage], budget: int, keep_from: int | None = None
) -> tuple[list[BaseMessage], bool]:
    """Drop the oldest messages (tool-call groups whole) until the list fits `budget`, as a
    hard context limit would; ``messages[keep_from:]`` (default: the last one) always stays.
    Returns the list and whether it was over the budget."""
    total = COUNTER(messages)
    if total <= budget:
        return list(messages), False
    keep_from = len(messages) - 1 if keep_from is None else keep_from
    units = split_units(messages, 0, keep_from)
    dropped = 0
    while dropped < len(units) and total > budget:
        total -= sum(COUNTER.count_message(m) for m in units[dropped].messages)
        dropped += 1
    return [m for u in units[dropped:] for m in u.messages] + list(messages[keep_from:]), True
