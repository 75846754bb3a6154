"""A tiny paging agent for the LangGraph server tests (`tests/langgraph.test.json`).

Its scripted model calls ``recall(page_ids=[X])`` when the user writes ``RECALL X``, and otherwise
answers briefly; small budget and pages so paging starts within a few turns.
"""

from __future__ import annotations

import uuid

from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging import create_paging_agent
from langmem_paging.testing import ScriptedChatModel


def _respond(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and str(last.content).startswith("RECALL "):
        page_id = str(last.content).removeprefix("RECALL ").strip()
        call = {"name": "recall", "args": {"page_ids": [page_id]}, "id": f"call-{uuid.uuid4().hex[:8]}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage("Noted.")


graph = create_paging_agent(
    ScriptedChatModel(responses=[_respond] * 100_000), max_tokens=600, boundary="fixed_4", policy="lfu"
)
