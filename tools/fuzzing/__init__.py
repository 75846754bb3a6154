"""The fuzzer of the paging core, one job per module (`python tools/fuzz.py --help` runs it).

- `vocabulary`: the words and odd text histories are written with, and the strategies drawn;
- `oracles`: the invariants checked at every model call;
- `pure`: random histories through `page_messages` and a `Pager` (`PureCase`, the driver and the model
  call); `pure_generate` draws its events, `pure_events` applies them, `pure_checks` holds its oracles;
- `graph`: random turns through compiled graphs (`GraphCase`, the driver); `graph_build` compiles the
  graph under test and spies on its pager, `graph_generate` draws turns, `graph_checks` holds its oracles;
- `shrink`: a failing pure case shrunk to a standalone repro script;
- `report`: failures grouped by invariant, and the campaign's JSON summary;
- `cli`: campaigns from the command line; `run_small_case` for CI-sized cases.
"""

import logging

from .cli import main, run_case, run_small_case
from .oracles import chat_problems, recall_structure_problems
from .pure import PureCase, pure_params
from .report import Failure, Report

logging.getLogger("langmem_paging").setLevel(logging.CRITICAL)  # a campaign logs every injected fault

__all__ = [
    "Failure",
    "PureCase",
    "Report",
    "chat_problems",
    "main",
    "pure_params",
    "recall_structure_problems",
    "run_case",
    "run_small_case",
]
