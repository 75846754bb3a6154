"""``python -m evals {locomo,synthetic,ablate,ablation-suite,needles}``."""

from __future__ import annotations

import argparse
import sys

from evals.ablation_suite import BOUNDARIES, NEEDED_BOUNDARIES, SUITE_SYNTHETIC_TURNS
from evals.methods import METHODS
from evals.paging_method import reader_of
from evals.policy_spec import paging_options, split_specs
from evals.readers.lexical import READER_MODES
from evals.runner import RunConfig, run


def _csv(cast=str):
    return lambda s: [cast(x) for x in s.split(",") if x]


def _add_budgets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budgets",
        type=_csv(int),
        default=[2000, 4000, 8000],
        help="token budgets B, comma-separated (default 2000,4000,8000)",
    )


def _add_data(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data", default=None, help="LoCoMo file (official format); default $LOCOMO_PATH or shared dev"
    )


def _add_synthetic(p: argparse.ArgumentParser, *, turns: int = 600) -> None:
    """How the synthetic conversations are generated."""
    p.add_argument(
        "--synthetic-turns",
        type=int,
        default=turns,
        help=f"synthetic: turns per conversation (default {turns})",
    )
    p.add_argument(
        "--synthetic-facts",
        type=int,
        default=30,
        help="synthetic: planted facts per conversation, one question each (default 30)",
    )
    p.add_argument(
        "--synthetic-conversations",
        type=int,
        default=5,
        help="synthetic: conversations generated, seeds 0..N-1 (default 5)",
    )


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output directory (re-running resumes)")
    _add_budgets(p)
    p.add_argument(
        "--reader",
        choices=["lexical", "llm"],
        default="lexical",
        help="lexical: offline, deterministic; llm: a real model via OPENAI_API_KEY/OPENAI_BASE_URL",
    )
    p.add_argument(
        "--model", default=None, help="llm reader: model name (default $OPENAI_MODEL or gpt-4o-mini)"
    )
    p.add_argument("--judge-model", default=None, help="llm reader: judge model (default: --model)")
    p.add_argument(
        "--max-model-calls", type=int, default=4, help="llm reader: model calls per question at most"
    )
    p.add_argument(
        "--workers", type=int, default=4, help="llm reader: questions asked at once (end protocol)"
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="lexical reader: units (conversation x method x budget) run in this many processes",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="BLAS/onnxruntime/torch threads per process (default: cores // processes, at least 1)",
    )
    p.add_argument(
        "--max-questions",
        type=int,
        default=None,
        help="ask only each conversation's first N questions (to bound llm cost)",
    )
    p.add_argument(
        "--protocol",
        choices=["end", "streaming"],
        default="end",
        help="end: every question after the whole conversation (default); streaming: each right after "
        "the session following its evidence",
    )
    p.add_argument("--limit", type=int, default=None, help="use only the first N conversations")
    _add_data(p)
    p.add_argument("--dataset", choices=["locomo", "synthetic"], default=None, help=argparse.SUPPRESS)
    _add_synthetic(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it counts questions asked)")
    p.add_argument(
        "--paging-reader",
        default="bookmarks",
        help=f"lexical reader mode(s) for paging, comma-separated: {', '.join(READER_MODES)}, or all "
        "(each mode is its own method, paging[mode]; semantic needs the minilm extra)",
    )


def _paging_readers(parser, text: str, *, single: bool = False) -> list[str]:
    """Reader modes from ``--paging-reader``; `all` skips semantic (with a message) when MiniLM
    is not installed."""
    from evals.readers.semantic import unavailable

    modes = list(READER_MODES) if text == "all" else [m for m in text.split(",") if m]
    unknown = [m for m in modes if m not in READER_MODES]
    if unknown or not modes:
        parser.error(
            f"unknown --paging-reader {', '.join(unknown) or text!r}; available: "
            f"{', '.join(READER_MODES)}, all"
        )
    if "semantic" in modes and (reason := unavailable()):
        if text != "all":
            parser.error(reason)
        print(reason, file=sys.stderr)
        modes.remove("semantic")
    if single and len(modes) > 1:
        parser.error("this command takes one --paging-reader mode")
    return modes


