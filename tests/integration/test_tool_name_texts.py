"""`tool_name` renames paging's tool everywhere the model reads it: the paged-result stub, the warm
digest, a shrunk recall result's reference, a long page's "part=2" note, a search's "reads the best
page in parts" note (built through the step's options and stored in the recall spec)."""

from __future__ import annotations

import re

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware
from langmem_paging.core.library_messages import shrink_recall_copy
from langmem_paging.recall.spec import RecallSpec
from langmem_paging.testing import ScriptedChatModel

CITIES = ["Lisbon", "Kyoto", "Quito", "Oslo", "Rome", "Lima", "Accra", "Hanoi"]


@tool
def lookup(city: str) -> str:
    """Look up a city's travel notes."""
    return " ".join(
        f"{city} note {i}: the harbour ferry leaves at {i % 12 + 1} pm from pier {i}." for i in range(120)
    )


def _call(name: str, args: dict[str, object], ident: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": ident}])


def test_no_text_the_model_reads_names_the_default_tool_when_renamed() -> None:
    script: list[object] = []
    for i, city in enumerate(CITIES):
        script += [_call("lookup", {"city": city}, f"l{i}"), "Noted."]
    script += [
        _call("memory_recall", {"page_ids": ["p1"]}, "r1"),
        "ok",
        _call("memory_recall", {"query": "ferry harbour pier"}, "r2"),
        "ok",
    ]
    model = ScriptedChatModel(responses=[*script, *["Noted."] * 20])
    store = InMemoryStore()
    paging = PagingMiddleware(
        max_tokens=900, boundary="fixed_2", tool_name="memory_recall", tiers="importance", store=store
    )
    agent = create_agent(
        model, tools=[lookup], middleware=[paging], checkpointer=InMemorySaver(), store=store
    )
    config = {"configurable": {"thread_id": "t"}}
    for i, city in enumerate(CITIES):
        agent.invoke({"messages": [f"Tell me about {city} and its ferry on day {i}."]}, config)  # type: ignore[arg-type]
    for text in ["show p1", "search", "go on", "and on", "more", "again"]:
        agent.invoke({"messages": [text]}, config)  # type: ignore[arg-type]

    seen = {str(m.content) for prompt in model.prompts for m in prompt}
    told = " ".join(seen)
    kinds = {  # each hint the rename must reach was shown at least once
        "stub": "call memory_recall(page_ids=",
        "digest": "]) for all of it]",
        "parts": "part=2) for more",
    }
    missing = [kind for kind, needle in kinds.items() if needle not in told]
    assert not missing, f"scenario no longer shows {missing}"
    wrong = sorted({t[:160] for t in seen if re.search(r"(?<!memory_)recall\(|call recall ", t)})
    assert not wrong, wrong


def test_a_shrunk_recall_result_names_the_tool_that_made_it() -> None:
    copy = ToolMessage(
        "=== p1 ===",
        tool_call_id="c",
        name="memory_recall",
        id="r",
        artifact={"langmem_paging": {"recalled": ["p1"]}},
    )
    assert (
        str(shrink_recall_copy(copy).content)
        == "[recalled p1; text removed from context, call memory_recall again to reread]"
    )


def test_a_rebuilt_recall_result_keeps_the_tool_name() -> None:
    spec = RecallSpec(items=[], max_tokens=100, part_tokens=50, tool="memory_recall")
    assert RecallSpec.from_dict(spec.to_dict()).tool == "memory_recall"
    assert (
        RecallSpec.from_dict(RecallSpec(items=[], max_tokens=100, part_tokens=50).to_dict()).tool == "recall"
    )


STRAY = re.compile(r"(?<!memory_)recall\(|call recall |(?<![\w_])recall (call|failed|is unavailable)")


def test_a_paged_malformed_call_names_the_renamed_tool() -> None:
    """Correctness v5, bug 3: the malformed-call stub said ``call recall(page_ids=['p1'])`` whatever
    `tool_name` was."""
    from tests.core.test_malformed_units import MALFORMED_AT, _malformed_call
    from tests.support.scenario_helpers import FACTS, scripted_agent

    responses: list[object] = ["Noted."] * MALFORMED_AT + [_malformed_call(2500)] + ["Noted."] * 8
    agent, _paging, model = scripted_agent(1500, responses=responses, tool_name="memory_recall")
    for i in range(MALFORMED_AT + 2):
        agent.invoke({"messages": [FACTS[i]]}, {"configurable": {"thread_id": "t"}})
    stubs = [
        str(m.content)
        for prompt in model.prompts
        for m in prompt
        if isinstance(m, AIMessage) and m.invalid_tool_calls and "paged out" in str(m.content)
    ]
    assert stubs and all("call memory_recall(page_ids=['p" in s for s in stubs), stubs
    assert not [s for s in stubs if STRAY.search(s)]


def test_every_library_text_names_the_renamed_tool() -> None:
    """Each text the library writes for the model, rendered with a custom tool name: none names the
    default tool."""
    from langmem_paging.core.library_messages import (
        copy_reference,
        digest_message,
        malformed_call_stub,
        tool_result_stub,
    )
    from langmem_paging.core.tokens import TokenCounter
    from langmem_paging.integrations.recall_tool import _NO_THREAD
    from langmem_paging.recall.service import RECALL_UNAVAILABLE, Served, _elsewhere_notes, _pointer

    tool = "memory_recall"
    bad = AIMessage("", invalid_tool_calls=[{"name": "lookup", "args": "{", "id": "b", "error": "x"}])
    result = ToolMessage("x" * 50, tool_call_id="c", name="lookup", id="r")
    served = {"p1": Served("c7", 0)}
    texts = [
        str(malformed_call_stub("p1", bad, 2380, tool=tool).content),
        str(tool_result_stub("p1", result, {"name": "lookup", "args": {}}, 900, tool=tool).content),
        str(digest_message("p1", "key lines", 4, "m", tool=tool).content),
        copy_reference(["p1"], tool),
        RECALL_UNAVAILABLE.format(tool=tool),
        _NO_THREAD.format(tool=tool),
        _pointer(["p1"], served, tool),
        *_elsewhere_notes(["p1"], served, {}, TokenCounter(), tool),
    ]
    assert all(tool in t for t in texts), texts
    assert not [t for t in texts if STRAY.search(t)], texts
