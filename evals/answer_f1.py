"""LoCoMo's answer token-F1, with its per-category rules.

Rules (as the LoCoMo paper's evaluation scores answers):
- normalize: drop commas, lower-case, drop punctuation, drop the words a/an/the/and,
  collapse whitespace; tokens are Porter-stemmed (nltk's `PorterStemmer`);
- F1 is the harmonic mean of token precision and recall (bag of tokens);
- category 1 (multi-hop): the gold answer and the prediction are split on commas; each gold
  part scores its best-matching predicted part, and the scores are averaged;
- category 3 (open-domain): only the gold answer's part before the first ``;`` counts;
- categories 2 and 4: plain F1;
- category 5 (adversarial): 1 when the prediction says the information is not there
  ("not mentioned" or "no information available"), else 0.

Example:
    >>> locomo_f1("7 May 2023", "7 May 2023", 2)
    1.0
    >>> locomo_f1("pottery, camping", "pottery, painting, camping", 1)
    0.6667
    >>> locomo_f1("Not mentioned in the conversation.", "Sweden", 5)
    1.0
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache

__all__ = ["locomo_f1", "normalize_answer", "token_f1"]

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_DECLINES = ("not mentioned", "no information available")


@lru_cache(maxsize=1)
def _stemmer():
    try:
        from nltk.stem import PorterStemmer
    except ImportError as exc:  # the evals extra brings nltk
        raise ImportError("Answer F1 needs nltk: pip install -e '.[evals]'") from exc
    return PorterStemmer()


def normalize_answer(text: str) -> str:
    """LoCoMo's answer normalization (before stemming)."""
    text = str(text).replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text: str) -> list[str]:
    stem = _stemmer().stem
    return [stem(w) for w in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 between two answers after normalization and stemming."""
    pred, ref = _tokens(prediction), _tokens(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def _multi_answer_f1(prediction: str, gold: str) -> float:
    predictions = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in predictions) for g in golds) / len(golds)


def locomo_f1(prediction: str | None, gold: str, category: int) -> float:
    """Score one answer by LoCoMo's rule for its category, rounded to 4 places."""
    prediction = prediction or ""
    if category == 5:
        return float(any(d in prediction.lower() for d in _DECLINES))
    if category == 1:
        score = _multi_answer_f1(prediction, gold)
    elif category == 3:
        score = token_f1(prediction, gold.split(";")[0].strip())
    else:
        score = token_f1(prediction, gold)
    return round(score, 4)
