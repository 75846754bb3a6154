"""Datasets: LoCoMo (official format) and seeded synthetic probes."""

from evals.datasets.records import CATEGORIES, Conversation, Question, Turn

__all__ = ["CATEGORIES", "Conversation", "Question", "Turn"]