def _embedder_methods(parser, args) -> list[str]:
    """The run's methods, with the embedders they need checked now, not mid-run: an unavailable one
    is an error when named, and drops the flat hybrid baseline (with a message) from the default list."""
    from evals.methods import EMBEDDING_METHODS

    methods = list(getattr(args, "methods", ["paging"]))
    spec = getattr(args, "search_embedder", None)
    wanted = [m for m in methods if m in EMBEDDING_METHODS]
    for name in [spec] if spec else []:
        try:
            from langmem_paging.strategies.embeddings import get_embedder

            get_embedder(name)
        except (ImportError, ValueError) as error:
            parser.error(f"--search-embedder {name}: {error}")
    if wanted and not spec:
        try:
            from langmem_paging.strategies.embeddings import get_embedder

            get_embedder("default")
        except ImportError as error:
            if methods != list(METHODS):
                parser.error(f"{', '.join(wanted)}: {error}")
            print(f"skipping {', '.join(wanted)}: {error}", file=sys.stderr)
            methods = [m for m in methods if m not in EMBEDDING_METHODS]
    return methods


def _policy_specs(parser, text: str) -> list[str]:
    """Policy specs (`evals.policy_spec`), each checked against the library now, not mid-run."""
    specs = split_specs(text)
    for spec in specs:
        try:
            paging_options(spec)
        except ValueError as error:
            parser.error(str(error))
    return specs


