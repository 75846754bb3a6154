"""Why does the bookmark reader miss the right page? A breakdown of page selection on LoCoMo.

Replays each conversation as the evaluation does (`evals.paging_method.PagingSession`, end
protocol, fixed_20 pages by default), asks every question (categories 1-4) as the evaluation asks
it (so the ranks and the resident turns are the evaluation's own), and sorts each question whose
evidence was paged out into where selection fails:

- **unknown evidence**: an evidence id no turn of the conversation has (a few in LoCoMo);
- **multi-page**: the evicted evidence lies on two or more pages, so no single page can hold it
  (top-1 cannot count the question; this is the ceiling a bookmark cannot move);
- of the single-page questions: whether the evidence page's own bookmark shares a content word
  with the question (the lexical reader ranks only bookmarks that do), whether the page's stored
  keywords do, whether the evidence turn's own text does (what a perfect choice of words could
  reach); and the rank the reader gave the page (first, second or third, lower, not ranked).

The shares are over all questions with evicted evidence, as the evaluation's top-1/top-3 are
(its top-3 may also count a multi-page question whose pages all rank in the first three; this
breakdown counts only single-page questions there, so its top-3 is a lower bound).

Usage (from the repository root)::

    python tools/bookmark_selection.py --budgets 4000,8000                # table + JSON
    python tools/bookmark_selection.py --budgets 4000 --policy "lfu+bookmarks:compact" --limit 2
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run by path: evals/ is not installed

from evals.conversation import Conversation, to_messages  # noqa: E402
from evals.datasets.locomo import load_locomo  # noqa: E402
from evals.methods import Context  # noqa: E402
from evals.paging_method import PagingSession  # noqa: E402
from langmem_paging import Page  # noqa: E402
from langmem_paging.core.text import content_terms  # noqa: E402
from langmem_paging.core.tokens import message_text  # noqa: E402
from langmem_paging.strategies.bookmarks import shown_keywords  # noqa: E402

COLUMNS = (
    "questions",
    "unknown_evidence",
    "multi_page",
    "bookmark_shares_word",
    "stored_keywords_share_word",
    "evidence_turn_shares_word",
    "ranked_first",
    "ranked_2_3",
    "ranked_lower",
    "not_ranked",
)


def _terms(texts: list[str]) -> set[str]:
    return set(content_terms(" ".join(texts)))


def _classify(session: PagingSession, question: str, evidence: list[str], owner: dict[str, str]) -> list[str]:
    """The breakdown's counters one question adds ([] when none of its evidence was paged out).
    The question is asked as the evaluation asks it (`PagingSession.ask`), so the ranks are the
    evaluation's own."""
    context = session.ask(question)
    evicted = [e for e in evidence if e not in context.resident_before]
    if not evicted:
        return []
    if any(e not in owner for e in evicted):  # a dataset id no turn has: no page can hold it
        return ["questions", "unknown_evidence"]
    pages = {owner[e] for e in evicted}
    if len(pages) > 1:
        return ["questions", "multi_page"]
    (page_id,) = pages
    return [
        "questions",
        *_word_counters(session.pages[page_id], question, evicted),
        _rank_class(session, page_id, context),
    ]


def _word_counters(page: Page, question: str, evicted: list[str]) -> list[str]:
    """Which of the page's words share a content word with the question."""
    asked = set(content_terms(question))
    words = {
        "bookmark_shares_word": shown_keywords(page.bookmark),
        "stored_keywords_share_word": page.keywords,
        "evidence_turn_shares_word": [message_text(m) for m in page.messages if m.id in evicted],
    }
    return [counter for counter, texts in words.items() if asked & _terms(texts)]


def _rank_class(session: PagingSession, page_id: str, context: Context) -> str:
    """Where the reader ranked the page (the ranking the evaluation's top-1/top-3 read)."""
    first = session.pages[page_id].messages[0].id
    ranked = [ids[0] for ids in context.ranked_pages if ids]
    rank = ranked.index(first) if first in ranked else None
    if rank is None:
        return "not_ranked"
    return "ranked_first" if rank == 0 else "ranked_2_3" if rank < 3 else "ranked_lower"


def breakdown(conversations: list[Conversation], budget: int, policy: str, boundary: str) -> dict:
    """The counters over every conversation at one budget, and their shares of the questions."""
    counts: Counter[str] = Counter()
    for conversation in conversations:
        session = PagingSession(budget, boundary, policy)
        for message in to_messages(conversation):
            session.add(message)
        owner = {m.id: pid for pid, page in session.pages.items() for m in page.messages if m.id}
        for q in conversation.questions:
            if q.category != 5:
                counts.update(_classify(session, q.question, list(q.evidence), owner))
    n = counts["questions"] or 1
    shares = {key: round(counts[key] / n, 3) for key in COLUMNS[1:]}
    top1 = shares["ranked_first"]
    return {
        "budget": budget,
        "policy": policy,
        "boundary": boundary,
        "counts": {key: counts[key] for key in COLUMNS},
        "shares": shares,
        "top1": top1,
        "top3_single_page": round(top1 + shares["ranked_2_3"], 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default="4000,8000", help="token budgets B, comma-separated")
    parser.add_argument("--policy", default="lfu", help="policy spec, as for `python -m evals`")
    parser.add_argument("--boundary", default="fixed_20", help="page boundary (default fixed_20)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--data", default=None, help="LoCoMo file (default: $LOCOMO_PATH or shared dev)")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    conversations = load_locomo(args.data, limit=args.limit)
    results = [breakdown(conversations, int(b), args.policy, args.boundary) for b in args.budgets.split(",")]
    print(f"policy {args.policy}, boundary {args.boundary}; shares of questions with evicted evidence\n")
    print("| B | " + " | ".join(COLUMNS) + " |\n|" + "---|" * (len(COLUMNS) + 1))
    for r in results:
        cells = [str(r["counts"]["questions"])] + [f"{r['shares'][k]:.3f}" for k in COLUMNS[1:]]
        print(f"| {r['budget']} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
