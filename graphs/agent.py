"""`create_paging_agent`: `create_agent` with `PagingMiddleware` in one call."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from langmem_paging import PagingMiddleware

__all__ = ["chat_model_from_env", "create_paging_agent"]


def create_paging_agent(
    model: BaseChatModel | str,
    tools: Sequence[BaseTool] = (),
    *,
    system_prompt: str | None = None,
    store: Any = None,
    checkpointer: Any = None,
    **paging_options: Any,
):
    """A `create_agent` graph whose context is paged; `paging_options` go to `PagingMiddleware`.

    The middleware is reachable as ``graph.paging`` (for ``graph.paging.page_store``).
    """
    paging_options.setdefault("max_tokens", 4000)
    paging = PagingMiddleware(store=store, **paging_options)
    graph = create_agent(
        model, tools=list(tools), system_prompt=system_prompt, middleware=[paging], store=store,
        checkpointer=checkpointer,
    )
    graph.paging = paging
    return graph


def chat_model_from_env() -> BaseChatModel | None:
    """A real OpenAI-compatible model when ``OPENAI_API_KEY`` is set (``OPENAI_BASE_URL``,
    ``OPENAI_MODEL`` optional), else None."""
    if not os.environ.get("OPENAI_API_KEY"):
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), temperature=0)
