"""The deployment benchmark's graphs (tools/bench_deploy.py): one scripted model, with paging
(``paging``) and without (``plain``), so the two differ by paging alone.

The model answers ``RECALL p3`` with a recall of that page, ``SEARCH words`` with a recall by
query, anything else with a short note; small budget and pages, so paging starts within a few turns.
Without paging the same calls go to a stand-in `recall` tool that finds nothing: both graphs run the
same steps (a model call, the tool, a model call) on the same turns.
"""

from __future__ import annotations

import uuid

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langmem_paging import create_paging_agent
from langmem_paging.testing import ScriptedChatModel


def respond(messages):
    last = messages[-1]
    text = str(last.content) if isinstance(last, HumanMessage) else ""
    verb, _, rest = text.partition(" ")
    if verb in ("RECALL", "SEARCH") and rest:
        args = {"page_ids": [rest.strip()]} if verb == "RECALL" else {"query": rest.strip()}
        return AIMessage(
            "", tool_calls=[{"name": "recall", "args": args, "id": f"call-{uuid.uuid4().hex[:8]}"}]
        )
    return AIMessage(f"Noted: {str(last.content)[:40]}")


@tool
def recall(page_ids: list[str] | None = None, query: str | None = None) -> str:
    """Bring back earlier messages by id or by query (without paging: nothing was moved out)."""
    return "Nothing was paged out of this conversation."


def build(with_paging: bool, *, store=None, checkpointer=None):
    """The graph with or without paging; a LangGraph server supplies store and checkpointer when None."""
    model = ScriptedChatModel(responses=[respond] * 1_000_000)
    if with_paging:
        return create_paging_agent(
            model, store=store, checkpointer=checkpointer, max_tokens=600, boundary="fixed_4", policy="lfu"
        )
    return create_agent(model, tools=[recall], store=store, checkpointer=checkpointer)


paging = build(True)
plain = build(False)
