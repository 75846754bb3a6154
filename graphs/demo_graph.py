"""The graph `langgraph.json` exposes: a paging agent on a real model if `OPENAI_API_KEY` is set,
else on an echoing scripted model (the LangGraph server supplies store and checkpointer)."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from graphs.agent import chat_model_from_env, create_paging_agent
from langmem_paging.testing import ScriptedChatModel


def _echo(messages):
    return AIMessage(f"(scripted model; set OPENAI_API_KEY for a real one) You said: {messages[-1].content}")


model = chat_model_from_env() or ScriptedChatModel(responses=[_echo] * 100_000)
graph = create_paging_agent(model, max_tokens=2000, boundary="fixed_20", policy="lfu")
