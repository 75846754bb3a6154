"""Lexical helpers shared by bookmarks, boundaries, the semantic policy and search."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["STOPWORDS", "content_terms", "cosine", "search_terms", "tfidf", "words"]

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "get", "got", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "just", "let's", "like", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "really", "same", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "well", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "will", "with", "won't", "would", "wouldn't", "yeah", "yes", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "oh", "wow", "hey", "hi", "hello", "thanks", "thank", "ok", "okay", "sure", "great", "good", "glad", "cool", "awesome", "lot", "lots", "much", "many", "one", "thing", "things", "something", "anything", "everything", "way", "know", "think", "feel", "going", "go", "gonna", "want", "make", "made", "sounds", "sound", "see", "seems", "seem", "always", "never", "ever", "even", "still", "amazing", "totally", "definitely", "right", "back", "time", "day", "new", "said", "says", "went", "near"]
)

# Letters in any script (names like "Tromsø"), inner apostrophes/hyphens; numbers with separators.
_WORD = re.compile(r"[^\W\d_][\w'’\-]*[^\W_]|[^\W\d_]|\d[\d:/.,\-]*\d|\d")


def words(text: str) -> list[str]:
    """Word tokens in their surface form (names keep their capitals; possessive 's dropped)."""
    return [w[:-2] if w.endswith(("'s", "’s")) else w for w in _WORD.findall(text)]


def content_terms(text: str) -> list[str]:
    """Lower-cased words minus stopwords and one-letter words: the unit of lexical similarity."""
    out = []
    for word in words(text):
        term = word.lower().replace("’", "'")
        if len(term) > 1 and term not in STOPWORDS:
            out.append(term)
    return out


def search_terms(text: str) -> list[str]:
    """`content_terms`, stemmed (Snowball): ``adopted``, ``adopting`` and ``adoption`` match."""
    from langmem_paging.core.background import stem

    return [stem(term) for term in content_terms(text)]


def tfidf(terms: Iterable[str], doc_freq: Mapping[str, int], n_docs: int) -> dict[str, float]:
    """Sparse TF-IDF vector with smoothed IDF ``log((N+1)/(df+1)) + 1``."""
    counts = Counter(terms)
    return {t: c * (math.log((n_docs + 1) / (doc_freq.get(t, 0) + 1)) + 1) for t, c in counts.items()}


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Cosine similarity of two sparse vectors; 0.0 when either is empty."""
    if len(a) > len(b):
        a, b = b, a
    dot = sum(v * b.get(t, 0.0) for t, v in a.items())
    if dot == 0.0:
        return 0.0
    return dot / (math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values())))
