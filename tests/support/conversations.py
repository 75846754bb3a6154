"""Deterministic synthetic conversations for the tests."""

from __future__ import annotations

import random

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from tools.fuzzing.vocabulary import TOPIC_WORDS


def conversation(
    n_turns: int, *, seed: int = 0, system: bool = True, tools: bool = True
) -> list[BaseMessage]:
    """A chat with ids, timestamps, sessions, and tool-call groups (parallel calls included)."""
    rng = random.Random(seed)
    out: list[BaseMessage] = []
    if system:
        out.append(SystemMessage("You are a helpful assistant.", id="sys"))
    minute = 0
    for turn in range(n_turns):
        minute += rng.choice([1, 2, 3, 90])  # a 90-minute gap starts a new session
        session = f"s{minute // 60}"
        stamp = f"2024-01-{1 + minute // 1440:02d}T{(minute // 60) % 24:02d}:{minute % 60:02d}:00+00:00"
        meta = {"timestamp": stamp, "session_id": session}
        topic = rng.sample(TOPIC_WORDS, 3)
        out.append(
            HumanMessage(
                f"Turn {turn}: tell me about {' '.join(topic)} in {2000 + turn}.",
                id=f"h{turn}",
                additional_kwargs=dict(meta),
            )
        )
        if tools and rng.random() < 0.4:
            calls = [
                {"name": "lookup", "args": {"q": topic[k]}, "id": f"c{turn}_{k}"}
                for k in range(rng.choice([1, 2]))
            ]
            out.append(AIMessage("", tool_calls=calls, id=f"t{turn}", additional_kwargs=dict(meta)))
            for call in calls:
                out.append(
                    ToolMessage(
                        f"{call['args']['q']} facts #{turn}",
                        tool_call_id=call["id"],
                        name="lookup",
                        id=f"r{call['id']}",
                        additional_kwargs=dict(meta),
                    )
                )
        out.append(
            AIMessage(
                f"About {topic[0]}: noted for turn {turn}.", id=f"a{turn}", additional_kwargs=dict(meta)
            )
        )
    return out


def town_turns(n: int, start: int = 0) -> list[BaseMessage]:
    """`n` question-answer exchanges about numbered towns, ids ``h{i}``/``a{i}`` from `start`."""
    out: list[BaseMessage] = []
    for i in range(start, start + n):
        out += [
            HumanMessage(f"Question {i} about the city of Town{i}?", id=f"h{i}"),
            AIMessage(f"Answer {i}: Town{i} has {i} bridges.", id=f"a{i}"),
        ]
    return out


def beehive_notes(n: int) -> list[BaseMessage]:
    """`n` short exchanges, each naming its own beekeeper, lake and count (distinct pages that
    bookmark, fold and rank as warm pages apart)."""
    out: list[BaseMessage] = []
    for i in range(n):
        out += [
            HumanMessage(
                f"Note {i}: Zarko{i} keeps {120 + i} beehives near lake Bled{i}. Calm queen.", id=f"h{i}"
            ),
            AIMessage(f"Noted, Zarko{i} and the bees of Bled{i}.", id=f"a{i}"),
        ]
    return out
