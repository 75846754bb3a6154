"""The budget a thread's next model call gets, corrected by what the provider said about the last ones.

The budget is counted with an estimate (tiktoken, or the counter given). Two signals correct it,
both kept per thread in the graph state (``paging_calibration``, two floats), so forks and time
travel keep their own corrections:

- ``ratio``: the provider's input-token count (``usage_metadata["input_tokens"]``) over the estimate
  of the same prompt, learnt when ``calibrate=True``. The next budget is divided by it.
- ``scale``: what context-length errors left of the budget. The safety net pages to 80% of the
  least of the budget, the prompt the provider refused and the limit its error states (OpenAI's
  "maximum context length is N tokens"), and retries once; the next turns keep the smaller budget.
  With ``max_tokens`` above the model's window, 80% of the budget would page nothing and send the
  refused prompt again.

Example:
    >>> c = Calibration().observed(estimate=1000, provider=1300)
    >>> c.ratio, c.budget(4000)
    (1.3, 3076)
    >>> c.shrunk(4000).budget(4000)
    2461
    >>> Calibration().shrunk(100_000, refused=10_000).budget(100_000)  # 80% of what was refused
    8000
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.exceptions import ContextOverflowError

__all__ = ["CALIBRATION_KEY", "Calibration", "is_context_overflow", "provider_input_tokens", "stated_limit"]

CALIBRATION_KEY = "paging_calibration"
"""The state key of a thread's `Calibration`."""
RATIO_BOUNDS = (0.5, 2.0)
"""A ratio outside these is a counting bug or a provider quirk, not a tokenizer difference: clamped."""
SHRINK = 0.8
"""What a context-length error leaves of the budget that overflowed."""
MIN_SCALE = 0.2
"""Repeated overflows never shrink the budget below this share of `max_tokens` by 80% steps alone
(what the provider refused, or the limit it states, may take it lower)."""
SMOOTHING = 0.5
"""Weight of a new observation in the ratio (one odd response moves it half way)."""


@dataclass(frozen=True)
class Calibration:
    """A thread's corrections to its configured budget."""

    ratio: float = 1.0
    """Provider input tokens per estimated token (1.0: not calibrated)."""
    scale: float = 1.0
    """Share of the budget left by context-length errors (`shrunk`)."""

    @classmethod
    def from_value(cls, value: Any) -> Calibration:
        """From the state value (None, or a dict written by `to_value`)."""
        if not isinstance(value, dict):
            return cls()
        return cls(ratio=float(value.get("ratio", 1.0)), scale=float(value.get("scale", 1.0)))

    def to_value(self) -> dict[str, float]:
        """The state value."""
        return {"ratio": self.ratio, "scale": self.scale}

    def budget(self, max_tokens: int) -> int:
        """This call's budget in estimated tokens."""
        return max(1, int(max_tokens * self.scale / self.ratio))

    def observed(self, *, estimate: int, provider: int) -> Calibration:
        """After a response: the provider counted `provider` input tokens where we estimated `estimate`."""
        if estimate <= 0 or provider <= 0:
            return self
        seen = min(max(provider / estimate, RATIO_BOUNDS[0]), RATIO_BOUNDS[1])
        ratio = seen if self.ratio == 1.0 else self.ratio + SMOOTHING * (seen - self.ratio)
        return replace(self, ratio=round(ratio, 4))

    def shrunk(self, max_tokens: int, *, refused: int = 0, limit: int | None = None) -> Calibration:
        """After a context-length error on a prompt of `refused` estimated tokens, `max_tokens`
        configured: `SHRINK` of the least of the budget (not under `MIN_SCALE` by this alone), the
        refused prompt in the provider's tokens and the provider's stated `limit`."""
        sizes = [n for n in (refused * self.ratio, limit) if n]
        scale = min([max(MIN_SCALE, self.scale * SHRINK), *(SHRINK * n / max_tokens for n in sizes)])
        return replace(self, scale=max(round(scale, 6), 1e-6))


_OVERFLOW_TEXTS = (
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "input tokens exceed the configured limit",
    "contextwindowexceedederror",
    "exceeds the context window",
    "input is too long for requested model",
)


def is_context_overflow(error: BaseException) -> bool:
    """A provider's "the prompt is longer than the context window" error: LangChain's
    `ContextOverflowError`, OpenAI's ``context_length_exceeded`` code, Anthropic's "prompt is too long"
    (and the same words from gateways such as LiteLLM or Bedrock)."""
    if isinstance(error, ContextOverflowError):
        return True
    if getattr(error, "code", None) == "context_length_exceeded":
        return True
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        detail = body.get("error", body)
        if isinstance(detail, dict) and detail.get("code") == "context_length_exceeded":
            return True
    status = getattr(error, "status_code", None)
    if status is not None and status not in (400, 413):
        return False
    text = str(error).lower()
    return any(t in text for t in _OVERFLOW_TEXTS)


_STATED_LIMITS = (
    re.compile(r"maximum context length is (\d[\d,]*) tokens"),
    re.compile(r"tokens? > (\d[\d,]*) maximum"),
)
"""The window in a context-length error: OpenAI's "maximum context length is 128000 tokens" (and
gateways repeating it), Anthropic's "prompt is too long: 208010 tokens > 200000 maximum"."""


def stated_limit(error: BaseException) -> int | None:
    """The context window a provider's context-length error states, in its tokens, or None.

    Example:
        >>> stated_limit(ValueError("This model's maximum context length is 8,192 tokens. However, ..."))
        8192
    """
    text = str(error)
    for pattern in _STATED_LIMITS:
        match = pattern.search(text)
        if match:
            return int(match.group(1).replace(",", ""))
    return None


def provider_input_tokens(message: Any) -> int | None:
    """The input tokens a provider reports for the call that produced `message` (LangChain's
    ``usage_metadata``: cached and uncached input together), or None."""
    usage = getattr(message, "usage_metadata", None)
    if not usage:
        return None
    value = usage.get("input_tokens")
    return int(value) if isinstance(value, int) and value > 0 else None