def _conversations(dataset: str, args):
    if dataset == "locomo":
        from evals.datasets.locomo import data_path, file_sha256, load_locomo

        return load_locomo(args.data, limit=args.limit), file_sha256(data_path(args.data))
    from evals.datasets.synthetic import generate

    convs = [
        generate(n_turns=args.synthetic_turns, n_facts=args.synthetic_facts, seed=s)
        for s in range(args.synthetic_conversations)
    ]
    return convs[: args.limit], None


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m evals`` parser (every option says what it does)."""
    parser = argparse.ArgumentParser(
        prog="python -m evals",
        description="Evaluate paging against other memory methods on LoCoMo or synthetic conversations.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("locomo", "synthetic"):
        p = sub.add_parser(name, help=f"six methods at matched budgets on {name}")
        _add_common(p)
        p.add_argument(
            "--methods",
            type=_csv(),
            default=list(METHODS),
            help=f"methods, comma-separated (default all: {', '.join(METHODS)})",
        )
        p.add_argument(
            "--boundary",
            default="fixed_20",
            help="paging: how messages are cut into pages (default fixed_20)",
        )
        p.add_argument("--policy", default="lfu", help="paging: eviction policy spec (default lfu)")
        p.add_argument(
            "--search-embedder",
            default=None,
            help="paging: hybrid search with this embedder (default: the local ONNX MiniLM, needs the "
            "embeddings extra; minilm: torch, the minilm extra; openai:<model>); default BM25 "
            "only. The flat hybrid baseline hybrid_nb1 uses it too (default: default)",
        )
    p = sub.add_parser("ablate", help="paging: boundary strategies x eviction policies")
    _add_common(p)
    p.add_argument(
        "--boundaries",
        type=_csv(),
        default=["fixed_10", "fixed_20", "fixed_40", "session", "topic_shift"],
        help="boundary strategies, comma-separated (default fixed_10,fixed_20,fixed_40,session,topic_shift)",
    )
    p.add_argument(
        "--policies",
        default="fifo,lru,lfu,semantic",
        help="policy specs: fifo, lru, lfu, semantic, stae:beta=0.5,grouping=kmeans, tiers:importance, "
        "lfu+tiers:utility",
    )
    p.add_argument("--on", choices=["locomo", "synthetic"], default="locomo", help="dataset for the ablation")
    p = sub.add_parser(
        "ablation-suite",
        help="the study's ablation: six ablate runs (grids, streaming policies, bookmark strategies) at "
        "every budget, their summaries and the findings table into --data-dir",
    )
    p.add_argument(
        "--out",
        default="results/ablation",
        help="runs' directory, one folder per run (re-running resumes; default results/ablation, untracked)",
    )
    p.add_argument(
        "--data-dir",
        default="results/ablation-data",
        help="where each run's summary.json/summary.md and findings.json/findings.md go (default "
        "results/ablation-data, untracked; the notebook reads notebooks/data/ablation, tracked: name it "
        "to update the notebook's data)",
    )
    _add_budgets(p)
    p.add_argument(
        "--boundaries",
        type=_csv(),
        default=list(BOUNDARIES),
        help=f"the grids' boundary strategies (default {','.join(BOUNDARIES)}; must keep "
        f"{' and '.join(NEEDED_BOUNDARIES)}, which the findings compare)",
    )
    p.add_argument(
        "--limit", type=int, default=None, help="use only the first N conversations of each dataset"
    )
    _add_data(p)
    _add_synthetic(p, turns=SUITE_SYNTHETIC_TURNS)
    p.add_argument("--processes", type=int, default=1, help="units run in this many processes (default 1)")
    p.add_argument("--threads", type=int, default=None, help="BLAS/runtime threads per process")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--any-commit",
        action="store_true",
        help="resume runs under --out made by a commit whose langmem_paging/ or evals/ differs from the "
        "code's (default: refuse, since the findings would mix two libraries)",
    )
    p = sub.add_parser("needles", help="needle density: NRR vs ECR per policy (one needle per segment)")
    _add_common(p)
    p.set_defaults(budgets=[])
    p.add_argument(
        "--fractions",
        type=_csv(float),
        default=[],
        help="compression levels as fractions of each conversation's tokens (besides --budgets)",
    )
    p.add_argument("--policies", default="fifo,lru,lfu,semantic", help="policy specs, as for ablate")
    p.add_argument(
        "--boundary", default="fixed_20", help="how messages are cut into pages (default fixed_20)"
    )
    p.add_argument(
        "--on",
        choices=["locomo", "synthetic"],
        default="synthetic",
        help="dataset for the needles (default synthetic)",
    )
    p.add_argument("--needle-turns", type=int, default=400, help="synthetic: turns per conversation")
    p.add_argument("--segments", type=int, default=20, help="equal segments, one needle each")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from evals.datasets.locomo import DataNotFound

    try:
        return _run(parser, args)
    except DataNotFound as error:
        print(f"evals {args.command}: {error}", file=sys.stderr)
        return 2


def _run(parser, args) -> int:
    if args.command == "needles":
        return _needles(parser, args)
    if args.command == "ablation-suite":
        return _ablation_suite(parser, args)

    from evals.threads import pin_threads, threads_per_process

    try:
        pin_threads(args.threads if args.threads is not None else threads_per_process(args.processes))
    except ValueError as error:
        parser.error(str(error))
    ablation = args.command == "ablate"
    dataset = args.on if ablation else args.command
    reader = _llm_reader(parser, args)
    conversations, sha = _conversations(dataset, args)
    readers = _paging_readers(parser, args.paging_reader, single=ablation)
    policies = _policy_specs(parser, args.policies) if ablation else [args.policy]
    _check_methods(parser, args)
    methods = _embedder_methods(parser, args)
    config = RunConfig(
        dataset=dataset,
        budgets=args.budgets,
        protocol=args.protocol,
        reader=args.reader,
        data_sha256=sha,
        methods=methods,
        boundaries=args.boundaries if ablation else [args.boundary],
        policies=policies,
        paging_readers=readers,
        search_embedder=getattr(args, "search_embedder", None),
        extra=_run_extra(args, dataset, reader),
    )
    summary = run(
        conversations,
        config,
        args.out,
        ablation=ablation,
        progress=not args.no_progress,
        reader=reader,
        workers=args.workers,
        processes=args.processes,
    )
    from evals.report import markdown_table

    print(markdown_table(summary["rows"], _printed_columns(ablation, reader is not None)))
    print(f"\nwrote {args.out}/results.jsonl, summary.json, summary.md and plots")
    return 0


def _llm_reader(parser, args):
    """The `LLMReader` of ``--reader llm`` (its environment checked now), else None."""
    if args.reader != "llm":
        return None
    from evals.readers.llm import LLMReader

    try:
        return LLMReader.from_env(
            args.model, judge_model=args.judge_model, max_model_calls=args.max_model_calls
        )
    except (ValueError, ImportError) as exc:
        parser.error(str(exc))


def _check_methods(parser, args) -> None:
    """``--methods`` names only known methods (and paging readers)."""
    unknown = {
        m for m in getattr(args, "methods", []) if m not in METHODS and reader_of(m) not in READER_MODES
    }
    if unknown:
        parser.error(f"unknown methods {sorted(unknown)}; available: {', '.join(METHODS)}")


def _run_extra(args, dataset: str, reader) -> dict:
    """`RunConfig.extra`: the limits, the llm reader's version, the synthetic conversations' sizes."""
    synthetic = (
        {}
        if dataset == "locomo"
        else {
            "turns": args.synthetic_turns,
            "facts": args.synthetic_facts,
            "conversations": args.synthetic_conversations,
        }
    )
    return (
        {"limit": args.limit, "max_questions": args.max_questions}
        | (reader.version if reader is not None else {})
        | synthetic
    )


def _printed_columns(ablation: bool, answers: bool) -> list[str]:
    """The columns of the table a run prints."""
    cols = (
        [
            "budget",
            "boundary",
            "policy",
            "evidence_coverage",
            "page_selection_top1",
            "mean_bookmark_tokens",
            "over_budget_rate",
        ]
        if ablation
        else [
            "method",
            "budget",
            "evidence_coverage",
            "mean_context_tokens",
            "bookmark_share",
            "page_selection_top1",
            "page_selection_top3",
        ]
    )
    return cols + (["answer_f1", "judge_score", "recall_trigger_rate"] if answers else [])


def _ablation_suite(parser, args) -> int:
    from evals.ablation_suite import SuiteIncomplete, run_suite, summary_line
    from evals.datasets.locomo import data_path
    from evals.report import findings_by_budget
    from evals.runner import _git

    lacking = [b for b in NEEDED_BOUNDARIES if b not in args.boundaries]
    if lacking:
        parser.error(f"--boundaries must include {', '.join(lacking)}: the findings compare them")
    data_path(args.data)  # before any run: half of them read LoCoMo
    passthrough = [
        f"--{name.replace('_', '-')}={value}"
        for name in ("limit", "data", "synthetic_conversations", "synthetic_turns", "synthetic_facts")
        + ("processes", "threads")
        if (value := getattr(args, name)) is not None
    ] + (["--no-progress"] if args.no_progress else [])
    try:
        rows = run_suite(
            args.out,
            args.data_dir,
            budgets=args.budgets,
            boundaries=args.boundaries,
            passthrough=passthrough,
            ablate=main,
            commit=None if args.any_commit else _git("rev-parse", "HEAD"),
        )
    except SuiteIncomplete as error:
        print(f"ablation-suite: {error}", file=sys.stderr)
        return 1
    print(findings_by_budget(rows))
    print(
        f"\n{summary_line(rows)}\nwrote {args.data_dir}/findings.json, findings.md and each run's summaries"
    )
    return 0


def _needles(parser, args) -> int:
    from evals.datasets.needles import generate_needles, locomo_needles
    from evals.needles import NeedleConfig, run_needles
    from evals.report import markdown_table

    if not args.budgets and not args.fractions:
        parser.error("needles: give --budgets and/or --fractions (compression levels)")
    if args.reader != "lexical":
        parser.error("needles: only the offline lexical reader (its --paging-reader modes) is supported")
    policies = _policy_specs(parser, args.policies)
    readers = _paging_readers(parser, args.paging_reader)
    if args.on == "locomo":
        from evals.datasets.locomo import data_path, file_sha256, load_locomo

        items = [locomo_needles(c, args.segments) for c in load_locomo(args.data, limit=args.limit)]
        sha = file_sha256(data_path(args.data))
    else:
        items = [
            generate_needles(n_turns=args.needle_turns, seed=s, n_segments=args.segments)
            for s in range(args.synthetic_conversations)
        ][: args.limit]
        sha = None
    config = NeedleConfig(
        dataset=args.on,
        policies=policies,
        budgets=args.budgets,
        fractions=args.fractions,
        boundary=args.boundary,
        readers=readers,
        data_sha256=sha,
        extra={"limit": args.limit, "segments": args.segments}
        | (
            {"turns": args.needle_turns, "conversations": args.synthetic_conversations}
            if args.on == "synthetic"
            else {}
        ),
    )
    summary = run_needles(items, config, args.out, progress=not args.no_progress, processes=args.processes)
    print(
        markdown_table(
            summary["rows"],
            [
                "policy",
                "reader",
                "level",
                "mean_budget",
                "ecr",
                "nrr",
                "nrr_ci95",
                "nrr_resident",
                "n_needles",
            ],
        )
    )
    print(f"\nwrote {args.out}/results.jsonl, summary.json, summary.md and nrr_vs_ecr.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
