"""Needle-density conversations: one atomic, verifiable needle in each of 20 equal segments.

A needle is a fact stated in one turn, with a question whose answer is the fact's value.
Spreading them uniformly (one per segment) lets a benchmark ask what share of needles a
paged context retains at each compression level, and where in the conversation the lost
ones were (`Needle.segment`).

- `generate_needles`: seeded filler dialogue (the synthetic probes' filler) and one needle
  per segment, about a distinct person so every question has one answer.
- `locomo_needles`: from a LoCoMo conversation, one question per segment whose evidence lies
  wholly in that segment (categories 1-4); segments without such a question stay empty and
  are counted (`NeedleConversation.covered`).

Example:
    >>> item = generate_needles(n_turns=200, seed=1)
    >>> item.covered, len(item.conversation.questions)
    (20, 20)
    >>> [n.segment for n in item.needles][:5]
    [0, 1, 2, 3, 4]
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evals.datasets.records import Conversation, Question, Turn
from evals.datasets.synthetic import _ATTRIBUTES, _FILLER, _PEOPLE, _RELATIONS, _REPLIES

N_SEGMENTS = 20

_NEEDLE_ATTRIBUTES = [
    *((stmt, question, values) for _, stmt, question, values in _ATTRIBUTES),
    (
        "My {who}'s locker code is {value}.",
        "What is {who}'s locker code?",
        [f"{n:04d}" for n in (4817, 2093, 7351, 6624, 1180, 9047, 3512, 5868)],
    ),
]


@dataclass(frozen=True)
class Needle:
    """One needle: a question whose evidence lies in one segment."""

    segment: int
    """Segment number, 0-based, in conversation order."""
    question_index: int
    """Index of its question in the conversation's `questions`."""


@dataclass(frozen=True)
class NeedleConversation:
    """A conversation with at most one needle per segment."""

    conversation: Conversation
    """The conversation (its `questions` include every needle's question)."""
    needles: tuple[Needle, ...]
    """The needles, by segment."""
    n_segments: int = N_SEGMENTS
    """How many equal segments the turns are cut into."""

    @property
    def covered(self) -> int:
        """Segments that have a needle."""
        return len({n.segment for n in self.needles})


def segment_of(index: int, n_turns: int, n_segments: int = N_SEGMENTS) -> int:
    """The segment of turn `index` when `n_turns` turns are cut into `n_segments` equal parts.

    Example:
        >>> [segment_of(i, 40, 4) for i in (0, 9, 10, 39)]
        [0, 0, 1, 3]
    """
    return index * n_segments // n_turns


def segment_bounds(n_turns: int, n_segments: int = N_SEGMENTS) -> list[tuple[int, int]]:
    """``(first, last + 1)`` turn indices of each segment."""
    starts = [-(-k * n_turns // n_segments) for k in range(n_segments + 1)]
    return [(starts[k], starts[k + 1]) for k in range(n_segments)]


def generate_needles(
    *, n_turns: int = 400, seed: int = 0, n_segments: int = N_SEGMENTS, turns_per_session: int = 40
) -> NeedleConversation:
    """A seeded conversation of `n_turns` turns with exactly one needle per segment.

    Args:
        n_turns: Turns in the conversation (at least 4 per segment).
        seed: Random seed: the same arguments give the same conversation.
        n_segments: Equal segments, one needle each.
        turns_per_session: Turns per session (sessions carry dates).

    Raises:
        ValueError: If the segments are shorter than 4 turns.
    """
    if n_turns < 4 * n_segments:
        raise ValueError("`n_turns` must be at least 4 * `n_segments`.")
    rng = random.Random(seed)
    texts = [rng.choice(_FILLER) if i % 2 == 0 else rng.choice(_REPLIES) for i in range(n_turns)]
    subjects = rng.sample([(p, r) for p in _PEOPLE for r in _RELATIONS], n_segments)
    questions, needles = [], []
    for k, (first, stop) in enumerate(segment_bounds(n_turns, n_segments)):
        user_turns = [i for i in range(first, stop) if i % 2 == 0]  # the user states the needle
        at = rng.choice(user_turns)
        name, relation = subjects[k]
        statement, question, values = _NEEDLE_ATTRIBUTES[k % len(_NEEDLE_ATTRIBUTES)]
        value = rng.choice(values)
        who = f"{relation} {name}"
        texts[at] = statement.format(who=who, value=value)
        questions.append((question.format(who=who), value, at))
        needles.append(Needle(k, k))
    turns = tuple(
        Turn(
            f"D{i // turns_per_session + 1}:{i % turns_per_session + 1}",
            "User" if i % 2 == 0 else "Friend",
            text,
            i // turns_per_session + 1,
            f"{1 + (i // turns_per_session) % 28} March 2024",
        )
        for i, text in enumerate(texts)
    )
    qs = tuple(Question(q, a, (turns[at].dia_id,), 4) for q, a, at in questions)
    return NeedleConversation(
        Conversation(f"needles-{seed}", turns, qs, ("User", "Friend")), tuple(needles), n_segments
    )


def locomo_needles(conversation: Conversation, n_segments: int = N_SEGMENTS) -> NeedleConversation:
    """One question per segment whose evidence lies wholly in it (categories 1-4).

    Within a segment the needle is the question with the fewest evidence turns (the most
    atomic), then single-hop before the other categories, then the earliest asked.
    """
    index = {t.dia_id: i for i, t in enumerate(conversation.turns)}
    n = len(conversation.turns)
    best: dict[int, tuple[tuple, int]] = {}
    for qi, q in enumerate(conversation.questions):
        if q.category == 5 or not q.evidence or any(e not in index for e in q.evidence):
            continue
        segments = {segment_of(index[e], n, n_segments) for e in q.evidence}
        if len(segments) != 1:
            continue
        segment = segments.pop()
        rank = (len(q.evidence), q.category != 4, qi)
        if segment not in best or rank < best[segment][0]:
            best[segment] = (rank, qi)
    needles = tuple(Needle(s, best[s][1]) for s in sorted(best))
    return NeedleConversation(conversation, needles, n_segments)
