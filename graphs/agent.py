"""The ready graphs' model choice; `create_paging_agent` itself lives in the package
(`langmem_paging.integrations.agents`) and is re-exported here for older imports."""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

from langmem_paging.integrations.agents import create_paging_agent

__all__ = ["MODEL_ENV", "chat_model", "chat_model_from_env", "create_paging_agent"]

MODEL_ENV = "LANGMEM_PAGING_MODEL"
"""Names the real model the server's demo graph uses (``openai:gpt-4o-mini``); unset: scripted."""


def chat_model(name: str | None) -> BaseChatModel | None:
    """The chat model `name` names (an ``init_chat_model`` string such as ``openai:gpt-4o-mini``,
    temperature 0), or None for no name. The provider reads its own credentials
    (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``); a key alone never picks a real model, so a stale or
    bogus key cannot turn an offline run into a network one."""
    if not name:
        return None
    from langchain.chat_models import init_chat_model

    return init_chat_model(name, temperature=0)


def chat_model_from_env() -> BaseChatModel | None:
    """`chat_model` of ``$LANGMEM_PAGING_MODEL`` (how ``langgraph dev`` is told), else None."""
    return chat_model(os.environ.get(MODEL_ENV))
