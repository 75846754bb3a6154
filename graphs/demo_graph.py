"""The graph `langgraph.json` exposes: a paging agent on the real model ``$LANGMEM_PAGING_MODEL``
names (``openai:gpt-4o-mini``), else on an echoing scripted model (the LangGraph server supplies
store and checkpointer)."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from graphs.agent import MODEL_ENV, chat_model_from_env
from langmem_paging import create_paging_agent
from langmem_paging.testing import ScriptedChatModel

HINT = f"a scripted echo model: set {MODEL_ENV}=openai:gpt-4o-mini for a real one"
"""Where the scripted model says what it is: in each reply's metadata, which Studio and LangSmith
show, not in its text, which pages and bookmarks are made of."""


def _echo(messages):
    return AIMessage(
        f"You said: {messages[-1].content}", response_metadata={"model_name": "scripted-echo", "hint": HINT}
    )


model = chat_model_from_env() or ScriptedChatModel(responses=[_echo] * 100_000)
graph = create_paging_agent(model, max_tokens=2000, boundary="fixed_20", policy="lfu")
