"""A step context built for one phase, and a driver for a phase's requests, for the phase tests
(`tests/step/`): each drives one phase of `langmem_paging.step` through its function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langmem_paging.config import PagingConfig
from langmem_paging.core.effects import run
from langmem_paging.core.records import Page
from langmem_paging.core.tokens import TokenCounter
from langmem_paging.step import Components, step_options
from langmem_paging.step.context import StepContext, start
from langmem_paging.step.io import Flow, LocalIO
from langmem_paging.step.protect import protect
from langmem_paging.step.reconcile import number_new_messages, reconcile
from tests.support.harness import COUNTER


def step_context(
    view: Sequence[BaseMessage],
    *,
    max_tokens: int,
    state: Any = None,
    text_counter: TokenCounter = COUNTER,
    **options: Any,
) -> StepContext:
    """The context a step starts from (`start`: the view repaired and measured, the state copied),
    with the options `page_messages` would resolve from the same arguments."""
    config = PagingConfig(max_tokens=max_tokens, **options)
    step = step_options(config, Components.resolve(config), max_tokens=max_tokens, counter=text_counter)
    return start(view, state, step)


def prepared(
    view: Sequence[BaseMessage], *, max_tokens: int, state: Any = None, **options: Any
) -> StepContext:
    """A context through the phases every later one needs: reconcile, numbering and protect."""
    ctx = step_context(view, max_tokens=max_tokens, state=state, **options)
    reconcile(ctx)
    number_new_messages(ctx)
    protect(ctx)
    return ctx


def drive(flow: Flow[Any], pages: Mapping[str, Page] | None = None) -> Any:
    """Run a phase's requests with no store (numbers from the state, pages from `pages`)."""
    return run(flow, LocalIO(pages))


def long_turns(n: int, start: int = 0, words: int = 30) -> list[BaseMessage]:
    """`n` exchanges whose user messages are `words` words long (pages far bigger than bookmarks),
    ids ``h{i}``/``a{i}`` from `start`."""
    out: list[BaseMessage] = []
    for i in range(start, start + n):
        text = " ".join(f"harbor{i} lantern{i} meadow{(i + k) % 7}" for k in range(words // 3))
        out += [HumanMessage(f"Note {i}: {text}", id=f"h{i}"), AIMessage(f"Noted {i}.", id=f"a{i}")]
    return out
