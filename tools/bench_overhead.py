"""Per-turn paging overhead at a given history length, measured side by side in one run.

For each history length N it times one `before_model` step (ledger read, paging, store
writes) through `Pager.step` on a SqliteStore, against tokenizing the same history
once with tiktoken (what any budget check costs), and prints a table. Wall-clock
numbers on a shared machine are noisy: read the ratio column.

    python tools/bench_overhead.py [--lengths 100,600] [--repeats 30]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evals.datasets.synthetic import generate  # noqa: E402
from langmem_paging import PageStore, PagingConfig, TokenCounter  # noqa: E402
from langmem_paging.pager import Pager  # noqa: E402


def history(n: int):
    conv = generate(n_turns=max(n, 40), n_facts=max(1, n // 40), seed=1)
    return [
        (HumanMessage if t.speaker == "User" else AIMessage)(t.text, id=f"m{i}")
        for i, t in enumerate(conv.turns[:n])
    ]


def bench(n: int, repeats: int, max_tokens: int) -> dict:
    messages = history(n)
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    pager = Pager(PagingConfig(max_tokens=max_tokens, boundary="fixed_20", policy="lfu"), PageStore(store))
    # Bring the thread to a steady state: replay turn by turn with paging on.
    state = []
    for message in messages:
        state.append(message)
        state = pager.step(state, "t").view
    steady, cold = [], []
    for r in range(repeats):
        turn = [HumanMessage(f"one more question {r}?", id=f"q{r}")]
        start = time.perf_counter()
        result = pager.step(state + turn, "t")
        steady.append(time.perf_counter() - start)
        state = result.view + [AIMessage("ok", id=f"r{r}")]
        fresh = TokenCounter()
        start = time.perf_counter()
        fresh(state)
        cold.append(time.perf_counter() - start)
    return {
        "n": n,
        "resident": len(state),
        "pages": len(pager.page_store.list("t")),
        "step_ms": statistics.median(steady) * 1000,
        "tokenize_ms": statistics.median(cold) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="100,600")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'history msgs':>12} {'resident':>9} {'pages':>6} {'paging step ms':>15} "
          f"{'tokenize once ms':>17} {'ratio':>6}")
    for n in (int(x) for x in args.lengths.split(",")):
        row = bench(n, args.repeats, args.max_tokens)
        print(f"{row['n']:>12} {row['resident']:>9} {row['pages']:>6} {row['step_ms']:>15.2f} "
              f"{row['tokenize_ms']:>17.2f} {row['step_ms'] / row['tokenize_ms']:>6.2f}")


if __name__ == "__main__":
    main()
