"""The fixed settings every part measures with: budget, boundary, page size, how trim_messages runs."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_TOKENS = 2000
BOUNDARY = "fixed_20"
PAGE_MESSAGES = 20
TRIM_KWARGS = {"strategy": "last", "start_on": "human", "include_system": True}
"""How `trim_messages` is called (``start_on``/``include_system`` as langchain's docs advise for chat
history: the cost is the same, the result is a valid chat)."""
