"""``python -m evals {locomo,synthetic,ablate}``."""

from __future__ import annotations

import argparse
import sys

from evals.methods import METHODS
from evals.runner import RunConfig, run


def _csv(cast=str):
    return lambda s: [cast(x) for x in s.split(",") if x]


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output directory (re-running resumes)")
    p.add_argument("--budgets", type=_csv(int), default=[2000, 4000, 8000])
    p.add_argument("--reader", choices=["lexical", "llm"], default="lexical",
                   help="lexical: offline, deterministic; llm: a real model via OPENAI_API_KEY/OPENAI_BASE_URL")
    p.add_argument("--model", default=None, help="llm reader: model name (default $OPENAI_MODEL or gpt-4o-mini)")
    p.add_argument("--judge-model", default=None, help="llm reader: judge model (default: --model)")
    p.add_argument("--max-model-calls", type=int, default=4, help="llm reader: model calls per question at most")
    p.add_argument("--workers", type=int, default=4, help="llm reader: questions asked at once (end protocol)")
    p.add_argument("--max-questions", type=int, default=None,
                   help="ask only each conversation's first N questions (to bound llm cost)")
    p.add_argument("--protocol", choices=["end", "streaming"], default="end")
    p.add_argument("--limit", type=int, default=None, help="use only the first N conversations")
    p.add_argument("--data", default=None, help="LoCoMo file (official format); default $LOCOMO_PATH or shared dev")
    p.add_argument("--dataset", choices=["locomo", "synthetic"], default=None, help=argparse.SUPPRESS)
    p.add_argument("--synthetic-turns", type=int, default=600)
    p.add_argument("--synthetic-facts", type=int, default=30)
    p.add_argument("--synthetic-conversations", type=int, default=5)
    p.add_argument("--no-progress", action="store_true")


def _conversations(dataset: str, args):
    if dataset == "locomo":
        from evals.datasets.locomo import data_path, file_sha256, load_locomo

        return load_locomo(args.data, limit=args.limit), file_sha256(data_path(args.data))
    from evals.datasets.synthetic import generate

    convs = [generate(n_turns=args.synthetic_turns, n_facts=args.synthetic_facts, seed=s)
             for s in range(args.synthetic_conversations)]
    return convs[: args.limit], None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("locomo", "synthetic"):
        p = sub.add_parser(name, help=f"six methods at matched budgets on {name}")
        _add_common(p)
        p.add_argument("--methods", type=_csv(), default=list(METHODS))
        p.add_argument("--boundary", default="fixed_20")
        p.add_argument("--policy", default="lfu")
    p = sub.add_parser("ablate", help="paging: boundary strategies x eviction policies")
    _add_common(p)
    p.add_argument("--boundaries", type=_csv(), default=["fixed_10", "fixed_20", "fixed_40", "session", "topic_shift"])
    p.add_argument("--policies", type=_csv(), default=["fifo", "lru", "lfu", "semantic"])
    p.add_argument("--on", choices=["locomo", "synthetic"], default="locomo", help="dataset for the ablation")
    args = parser.parse_args(argv)

    dataset = args.on if args.command == "ablate" else args.command
    reader = None
    if args.reader == "llm":
        from evals.readers.llm import LLMReader

        try:
            reader = LLMReader.from_env(args.model, judge_model=args.judge_model,
                                        max_model_calls=args.max_model_calls)
        except (ValueError, ImportError) as exc:
            parser.error(str(exc))
    conversations, sha = _conversations(dataset, args)
    unknown = set(getattr(args, "methods", [])) - set(METHODS)
    if unknown:
        parser.error(f"unknown methods {sorted(unknown)}; available: {', '.join(METHODS)}")
    config = RunConfig(
        dataset=dataset, budgets=args.budgets, protocol=args.protocol, reader=args.reader, data_sha256=sha,
        methods=getattr(args, "methods", ["paging"]),
        boundaries=args.boundaries if args.command == "ablate" else [args.boundary],
        policies=args.policies if args.command == "ablate" else [args.policy],
        extra={"limit": args.limit, "max_questions": args.max_questions}
        | (reader.version if reader is not None else {}) | ({} if dataset == "locomo" else {
            "turns": args.synthetic_turns, "facts": args.synthetic_facts,
            "conversations": args.synthetic_conversations}),
    )
    summary = run(conversations, config, args.out, ablation=args.command == "ablate", progress=not args.no_progress,
                  reader=reader, workers=args.workers)
    from evals.report import markdown_table

    cols = (["budget", "boundary", "policy", "evidence_coverage", "page_selection_top1", "mean_bookmark_tokens",
             "over_budget_rate"]
            if args.command == "ablate" else
            ["method", "budget", "evidence_coverage", "mean_context_tokens", "page_selection_top1"])
    if reader is not None:
        cols += ["answer_f1", "judge_score", "recall_trigger_rate"]
    print(markdown_table(summary["rows"], cols))
    print(f"\nwrote {args.out}/results.jsonl, summary.json, summary.md and plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
