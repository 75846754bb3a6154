"""Images and files in messages, as providers handle them: counted by the provider's rule (not their
base64), bookmarked from their alt text / filename, recalled as the original blocks, read as a
placeholder by text-only models. Through create_agent + PagingMiddleware with a scripted model and
LangChain's standard content blocks."""

from __future__ import annotations

import base64
import io
import random

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.content import create_file_block, create_image_block, create_plaintext_block
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PageStore, PagingMiddleware, reconstruct_history
from langmem_paging.core.blocks import (
    FILE_TOKENS,
    block_text,
    image_size,
    media_blocks,
    openai_image_tokens,
    text_only,
)
from langmem_paging.core.messages import is_bookmark
from langmem_paging.core.tokens import TokenCounter, message_text
from langmem_paging.testing import ScriptedChatModel

PIL = pytest.importorskip("PIL.Image", reason="Pillow makes the test images")


def _png(width: int, height: int, seed: int = 0) -> bytes:
    """A noise image: PNG cannot compress it, so its file is about 3 bytes a pixel."""
    rng = random.Random(seed)
    image = PIL.frombytes(
        "RGB", (width, height), bytes(rng.getrandbits(8) for _ in range(width * height * 3))
    )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


PNG = _png(400, 250)  # ~300 KB
B64 = base64.b64encode(PNG).decode()


def _harbour_message() -> HumanMessage:
    return HumanMessage(
        content_blocks=[
            {"type": "text", "text": "Here is where we moored the boat."},
            create_image_block(base64=B64, mime_type="image/png", alt="photo of harbour"),
        ],
        id="img-1",
    )


def test_the_test_image_is_a_300_kb_image():
    assert 290_000 <= len(PNG) <= 320_000 and image_size(PNG) == (400, 250)


def test_a_300_kb_image_counts_within_2x_of_openais_rule_not_its_base64():
    provider = openai_image_tokens(400, 250)  # one 512-pixel tile: 170 + 85
    counter = TokenCounter(model="gpt-4o-mini")
    message = _harbour_message()
    counted = counter.count_message(message)
    assert provider / 2 <= counted <= provider * 2, (counted, provider)
    as_text = len(counter.encoding.encode(B64))
    assert as_text > 100 * counted  # what counting its base64 as text gave (286,716 in the issue)


def test_openai_image_forms_and_detail_count_by_the_rule():
    counter = TokenCounter(model="gpt-4o")
    low = HumanMessage(
        [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}", "detail": "low"}}]
    )
    high = HumanMessage([{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}])
    assert counter.count_message(low) - counter.count_message(HumanMessage(message_text(low))) == 85
    assert counter.count_message(high) - counter.count_message(HumanMessage(message_text(high))) == 255
    assert openai_image_tokens(2048, 4096) == 1105 and openai_image_tokens(1024, 1024) == 765


def test_jpeg_and_gif_sizes_are_read_from_their_bytes():
    for fmt in ("JPEG", "GIF", "WEBP"):
        out = io.BytesIO()
        PIL.new("RGB", (1500, 700), (30, 90, 160)).save(out, format=fmt)
        assert image_size(out.getvalue()) == (1500, 700), fmt


def test_files_count_by_their_text_or_a_fixed_cost_and_read_as_their_name():
    counter = TokenCounter(model="gpt-4o")
    pdf = create_file_block(
        base64=base64.b64encode(b"%PDF-1.7" + bytes(200_000)).decode(),
        mime_type="application/pdf",
        filename="harbour-fees.pdf",
    )
    notes = create_plaintext_block(text="Mooring costs 40 euros a night. " * 20, title="fees.txt")
    message = HumanMessage(content_blocks=[{"type": "text", "text": "Two files."}, pdf, notes])
    text = message_text(message)
    assert "[file: harbour-fees.pdf]" in text and "Mooring costs" in text and "JVBER" not in text
    assert FILE_TOKENS < counter.count_message(message) < FILE_TOKENS + 400


