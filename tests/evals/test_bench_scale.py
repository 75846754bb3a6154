"""Smoke test of the scale benchmark (`tools/bench_scale.py`): it runs end to end on tiny sizes
and writes the JSON the README's numbers come from. No timing is asserted."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

# The benchmark pages conversations at small budgets by design: the library's warnings there are
# by-products (their rule is tested where a test provokes one).
pytestmark = pytest.mark.filterwarnings("ignore::langmem_paging.PagingWarning")

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench_scale.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_bench_scale_quick_run_writes_every_section_and_stays_within_budget(tmp_path, capsys):
    bench = load_bench()
    out = tmp_path / "scale.json"
    bench.main(
        [
            "--quick",
            "--sizes",
            "200",
            "--pages",
            "50",
            "--repeats",
            "5",
            "--extra-policies",
            "",
            "--rss-threads",
            "1",
            "--rss-pages",
            "1",
            "--json",
            str(out),
        ]
    )
    report = json.loads(out.read_text())

    assert {"git_commit", "git_dirty", "cores", "python", "date"} <= set(report["header"])
    (size,) = report["steps"]["sizes"]
    assert size["history_messages"] >= 200
    assert set(size["runners"]) == {"replace/lfu", "view/lfu"}
    for runner in size["runners"].values():
        assert runner["paging"]["n"] + runner["not_paging"]["n"] == 5
        assert {"p50", "p95"} <= set(runner["all"])
        assert runner["pages_formed"] > 0  # 200 messages do not fit 2000 tokens: the thread paged
    assert {"approximate", "tiktoken"} <= set(size["trim"])
    received = report["steps"]["max_tokens_received"]
    assert 0 < received["tokens"] <= received["max_tokens"] and not received["exceeded"]

    (recall,) = report["recall"]
    assert recall["pages"] == 50 and recall["recall_by_id_ms"]["n"] == 5
    assert recall["search_cold_found"] and recall["search_queries_with_hits"] > 0
    (rss,) = report["rss"]
    assert rss["pages_per_thread"] == 1 and rss["index_threads"] == 1  # searched once: loaded
    assert any("recall by id" in t["target"] for t in report["targets"])
    assert "| history msgs |" in capsys.readouterr().out
