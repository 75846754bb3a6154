"""Drive the pure paging step the way an agent does, checking invariants at every model call."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph.message import add_messages

from langmem_paging import TokenCounter, page_messages
from langmem_paging.messages import tool_call_ids

COUNTER = TokenCounter()


@dataclass
class Replay:
    """What a replay produced."""

    state: list[BaseMessage]
    paging: dict
    pages: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)


def model_call_points(messages: list[BaseMessage]) -> list[int]:
    """Prefix lengths at which an agent calls the model (after a user turn or a tool group's results)."""
    points = []
    for i, m in enumerate(messages):
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if isinstance(m, HumanMessage) or (isinstance(m, ToolMessage) and not isinstance(nxt, ToolMessage)):
            points.append(i + 1)
    return points


def replay(messages, *, max_tokens, points=None, **options) -> Replay:
    """Page `messages` at each model call point (replace mode), as `PagingMiddleware` would."""
    options.setdefault("text_counter", COUNTER)
    out = Replay(state=[], paging={})
    previous = 0
    for point in points or model_call_points(messages):
        out.state = add_messages(out.state, messages[previous:point])
        previous = point
        before, paging_before = copy.deepcopy(out.state), copy.deepcopy(out.paging)
        result = page_messages(out.state, max_tokens=max_tokens, state=out.paging, pages=out.pages, **options)
        assert out.state == before, "page_messages mutated its messages"
        assert out.paging == paging_before, "page_messages mutated its state"
        for page in result.pages:
            if page.id in out.pages:
                assert out.pages[page.id].digest == page.digest or page.kind == "page", "page id reused"
            out.pages[page.id] = page
        for node in result.nodes:
            assert node.id not in out.nodes, "cluster id reused"
            out.nodes[node.id] = node
        out.state = add_messages(out.state, result.updates)
        assert out.state == result.view, "updates must turn the state into the view"
        out.paging = result.state.to_value()
        out.steps.append(result)
    out.state = add_messages(out.state, messages[previous:])
    return out


def assert_valid_chat(messages: list[BaseMessage]) -> None:
    """What the OpenAI and Anthropic chat APIs require of the message list: every tool result
    right after the AI message that called it (with its siblings), and every tool call answered
    before anything else comes (a call may be open only at the very end)."""
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"tool result {message.id} without its call at {i}"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"unanswered tool calls {open_calls} before message {i} ({message.type})"
        if isinstance(message, AIMessage):
            open_calls = set(tool_call_ids(message))
        assert not isinstance(message, SystemMessage) or i == 0, "system message not first"