def test_text_only_models_get_a_clear_placeholder():
    message = _harbour_message()
    content = text_only(message.content)
    assert not media_blocks(content)
    assert content[1] == {
        "type": "text",
        "text": "[image: photo of harbour] (not shown: this model reads text only)",
    }
    assert message.content[1]["base64"] == B64  # the message itself is untouched
    assert text_only("plain text") == "plain text"


# -- through the agent ------------------------------------------------------------------------------


def _turn(i: int) -> str:
    return f"Day {i}: we sailed to island{i} and ate grilled sardines with lemon at the quay."


def _reply(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and last.content == "Show me the harbour photo again.":
        return AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1"]}, "id": "call-p1"}])
    return AIMessage("Noted.")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_image_is_bookmarked_by_its_alt_text_and_recalled_as_the_image(mode):
    import asyncio

    store = InMemoryStore()
    model = ScriptedChatModel(responses=[_reply] * 40)
    paging = PagingMiddleware(max_tokens=700, boundary="fixed_2")
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "sea"}}

    def invoke(message):
        if mode == "sync":
            return agent.invoke({"messages": [message]}, config)
        return asyncio.run(agent.ainvoke({"messages": [message]}, config))

    original = _harbour_message()
    state = invoke(original)
    for i in range(12):
        state = invoke(HumanMessage(_turn(i)))

    bookmark = next(m.content for m in state["messages"] if is_bookmark(m) and m.content.startswith("[p1:"))
    keywords = bookmark[len("[p1:") : -1].replace(",", " ").split()
    readable = message_text(original) + " Noted."
    assert all(k in readable for k in keywords), (bookmark, "a keyword not from the readable text")
    assert "harbour" in keywords or "photo" in keywords, bookmark
    page = PageStore(store).get("sea", "p1")
    assert page.messages[0].content == original.content  # stored whole

    state = invoke(HumanMessage("Show me the harbour photo again."))
    result = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert isinstance(result.content, list)
    assert "[image: photo of harbour]" in result.content[0]["text"]
    assert result.content[1] == original.content[1]  # the original block, its base64 whole
    seen = [m for m in model.prompts[-1] if isinstance(m, ToolMessage)][-1]
    assert seen.content[1]["base64"] == B64  # the model received the image

    rebuilt = reconstruct_history(
        state["messages"],
        lambda p: PageStore(store).get("sea", p),
        clusters=lambda c: PageStore(store).get_cluster("sea", c),
        state=state["paging"],
    )
    first = next(m for m in rebuilt if m.id == "img-1")
    assert first.content == original.content  # nothing lost
    assert block_text(original.content[1]) == "[image: photo of harbour]"


def test_a_model_whose_profile_reads_no_images_gets_the_placeholder_and_the_state_keeps_the_image():
    model = ScriptedChatModel(responses=["Noted."] * 4, profile={"image_inputs": False})
    agent = create_agent(
        model,
        middleware=[PagingMiddleware(max_tokens=2000)],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    state = agent.invoke({"messages": [_harbour_message()]}, {"configurable": {"thread_id": "text-only"}})
    (sent,) = [m for m in model.prompts[-1] if isinstance(m, HumanMessage)]
    assert not media_blocks(sent.content) and B64 not in str(sent.content)
    assert "[image: photo of harbour] (not shown: this model does not read this kind of content)" in str(
        sent.content
    )
    assert state["messages"][0].content[1]["base64"] == B64  # only the prompt changed


def test_a_model_that_reads_images_gets_them():
    model = ScriptedChatModel(responses=["Noted."] * 4, profile={"image_inputs": True})
    agent = create_agent(
        model,
        middleware=[PagingMiddleware(max_tokens=2000)],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [_harbour_message()]}, {"configurable": {"thread_id": "vision"}})
    (sent,) = [m for m in model.prompts[-1] if isinstance(m, HumanMessage)]
    assert media_blocks(sent.content)[0]["base64"] == B64
