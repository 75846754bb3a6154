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
