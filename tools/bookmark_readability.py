"""How readable are bookmarks? The share of bookmark terms that tell a model nothing, and how
often bookmarks break the rules a model needs to choose between them.

Replays LoCoMo conversations through a paging session (as the evaluation does) and reads every
page's bookmark keywords. A term tells nothing when it is an English stopword, a conversational
filler (interjections, discourse markers, small talk), a bare number of one or two digits in a
bookmark that shows no month (with one, it may be a date's day), or a JSON escape (``u05d5``). The word lists are this script's own (a common English stopword list
and a filler list), not the library's filter, so the measure does not just restate it.

Per bookmark it also counts (from the conversation's own speakers and this script's month and
weekday list, again not the library's): terms that are a speaker's name (or the start of one,
"Mel"), terms that are dates (a month, a weekday, a year, a day with its month), bookmarks with
more than one date, bookmarks with no topic word (every term a name, a number or a date), and
bookmark tokens (tiktoken, as paging counts them: min / mean / max), words per bookmark, and the
cluster bookmarks' mean tokens. A bookmark's terms are read with
`langmem_paging.strategies.bookmarks.shown_keywords` (words space-separated, the date after a comma).

Usage (from the repository root)::

    python tools/bookmark_readability.py --budget 4000            # dev data, table + JSON
    python tools/bookmark_readability.py --budget 4000 --limit 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run by path: evals/ is not installed

from evals.conversation import to_messages  # noqa: E402
from evals.datasets.locomo import load_locomo  # noqa: E402
from evals.paging_method import THREAD, PagingSession  # noqa: E402
from langmem_paging.core.tokens import TokenCounter  # noqa: E402
from langmem_paging.strategies.bookmarks import shown_keywords  # noqa: E402

ENGLISH_STOPWORDS = set(
    re.findall(
        r"\S+",
        """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves also get got really
""",
    )
)
FILLER = set(
    re.findall(
        r"\S+",
        """
oh wow hey hi hello yeah yes yep nope ok okay sure thanks thank great good nice cool awesome amazing interesting
glad happy excited love loved lovely fun cute sweet totally definitely absolutely actually basically literally
seriously honestly pretty super kinda sorta lol haha omg every everything anything something thing things stuff
lately recently sharing share shared tell telling told hear heard hope hoping guess maybe probably kind bit lot
lots much many way well still always never ever even time day today soon fancy busy keep keeps kept
""",
    )
)
_ESCAPE = re.compile(r"u[0-9a-f]{4}")


MONTHS = set(
    re.findall(
        r"\S+",
        """
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
""",
    )
)
WEEKDAYS = {
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sun",
}
_YEAR = re.compile(r"(19|20)\d\d")


def is_date(term: str) -> bool:
    """A month, a weekday, a year, or a day with its month ("8 May")."""
    words = term.lower().split()
    return any(w in MONTHS or w in WEEKDAYS or _YEAR.fullmatch(w) for w in words)


def is_speaker(term: str, speakers: set[str]) -> bool:
    """A speaker's name, or a capitalized start of one ("Mel" for Melanie)."""
    lower = term.lower()
    return (
        lower in speakers
        or term[:1].isupper()
        and len(lower) >= 3
        and any(s.startswith(lower) for s in speakers)
    )


def rule_counts(session: PagingSession, speakers: set[str]) -> Counter:
    """Per bookmark: speaker-name terms, date terms, bookmarks with more than one date, bookmarks
    with no topic word, and tokens."""
    counter = TokenCounter()
    out: Counter = Counter()
    for page in session.pages.values():
        terms = shown_keywords(page.bookmark)
        dates = [t for t in terms if is_date(t)]
        names = [t for t in terms if is_speaker(t, speakers)]
        topic = [t for t in terms if t not in dates and not t[:1].isdigit() and not t[:1].isupper()]
        out.update(
            bookmarks=1,
            terms=len(terms),
            speaker_terms=len(names),
            date_terms=len(dates),
            multi_date=len(dates) > 1,
            no_topic=not topic,
            tokens=counter.count_text(page.bookmark),
        )
        tokens = counter.count_text(page.bookmark)
        out["min_tokens"] = min(out["min_tokens"] or tokens, tokens)
        out["max_tokens"] = max(out["max_tokens"], tokens)
    for cluster in session.pager.page_store.list_clusters(THREAD):
        out.update(clusters=1, cluster_tokens=counter.count_text(cluster.bookmark))
    return out


