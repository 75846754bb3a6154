"""Deterministic synthetic conversations with planted facts ("needles").

Facts are spread uniformly over the conversation. Each fact may get a paraphrase
distractor (same attribute, other person) and an update (a later turn overrides
the value; the probe's answer and evidence are then the update's).
"""

from __future__ import annotations

import random

from evals.datasets.records import Conversation, Question, Turn

_PEOPLE = [
    "Amara",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Esme",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kalani",
    "Lucia",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quinn",
    "Rafael",
    "Sanna",
    "Tomas",
]
_ATTRIBUTES = [
    (
        "pet",
        "My {who}'s new pet is a {value}.",
        "What is {who}'s pet?",
        ["tortoise", "parrot", "ferret", "greyhound", "axolotl", "hedgehog", "cockatiel", "iguana"],
    ),
    (
        "city",
        "My {who} just moved to {value}.",
        "Where did {who} move?",
        ["Valparaiso", "Trondheim", "Ljubljana", "Cusco", "Hobart", "Tbilisi", "Windhoek", "Nagano"],
    ),
    (
        "hobby",
        "My {who} took up {value} this year.",
        "What hobby did {who} take up?",
        ["fencing", "beekeeping", "glassblowing", "bouldering", "calligraphy", "kitesurfing", "falconry"],
    ),
    (
        "car",
        "My {who} bought a {value} last week.",
        "What car did {who} buy?",
        ["Volvo 240", "Citroen DS", "Fiat Panda", "Saab 900", "Lada Niva", "Mini Cooper", "Renault 4"],
    ),
]
_RELATIONS = ["cousin", "neighbour", "aunt", "colleague", "uncle", "roommate", "classmate", "landlord"]
_FILLER = [
    "Work was busy today, lots of meetings.",
    "I made soup for dinner, nothing fancy.",
    "The weather keeps changing every hour.",
    "I finally cleaned the garage this weekend.",
    "Did you watch the game last night?",
    "I am thinking about repainting the kitchen.",
    "The train was late again this morning.",
    "I read a few chapters before bed.",
    "We should plan a picnic when it gets warmer.",
    "My phone battery dies so fast lately.",
    "I tried a new coffee place downtown.",
    "The garden needs watering every day now.",
]
_REPLIES = [
    "That sounds nice.",
    "Oh really? Tell me more.",
    "Ha, same here.",
    "Good to know!",
    "I hope it goes well.",
    "Interesting, thanks for sharing.",
]


def generate(
    *,
    n_turns: int = 400,
    n_facts: int = 12,
    seed: int = 0,
    distractors: bool = True,
    updates: float = 0.25,
    turns_per_session: int = 40,
) -> Conversation:
    """A conversation of `n_turns` turns between "User" and "Friend" with planted facts.

    Args:
        n_turns: Turns in the conversation.
        n_facts: Facts planted, evenly spread; one probe question each.
        seed: Random seed: the same arguments give the same conversation.
        distractors: Add a paraphrase about another person for each fact.
        updates: Share of facts overridden later (the probe asks for the latest value).
        turns_per_session: Turns per session (sessions carry dates).
    """
    if n_facts * 4 > n_turns:
        raise ValueError("`n_turns` must be at least 4 * `n_facts` to spread facts apart.")
    rng = random.Random(seed)
    texts = [rng.choice(_FILLER) if i % 2 == 0 else rng.choice(_REPLIES) for i in range(n_turns)]
    speakers = ["User" if i % 2 == 0 else "Friend" for i in range(n_turns)]
    slot = n_turns // n_facts
    subjects = rng.sample([(p, r) for p in _PEOPLE for r in _RELATIONS], n_facts * 2)
    questions = [_plant(rng, texts, k, subjects, slot, distractors, updates) for k in range(n_facts)]
    turns = _turns(texts, speakers, turns_per_session)
    qs = tuple(Question(q, a, (turns[at].dia_id,), cat) for q, a, at, cat in questions)
    return Conversation(f"synthetic-{seed}", tuple(turns), qs, ("User", "Friend"))


def _plant(
    rng: random.Random,
    texts: list[str],
    k: int,
    subjects: list[tuple[str, str]],
    slot: int,
    distractors: bool,
    updates: float,
) -> tuple[str, str, int, int]:
    """Plant fact `k` in `texts` (in its slot, with its distractor and update): its probe's
    ``(question, answer, answer's turn, category)``."""
    n_turns, n_facts = len(texts), len(subjects) // 2
    name, relation = subjects[k]
    who = f"{relation} {name}"
    _, statement, question, values = _ATTRIBUTES[k % len(_ATTRIBUTES)]
    value, update_value = rng.sample(values, 2)
    at = k * slot + 2 * rng.randrange(max(1, slot // 4))  # even index: the user speaks
    texts[at] = statement.format(who=who, value=value)
    answer, answer_at = value, at
    if distractors:
        other = f"{subjects[n_facts + k][1]} {subjects[n_facts + k][0]}"
        dat = min(n_turns - 2, at + 2 * rng.randrange(1, max(2, slot // 4)))
        if texts[dat] in _FILLER:
            texts[dat] = statement.format(who=other, value=rng.choice([v for v in values if v != value]))
    if rng.random() < updates:
        uat = min(n_turns - 2, at + 2 * (slot // 2))
        if texts[uat] in _FILLER:
            texts[uat] = "Update: " + statement.format(who=who, value=update_value).replace(
                "My ", "actually my ", 1
            )
            answer, answer_at = update_value, uat
    return question.format(who=who), answer, answer_at, 2 if answer_at != at else 4


def _turns(texts: list[str], speakers: list[str], turns_per_session: int) -> list[Turn]:
    """The conversation's turns: `texts` by `speakers`, in dated sessions of `turns_per_session`."""
    turns = []
    for i, text in enumerate(texts):
        session = i // turns_per_session + 1
        turns.append(
            Turn(
                f"D{session}:{i % turns_per_session + 1}",
                speakers[i],
                text,
                session,
                f"{1 + (session - 1) % 28} March 2024",
            )
        )
    return turns
