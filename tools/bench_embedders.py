"""Embedding speed per embedder on LoCoMo dev turns: texts per second, batched as the index embeds them.

Prints one row per (embedder, threads): load seconds, texts per second of wall time and per second of
the process's CPU time (medians of `--reps` passes over the same turns; on a busy machine the CPU
figure is the one that compares), and the mean cosine
of each turn with the next one (a sanity number: neural models give related turns more than hashing).
Timings are wall clock on whatever else the machine is doing: compare rows of one run. `--json` also
writes the rows as JSON.

    python -m tools.bench_embedders [--turns 1000] [--reps 3] [--embedders default,hashing] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from evals.conversation import to_messages
from evals.datasets.locomo import load_locomo
from langmem_paging.core.tokens import message_text
from langmem_paging.strategies.embeddings import DefaultEmbedder, get_embedder


def _turns(limit: int) -> list[str]:
    texts: list[str] = []
    for conversation in load_locomo(None):
        texts += [message_text(m) for m in to_messages(conversation)]
        if len(texts) >= limit:
            break
    return texts[:limit]


def _build(name: str, threads: int):
    if name == "default":
        return DefaultEmbedder(threads=threads)
    if name == "minilm":
        import torch

        torch.set_num_threads(threads)
    return get_embedder(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000, help="LoCoMo dev turns embedded per pass")
    parser.add_argument("--reps", type=int, default=3, help="passes; the median is shown")
    parser.add_argument("--embedders", default="default,hashing", help="comma-separated get_embedder names")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument(
        "--batch", type=int, default=64, help="texts per embed call (the index embeds a page at a time)"
    )
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    texts = _turns(args.turns)
    rows = []
    print(
        f"{len(texts)} LoCoMo dev turns, {sum(map(len, texts)) / len(texts):.0f} characters on average; "
        f"{args.batch} texts per call; median of {args.reps}"
    )
    print(
        "| embedder | threads | load s | texts/s (wall) | texts per CPU second | mean cosine of neighbours |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name in [n for n in args.embedders.split(",") if n]:
        for threads in [int(t) for t in args.threads.split(",") if t]:
            start = time.perf_counter()
            embedder = _build(name, threads)
            load = time.perf_counter() - start
            times, cpu_times, vectors = [], [], None
            for _ in range(args.reps):
                start, cpu = time.perf_counter(), time.process_time()
                vectors = np.concatenate(
                    [embedder.embed(texts[i : i + args.batch]) for i in range(0, len(texts), args.batch)]
                )
                times.append(time.perf_counter() - start)
                cpu_times.append(time.process_time() - cpu)
            assert vectors is not None
            rate = len(texts) / statistics.median(times)
            cpu_rate = len(texts) / max(statistics.median(cpu_times), 1e-9)
            cosine = float(np.mean(np.sum(vectors[1:] * vectors[:-1], axis=1)))
            rows.append(
                {
                    "embedder": embedder.name,
                    "threads": threads,
                    "load_seconds": round(load, 3),
                    "texts_per_second": round(rate, 1),
                    "texts_per_cpu_second": round(cpu_rate, 1),
                    "neighbour_cosine": round(cosine, 3),
                }
            )
            print(
                f"| {embedder.name} | {threads} | {load:.2f} | {rate:.0f} | {cpu_rate:.0f} | {cosine:.3f} |"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