def kind_of(term: str, dated: bool = False) -> str | None:
    """Why a term tells nothing (None: it may tell something). `dated`: the bookmark also shows a
    month, so a small number may be a date's day."""
    lower = term.lower()
    if lower in ENGLISH_STOPWORDS:
        return "stopword"
    if lower in FILLER:
        return "filler"
    if lower.isdigit() and len(lower) <= 2 and not dated:
        return "small number"
    if _ESCAPE.fullmatch(lower):
        return "escape"
    return None


def bookmark_terms(session: PagingSession) -> list[tuple[str, bool]]:
    """The keywords every page's bookmark shows (its text between ``[pN:`` and ``]``), each with
    whether the bookmark shows a month too."""
    out = []
    for page in session.pages.values():
        terms = shown_keywords(page.bookmark)
        dated = any(t.lower() in MONTHS for t in terms)
        out += [(t, dated) for t in terms]
    return out


def measure(budget: int, limit: int | None, data: str | None) -> dict:
    terms: list[tuple[str, bool]] = []
    rules: Counter = Counter()
    extremes: list[int] = []
    for conversation in load_locomo(data, limit=limit):
        session = PagingSession(budget, "fixed_20", "lfu")
        for message in to_messages(conversation):
            session.add(message)
        terms += bookmark_terms(session)
        counts = rule_counts(session, {part.lower() for s in conversation.speakers for part in s.split()})
        extremes += [counts.pop("min_tokens"), counts.pop("max_tokens")]
        rules += counts
    kinds = Counter(k for t, dated in terms if (k := kind_of(t, dated)) is not None)
    empty = sum(kinds.values())
    return {
        "budget": budget,
        "terms": len(terms),
        "uninformative": empty,
        "share": round(empty / max(1, len(terms)), 4),
        "by_kind": dict(kinds.most_common()),
        "most_common_uninformative": Counter(t.lower() for t, d in terms if kind_of(t, d)).most_common(15),
        "bookmarks": rules["bookmarks"],
        "speaker_name_share": round(rules["speaker_terms"] / max(1, rules["terms"]), 4),
        "date_share": round(rules["date_terms"] / max(1, rules["terms"]), 4),
        "multi_date_bookmarks": round(rules["multi_date"] / max(1, rules["bookmarks"]), 4),
        "no_topic_bookmarks": round(rules["no_topic"] / max(1, rules["bookmarks"]), 4),
        "mean_tokens": round(rules["tokens"] / max(1, rules["bookmarks"]), 2),
        "min_tokens": min(extremes, default=0),
        "max_tokens": max(extremes, default=0),
        "words_per_bookmark": round(rules["terms"] / max(1, rules["bookmarks"]), 2),
        "clusters": rules["clusters"],
        "mean_cluster_tokens": round(rules["cluster_tokens"] / max(1, rules["clusters"]), 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=4000, help="token budget B of the replay")
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument(
        "--data", default=None, help="LoCoMo file (default: $LOCOMO_PATH or the shared dev data)"
    )
    parser.add_argument("--json", default=None, help="also write the result to this JSON file")
    args = parser.parse_args(argv)
    result = measure(args.budget, args.limit, args.data)
    print(
        f"| budget | bookmark terms | uninformative | share | by kind |\n|---|---|---|---|---|\n"
        f"| {result['budget']} | {result['terms']} | {result['uninformative']} | {result['share']:.3f} | "
        f"{', '.join(f'{k} {v}' for k, v in result['by_kind'].items())} |"
    )
    print("most common:", ", ".join(f"{t} ({n})" for t, n in result["most_common_uninformative"]))
    print(
        f"\n| bookmarks | speaker-name terms | date terms | >1 date | no topic word | tokens min/mean/max "
        f"| words | clusters | cluster tokens |\n|---|---|---|---|---|---|---|---|---|\n"
        f"| {result['bookmarks']} | {result['speaker_name_share']:.3f} | "
        f"{result['date_share']:.3f} | {result['multi_date_bookmarks']:.3f} | {result['no_topic_bookmarks']:.3f} | "
        f"{result['min_tokens']}/{result['mean_tokens']:.1f}/{result['max_tokens']} | "
        f"{result['words_per_bookmark']:.1f} | {result['clusters']} | {result['mean_cluster_tokens']:.1f} |"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
