"""LLM judge: is a generated answer correct against the gold answer? (1.0, 0.0, or None)

One chat-completions call per answer through the `openai` client, at temperature 0.
The judge is lenient on wording and strict on facts, as LLM-as-judge scoring on LoCoMo
usually is: the same fact in other words, or a date in another format, is correct.
"""

from __future__ import annotations

import re

import openai

__all__ = ["JUDGE_PROMPT", "LLMJudge", "parse_verdict"]

JUDGE_PROMPT = """You grade answers to questions about a conversation.
Question: {question}
Gold answer: {gold}
Generated answer: {answer}

The generated answer is CORRECT if it states the same fact as the gold answer, even in other
words, in another date format, or with extra detail that does not contradict it. It is WRONG if it
misses the fact, contradicts it, or only says the information is unavailable.
Reply with one word: CORRECT or WRONG."""

_VERDICT = re.compile(r"\b(CORRECT|WRONG)\b")


def parse_verdict(text: str | None) -> float | None:
    """1.0 for CORRECT, 0.0 for WRONG (the first of the two words in the reply), else None."""
    match = _VERDICT.search(str(text or "").upper())
    return None if match is None else float(match.group(1) == "CORRECT")


class LLMJudge:
    """Scores answers with a chat model behind an `openai.OpenAI` client.

    Args:
        client: An `openai.OpenAI` client (the answering model's, so both use one endpoint).
        model: The judge model's name.
    """

    def __init__(self, client, model: str) -> None:
        self.client = client
        self.model = model

    def __call__(self, question: str, gold: str, answer: str | None) -> float | None:
        """The verdict on one answer; None when there is no answer or the reply has no verdict."""
        if not answer:
            return None
        prompt = JUDGE_PROMPT.format(question=question, gold=gold, answer=answer)
        try:
            reply = self.client.chat.completions.create(
                model=self.model, temperature=0, messages=[{"role": "user", "content": prompt}]
            )
        except openai.BadRequestError:  # a refused request is no verdict; other errors stop the run
            return None
        return parse_verdict(reply.choices[0].message.content)
