"""Time STAE's victim selection with 20, 50 and 100 resident candidates, per grouping.

Prints one row per (grouping, candidates): the median time of the first `victim` call of
a step (vectors decoded, distances and groups computed), of a later call in the same
step (groups cached: only one group's scores), and of embedding the pages at formation.
Timings are wall clock on whatever else the machine is doing: compare rows of one run.

    python tools/bench_stae.py [--reps 15] [--embedder hashing|minilm]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging.strategies.policy import Candidate, PolicyContext
from langmem_paging.strategies.stae import STAEPolicy

TOPICS = [
    "bees hive honey swarm queen pollen beekeeper Bled lake",
    "tax return deadline receipts accountant refund deduction form",
    "marathon training pace interval shoes recovery kilometres race",
    "violin practice scales concerto bow rosin teacher recital",
    "garden tomatoes compost seedlings watering soil harvest shed",
    "kyoto trip temples train tickets hotel ryokan itinerary",
]


def page_texts(n: int, seed: int) -> list[list]:
    rng = random.Random(seed)
    pages = []
    for i in range(n):
        words = rng.choice(TOPICS).split()
        question = " ".join(rng.choices(words, k=12))
        answer = " ".join(rng.choices(words, k=30))
        pages.append([HumanMessage(f"Turn {i}: {question}?"), AIMessage(answer)])
    return pages


def candidates_for(policy: STAEPolicy, pages: list[list]) -> tuple[list[Candidate], float]:
    start = time.perf_counter()
    features = policy.features(pages)
    embed = time.perf_counter() - start
    out = [
        Candidate(
            key=f"p{i}",
            kind="page",
            page_ids=(f"p{i}",),
            position=3 * i,
            tokens=80,
            created_turn=i,
            last_access=i,
            access_count=0,
            messages=tuple(msgs),
            features=feats,
        )
        for i, (msgs, feats) in enumerate(zip(pages, features, strict=False))
    ]
    return out, embed


def measure(policy: STAEPolicy, n: int, reps: int) -> tuple[float, float, float]:
    first, later, embed = [], [], []
    for rep in range(reps):
        candidates, embed_time = candidates_for(policy, page_texts(n, seed=rep))
        embed.append(embed_time)
        policy._layouts.clear()  # a new step over a new resident set
        context = PolicyContext(turn=n, recent_text="")
        start = time.perf_counter()
        victim = policy.victim(candidates, context)
        first.append(time.perf_counter() - start)
        context.evicted.append(victim)
        rest = [c for c in candidates if c.key != victim.key]
        start = time.perf_counter()
        policy.victim(rest, context)
        later.append(time.perf_counter() - start)
    return statistics.median(first), statistics.median(later), statistics.median(embed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args()
    variants = [
        ("global knn", {}),
        ("global centroid", {"redundancy": "centroid"}),
        ("temporal (4)", {"grouping": "temporal"}),
        ("kmeans n_groups=4", {"grouping": "kmeans", "n_groups": 4}),
        ("kmeans silhouette", {"grouping": "kmeans"}),
    ]
    print(f"embedder: {args.embedder}; median of {args.reps} runs; milliseconds")
    print(f"{'grouping':<20} {'n':>4} {'first victim':>13} {'next victim':>12} {'embed n pages':>14}")
    for label, options in variants:
        policy = STAEPolicy(embedder=args.embedder, **options)
        policy.features(page_texts(2, seed=99))  # load the model, warm caches
        for n in (20, 50, 100):
            first, later, embed = measure(policy, n, args.reps)
            print(f"{label:<20} {n:>4} {first * 1e3:>13.2f} {later * 1e3:>12.2f} {embed * 1e3:>14.1f}")


if __name__ == "__main__":
    main()
