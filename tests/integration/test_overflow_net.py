"""The overflow net shrinks from what the provider refused (Correctness v5, bug 4).

With ``max_tokens`` above the model's real window (the common misconfiguration), a context-length
error paged to 80% of ``max_tokens``: nothing to page, the retry sent the same prompt, and the turn
failed with the provider's error. The retry now pages to 80% of the least of the budget, the refused
prompt and the limit the error states; the thread keeps that scale, and a warning names
``max_tokens`` once.
"""

from __future__ import annotations

import warnings

import httpx
import openai
import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware
from langmem_paging.core.tokens import shared_counter
from langmem_paging.testing import ScriptedChatModel
from tests.integration.test_user_paths import FACTS, drive, rebuilt

WINDOW = 900
"""The model's real context window (tiktoken tokens of messages and tool schemas)."""
CONFIGURED = 100_000


def openai_overflow(tokens: int) -> Exception:
    text = f"This model's maximum context length is {WINDOW} tokens. However, your messages resulted in {tokens} tokens."
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    return openai.BadRequestError(
        f"Error code: 400 - {text}",
        response=httpx.Response(400, request=request),
        body={"message": text, "type": "invalid_request_error", "code": "context_length_exceeded"},
    )


def bare_overflow(tokens: int) -> Exception:
    return ContextOverflowError("prompt is too long")  # no limit stated


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("make_error", [openai_overflow, bare_overflow])
async def test_max_tokens_above_the_window_pages_from_the_refused_prompt(make_error, use_async) -> None:
    counter = shared_counter("cl100k_base")
    paging = PagingMiddleware(max_tokens=CONFIGURED, boundary="fixed_2")
    tools = counter.count_tools([paging.recall_tool])
    refusals: list[int] = []

    def reply(messages: list) -> AIMessage:
        if counter(messages) + tools > WINDOW:
            refusals.append(counter(messages))
            raise make_error(counter(messages) + tools)
        return AIMessage("Noted.")

    store = InMemoryStore()
    model = ScriptedChatModel(responses=[reply] * 60)
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        values = await drive(agent, FACTS * 2, "t", use_async)

    assert len(refusals) == 1, f"one refused call, then every prompt fit: {refusals}"
    at = next(i for i, p in enumerate(model.prompts) if counter(p) == refusals[0])
    refused, retried = model.prompts[at], model.prompts[at + 1]
    assert retried[-1].content == refused[-1].content  # the same turn, paged smaller
    assert counter(retried) + tools <= 0.8 * (counter(refused) + tools)
    scale = values["paging_calibration"]["scale"]
    assert scale < WINDOW / CONFIGURED  # the thread keeps it
    told = [str(w.message) for w in caught if "max_tokens=100000" in str(w.message)]
    assert len(told) == 1 and "above the model's context window" in told[0], told
    history = rebuilt(agent, store, "t")  # nothing lost
    assert [m.content for m in history if isinstance(m, HumanMessage)] == FACTS * 2
