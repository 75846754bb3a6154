"""Recalled images count in the recall's fit (Correctness v5, bug 2).

The recall result's text was fitted to its room and the image blocks of the pages it showed were
added after: at ``max_tokens=3000``, six recalled pages with a 2048x2048 PNG each (765 tokens by
OpenAI's rule) made a 5,170-token prompt. The fit now counts the blocks each page brings, and the
result names the pages that did not fit, as it does for text.
"""

from __future__ import annotations

import base64
import io
import warnings

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.content import create_image_block

from tests.support.scenario_helpers import FACTS, prompt_tokens, scripted_agent

PIL = pytest.importorskip("PIL.Image", reason="Pillow makes the test images")
ASK = "Show me all the photos."
PAGES = [f"p{i}" for i in range(1, 7)]


def _png(seed: int) -> str:
    """A 2048x2048 PNG of one colour (small as a file, 765 tokens as an image)."""
    out = io.BytesIO()
    PIL.new("RGB", (2048, 2048), (seed * 30 % 255, 80, 120)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def _replying(args: dict) -> object:
    def reply(messages: list) -> AIMessage:
        if isinstance(messages[-1], HumanMessage) and messages[-1].content == ASK:
            return AIMessage("", tool_calls=[{"name": "recall", "args": args, "id": "r1"}])
        return AIMessage("Noted.")

    return reply


def _photo(i: int) -> HumanMessage:
    return HumanMessage(
        content_blocks=[
            {"type": "text", "text": f"Photo {i} of the harbour."},
            create_image_block(base64=_png(i), mime_type="image/png", alt=f"harbour view {i}"),
        ]
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "args", [{"page_ids": PAGES}, {"query": "photo harbour view"}], ids=["ids", "search"]
)
def test_recalled_images_stay_within_the_budget(mode: str, args: dict) -> None:
    import asyncio

    agent, paging, model = scripted_agent(3000, responses=[_replying(args)] * 60)
    config = {"configurable": {"thread_id": "t"}}

    def invoke(message: object) -> dict:
        if mode == "sync":
            return agent.invoke({"messages": [message]}, config)
        return asyncio.run(agent.ainvoke({"messages": [message]}, config))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(6):
            invoke(_photo(i))
        for i in range(14):
            invoke(" ".join([FACTS[i]] * 12))
        state = invoke(ASK)
    sizes = [prompt_tokens(model, paging, k=k) for k in range(len(model.prompts))]
    assert max(sizes) <= 3000, sizes
    result = next(m for m in reversed(state["messages"]) if isinstance(m, ToolMessage))
    assert isinstance(result.content, list)  # some images came back as images
    text, images = result.content[0]["text"], result.content[1:]
    if "query" in args:  # passages packed with their images: as many as fit
        assert 0 < len(images) < len(PAGES) and text.count("[image: harbour view") == len(images), text
        return
    shown = [p for p in PAGES if f"=== {p} ·" in text]
    assert 0 < len(shown) < len(PAGES) and len(images) == len(shown), (shown, len(images))
    notice = text[text.index("not shown: ") :]
    assert all(p in notice for p in PAGES if p not in shown), notice  # the others are named
