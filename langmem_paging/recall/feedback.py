"""The second hop: a follow-up query from the first hits' distinctive terms (pseudo-relevance
feedback), for what a question's own words do not reach (the other half of a multi-hop answer
shares words with the first half, not with the question).

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> texts = ["Mirela adopted a greyhound named Bolt", "Bolt won the regional greyhound race",
    ...          "Mirela went to the market", "The market sold bread"]
    >>> follow_up_query("What has Mirela adopted?", texts[:1], texts, terms=3)
    'named greyhound bolt'
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from langmem_paging.core.text import content_terms

__all__ = ["FEEDBACK_HITS", "FEEDBACK_TERMS", "follow_up_query"]

FEEDBACK_HITS = 3
"""The best hits whose text the follow-up query is drawn from."""
FEEDBACK_TERMS = 6
"""Terms in the follow-up query."""


def follow_up_query(
    query: str, top: Sequence[str], corpus: Sequence[str], *, terms: int = FEEDBACK_TERMS
) -> str:
    """The `terms` words of the `top` texts most distinctive within `corpus` (tf x idf, the
    thread's own messages as the collection), not in `query`; in order of weight, ties by first
    appearance. Empty when they share nothing distinctive."""
    asked = set(content_terms(query))
    documents = [set(content_terms(text)) for text in corpus]
    frequency: Counter[str] = Counter(term for doc in documents for term in doc)
    n = max(1, len(documents))
    counts: Counter[str] = Counter(
        t for text in top for t in content_terms(text) if t not in asked and not t.isdigit()
    )
    weights = {t: tf * math.log(1 + n / (1 + frequency[t])) for t, tf in counts.items()}
    order = {t: k for k, t in enumerate(counts)}
    best = sorted(weights, key=lambda t: (-weights[t], order[t]))
    return " ".join(best[:terms])
