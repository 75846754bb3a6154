"""Dataset records shared by every loader: a conversation of turns, and questions about it."""

from __future__ import annotations

from dataclasses import dataclass, field

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo question categories (the synthetic probes use 4, single-hop, and 2 for updates)."""


@dataclass(frozen=True)
class Turn:
    """One utterance."""

    dia_id: str
    """Turn id, ``D3:5`` (session 3, turn 5)."""
    speaker: str
    """Who speaks."""
    text: str
    """What was said, image captions included as text."""
    session: int
    """Session number, from 1."""
    date: str
    """The session's date and time as the dataset writes it."""


@dataclass(frozen=True)
class Question:
    """A question with the turns that hold its answer."""

    question: str
    """The question text."""
    answer: str
    """Gold answer (adversarial questions: the adversarial answer, never expected)."""
    evidence: tuple[str, ...]
    """``dia_id``s of the evidence turns."""
    category: int
    """Category key of `CATEGORIES`."""


@dataclass(frozen=True)
class Conversation:
    """A conversation with its questions."""

    sample_id: str
    """Dataset sample id."""
    turns: tuple[Turn, ...]
    """All turns, in order."""
    questions: tuple[Question, ...] = field(default=())
    """Questions about the conversation."""
    speakers: tuple[str, ...] = field(default=())
    """The two speakers; the first is replayed as the user."""
