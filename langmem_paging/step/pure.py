"""The pure paging function: messages and the branch's paging state in, the paged context out.

`page_messages` (and `apage_messages`) run the step (`langmem_paging.step`) with no store of
its own: the caller keeps `result.pages` (and `result.nodes`) to recall them later, and passes
`result.state` to the next call. The middleware and the node run the same step through the
engine (`langmem_paging.runtime.engine`), with a page store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from typing_extensions import Unpack

from langmem_paging.config import PagingConfig, PagingOptions
from langmem_paging.core.effects import arun, run
from langmem_paging.core.messages import require_messages
from langmem_paging.core.records import Page
from langmem_paging.core.tokens import TokenCounter, shared_counter
from langmem_paging.step import Components, PagingResult, StepOptions, paging_step, step_options
from langmem_paging.step.io import LocalIO
from langmem_paging.step.result import PagingValue

__all__ = ["PagingResult", "StepOptions", "apage_messages", "page_messages", "paging_step"]


def _pure_options(max_tokens: int, text_counter: TokenCounter | None, options: dict[str, Any]) -> StepOptions:
    """The step's options for the pure function: the same builder the middleware uses, with no
    system prompt or tools taken from the budget."""
    config = PagingConfig(max_tokens=max_tokens, **options)
    counter = text_counter or shared_counter(config.encoding or "cl100k_base")
    return step_options(config, Components.resolve(config), max_tokens=max_tokens, counter=counter)


def page_messages(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    state: PagingValue = None,
    pages: Mapping[str, Page] | None = None,
    text_counter: TokenCounter | None = None,
    **options: Unpack[PagingOptions],
) -> PagingResult:
    """Page out old messages until the context fits, leaving bookmarks in their place.

    When the messages exceed `max_tokens`, those before the newest user message (and tool
    groups of the current turn older than the latest one) are cut into pages by `boundary`,
    and `policy` evicts pages (or shrinks earlier recall results) until the context is at
    most `low_water_tokens`. When bookmarks pass `bookmark_share` of the budget, the oldest
    fold into cluster bookmarks. Pages, once cut, keep their boundaries, and a page bookmark
    once written never changes. Pass the returned `state` to the next call; store
    `result.pages` (and `result.nodes`) if you want to recall them.

    Args:
        messages: The context (the state's messages), each with an id.
        max_tokens: Budget for everything the model receives from the list.
        state: The previous call's `result.state` (None for a new thread).
        pages: Pages stored by earlier calls, by id (tiers may show an older page's digest).
        text_counter: tiktoken counter for bookmark lengths (default cl100k, or `encoding`).
        **options: `PagingConfig` options (`PagingConfig.fields()` documents each): `boundary`,
            `policy`, `low_water_tokens`, `token_counter`, `bookmark_share`, `tiers`, ...

    Returns:
        A `PagingResult`.

    Raises:
        ValueError: If an option is invalid (the message names it).
        TypeError: If `messages` is not a list of LangChain messages (a string, tuples, dicts).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = []
        >>> for i in range(6):
        ...     history += [HumanMessage(f"Trip {i} to city{i}?", id=f"h{i}"),
        ...                 AIMessage(f"Booked city{i}.", id=f"a{i}")]
        >>> result = page_messages(history, max_tokens=8, low_water_tokens=6,
        ...                        boundary="fixed_2", token_counter=len, bookmark_share=1.0)
        >>> [m.content for m in result.view]
        ['[p1:city0 Booked Trip]', '[p2:city1 Booked Trip]', '[p3:city2 Booked Trip]', '[p4:city3 Booked Trip]', '[p5:city4 Booked Trip]', 'Trip 5 to city5?', 'Booked city5.']
        >>> [p.id for p in result.pages], result.tokens
        (['p1', 'p2', 'p3', 'p4', 'p5'], 7)

        Once bookmarks pass `bookmark_share` of the budget, the oldest fold into a cluster:

        >>> result = page_messages(history, max_tokens=8, low_water_tokens=6,
        ...                        boundary="fixed_2", token_counter=len, bookmark_share=0.4)
        >>> [m.content for m in result.view]
        ['[c8:city0,city1,city4,Booked,Trip|3 of p1-p5]', '[c6:city2,city3,Booked,Trip|p3-p4]', 'Trip 5 to city5?', 'Booked city5.']
    """
    require_messages(messages)
    step = _pure_options(max_tokens, text_counter, dict(options))
    return run(paging_step(messages, state, step), LocalIO(pages))


async def apage_messages(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    state: PagingValue = None,
    pages: Mapping[str, Page] | None = None,
    text_counter: TokenCounter | None = None,
    **options: Unpack[PagingOptions],
) -> PagingResult:
    """Async `page_messages` (same options): awaits async bookmarkers and policies."""
    require_messages(messages)
    step = _pure_options(max_tokens, text_counter, dict(options))
    return await arun(paging_step(messages, state, step), LocalIO(pages))
