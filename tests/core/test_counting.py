"""Token counts follow what a chat API receives.

A malformed tool call (cut at the output limit) reaches the provider with its raw argument string:
it was counted as 3 tokens. Tool calls and results reach it in the wire form (call ids, names,
JSON-encoded arguments), which measured 5-25% above the old count in a tool-heavy run. Non-ASCII
arguments were `\\uXXXX` escapes: miscounted, shown that way, mined as bookmark keywords.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai.chat_models.base import _convert_message_to_dict

from langmem_paging import TokenCounter, page_messages
from langmem_paging.core.library_messages import tool_result_stub
from langmem_paging.core.tokens import message_text

COUNTER = TokenCounter()
HEBREW = "שלום עולם"


def _tokens(text: str) -> int:
    return COUNTER.count_text(text)


def test_a_malformed_call_counts_its_raw_argument_string():
    raw = '{"q": "' + "a very long argument that was cut " * 200
    call = AIMessage(
        "",
        id="m",
        invalid_tool_calls=[
            {"name": "lookup", "args": raw, "id": "bad1", "error": "cut", "type": "invalid_tool_call"}
        ],
    )
    assert COUNTER.count_message(call) >= _tokens(raw)
    assert raw in message_text(call)  # the model reads what it sent


def test_tool_calls_and_results_count_their_wire_form():
    calls = [
        {"name": "lookup", "args": {"q": f"lake {k}", "limit": k}, "id": f"call_{k:024d}"} for k in range(5)
    ]
    message = AIMessage("", id="m", tool_calls=calls)
    wire = _convert_message_to_dict(message)["tool_calls"]
    assert COUNTER.count_message(message) >= _tokens(json.dumps(wire))
    result = ToolMessage("found it", tool_call_id="call_000000000000000000000000", id="r")
    assert COUNTER.count_message(result) >= _tokens("found it") + _tokens("call_000000000000000000000000")


def test_non_ascii_tool_arguments_stay_unicode_in_text_stubs_and_bookmarks():
    call = AIMessage("", id="c", tool_calls=[{"name": "translate", "args": {"text": HEBREW}, "id": "t1"}])
    result = ToolMessage("תרגום: hello world " * 300, tool_call_id="t1", id="r")
    assert HEBREW in message_text(call) and "\\u05" not in message_text(call)
    stub = tool_result_stub("p1", result, call.tool_calls[0], 900)
    assert HEBREW in str(stub.content) and "\\u05" not in str(stub.content)
    history = []
    for i in range(8):
        history += [
            HumanMessage(f"Translate sentence {i}", id=f"h{i}"),
            AIMessage(
                "",
                id=f"a{i}",
                tool_calls=[{"name": "translate", "args": {"text": f"{HEBREW} {i}"}, "id": f"t{i}"}],
            ),
            ToolMessage(f"done {i}", tool_call_id=f"t{i}", id=f"r{i}"),
        ]
    result = page_messages(history, max_tokens=120, boundary="fixed_3")
    keywords = [k for page in result.pages for k in page.keywords]
    assert keywords and not any(k.lower().startswith("u05") for k in keywords), keywords


def test_a_counter_shared_by_threads_never_loses_an_entry_between_read_and_move():
    """The LRU cache was read, then its entry moved to the end, without a lock: another thread's
    eviction in between made `move_to_end` raise KeyError inside a paging step. Here the other
    thread tries to evict exactly between the two (it must wait for the lock)."""
    counter = TokenCounter(cache_size=2)
    message = HumanMessage("hello there", id="m1")
    counter.count_message(message)

    class Racing(OrderedDict):
        raced = False

        def get(self, key, default=None):
            entry = super().get(key, default)
            if key == "m1" and not Racing.raced:
                Racing.raced = True
                other = threading.Thread(
                    target=lambda: [counter.count_message(HumanMessage(str(k), id=f"x{k}")) for k in range(3)]
                )
                other.start()
                other.join(timeout=0.5)  # with the lock held, it cannot evict now
            return entry

    counter._cache._entries = Racing(counter._cache._entries)
    assert counter.count_message(message) == TokenCounter().count_message(message)


def test_tool_token_counts_follow_the_tool_not_its_address():
    """B13: count_tools cached by id(tool) without keeping the tool alive: a new tool allocated
    where a collected one was got the collected tool's count."""
    import gc

    from langchain_core.tools import StructuredTool

    from langmem_paging import TokenCounter

    def make(words: int):
        return StructuredTool.from_function(
            func=lambda q: q,
            name="lookup",
            description="Look things up. " * words,
            args_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        )

    counter, wrong = TokenCounter(), 0
    gc.freeze()
    try:
        for _ in range(60):  # about one in five lands on the freed address
            small = make(1)
            counter.count_tools([small])
            del small
            gc.collect()
            big = make(300)
            wrong += counter.count_tools([big]) != TokenCounter().count_tools([big])
            del big
            gc.collect()
    finally:
        gc.unfreeze()
    assert wrong == 0
