"""Drive the pure paging step the way an agent does, checking invariants at every model call."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage
from langgraph.graph.message import add_messages

from langmem_paging import TokenCounter, page_messages
from langmem_paging.testing.conformance import model_call_points, valid_chat

COUNTER = TokenCounter()


@dataclass
class Replay:
    """What a replay produced."""

    state: list[BaseMessage]
    paging: dict
    pages: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)


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
        out.state = result.apply(out.state)
        assert out.state == result.view, "updates must turn the state into the view"
        out.paging = result.state.to_value()
        out.steps.append(result)
    out.state = add_messages(out.state, messages[previous:])
    return out


assert_valid_chat = valid_chat  # the shipped check: tool results right after their call, calls answered
