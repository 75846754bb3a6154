"""`PagingThread`: drive a thread the way an agent does, without a graph or a model.

Each model call pages the thread's messages (replace or view mode, through the same engine the
middleware runs, over a real `BaseStore`), applies the result as a graph applies it
(`add_messages` and `paging_reducer`), and records what the model would have received; a recall
goes through the real `recall` tool, with a `ToolRuntime` holding the thread's state, and its
`Command` is applied through the same reducers. The budget counts the system prompt and the
tool schemas (the recall tool's included), as the middleware counts them.

Example:
    >>> thread = PagingThread(max_tokens=356, boundary="fixed_2")
    >>> cities = ["Lisbon", "Kyoto", "Quito", "Oslo", "Rome", "Lima", "Accra", "Hanoi", "Tromso", "Cusco",
    ...           "Perth", "Dakar", "Riga", "Porto", "Seoul", "Cairo", "Delhi", "Bern", "Nice", "Baku"]
    >>> for city in cities:
    ...     _ = thread.turn(f"I will fly to {city} on Friday.", "Noted.")
    >>> [m.content for m in thread.prompt][:2]
    ['[c24:Accra,Kyoto,Lisbon,Perth,Riga,Rome|7 of p1-p13]', '[c26:Cusco,Dakar,Hanoi,Lima,Oslo,Porto|7 of p3-p14]']
    >>> print(thread.call_recall(query="Kyoto").content)
    === p2 ===
    user: I will fly to Kyoto on Friday.
    assistant: Noted.
    === p1 ===
    user: I will fly to Lisbon on Friday.
    assistant: Noted.
    === p3 ===
    user: I will fly to Quito on Friday.
    >>> thread.step().over_budget, thread.tokens <= 356
    (False, True)
    >>> [m.content for m in thread.history()][:2]
    ['I will fly to Lisbon on Friday.', 'Noted.']
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from typing_extensions import Unpack

from langmem_paging.config import PagingConfig, PagingOptions
from langmem_paging.core.messages import merge_messages
from langmem_paging.core.state import STATE_KEY, PagingState, paging_reducer
from langmem_paging.index.base import SearchIndex
from langmem_paging.integrations.graph_state import GraphCall
from langmem_paging.integrations.graph_step import GraphStep
from langmem_paging.recall.history import reconstruct_history
from langmem_paging.runtime.engine import OnStoreError
from langmem_paging.step import PagingResult
from langmem_paging.storage.page_store import PageStore

__all__ = ["PagingThread"]


class PagingThread:
    """One thread, stepped and recalled as `create_agent` with `PagingMiddleware` would.

    Args:
        config: A `PagingConfig`; or its options as keywords (``max_tokens=...``).
        store: The graph's store (default a new `InMemoryStore`).
        thread_id: The thread id.
        system: A system prompt the model receives first (counted against the budget).
        tools: The agent's other tools (their schemas count against the budget).
        chat_model: The model called (chooses the encoding, and a fractional budget's window).
        index: The search index (default: the store's default index).
        on_store_error: As in `PagingMiddleware`.
    """

    def __init__(
        self,
        config: PagingConfig | None = None,
        *,
        store: BaseStore | None = None,
        thread_id: str = "thread",
        system: str | SystemMessage | None = None,
        tools: Sequence[BaseTool] = (),
        chat_model: Any = None,
        index: SearchIndex | None = None,
        on_store_error: OnStoreError = "raise",
        **options: Unpack[PagingOptions],
    ) -> None:
        self._graph = GraphStep(config, None, options, index=index, on_store_error=on_store_error)
        self.config = self._graph.config
        self.store = store if store is not None else InMemoryStore()
        self.thread_id = thread_id
        self.system = SystemMessage(system) if isinstance(system, str) else system
        self.model = chat_model
        self.pager = self._graph.pager
        self.recall_tool = self._graph.recall_tool
        self._call_numbers = itertools.count(1)
        self.tools: list[BaseTool] = [self.recall_tool, *tools]
        self.messages: list[BaseMessage] = []
        """The graph state's messages."""
        self.paging: dict[str, Any] = {}
        """The graph state's paging channel."""
        self.results: list[PagingResult] = []
        """Every step's result, in order."""
        self.prompt: list[BaseMessage] = []
        """What the model received at the last step (the system prompt first, if any)."""

    # -- state ------------------------------------------------------------------------------
    @property
    def page_store(self) -> PageStore:
        """The pages of this thread's store."""
        return self.pager.page_store_for(self.store)

    @property
    def state(self) -> PagingState:
        """The paging state, parsed."""
        return PagingState.from_value(self.paging)

    @property
    def overhead(self) -> int:
        """Tokens the system prompt and the tool schemas take from the budget."""
        counter = self.pager.counter_for(self.model)
        return (counter.count_message(self.system) if self.system else 0) + counter.count_tools(self.tools)

    @property
    def tokens(self) -> int:
        """Tokens of the last prompt, the system prompt and tool schemas included."""
        counter = self.pager.counter_for(self.model)
        return counter(self.prompt) + counter.count_tools(self.tools)

    def add(self, *messages: BaseMessage | str) -> None:
        """Append messages (a string is a user message), as a graph merges a node's output."""
        self.messages = merge_messages(
            self.messages, [HumanMessage(m) if isinstance(m, str) else m for m in messages]
        )

    def apply(self, update: dict[str, Any]) -> None:
        """Merge a graph update (``messages`` and ``paging``) through the graph's own reducers."""
        if "messages" in update:
            self.messages = merge_messages(self.messages, update["messages"])
        if STATE_KEY in update:
            self.paging = paging_reducer(self.paging, update[STATE_KEY])

    # -- model calls ---------------------------------------------------------------------------
    def step(self) -> PagingResult:
        """The paging of one model call: the thread pages, and `prompt` is what the model receives."""
        call = self._graph.prepare(self.messages, self.paging, self.thread_id)
        return self._record(self._graph.pager.step(**call.step_input(), **self._resources()), call)

    async def astep(self) -> PagingResult:
        """Async `step`."""
        call = self._graph.prepare(self.messages, self.paging, self.thread_id)
        result = await self._graph.pager.astep(**call.step_input(), **self._resources())
        return self._record(result, call)

    def _resources(self) -> dict[str, Any]:
        return {"store": self.store, "overhead": self.overhead, "model": self.model}

    def _record(self, result: PagingResult, call: GraphCall) -> PagingResult:
        self.apply(call.update(result))
        self.prompt = [*([self.system] if self.system else []), *result.view]
        self.results.append(result)
        return result

    def turn(self, user: BaseMessage | str, reply: BaseMessage | str | None = None) -> PagingResult:
        """A user turn: the user's message, the model call's paging, and the model's reply."""
        self.add(user)
        result = self.step()
        if reply is not None:
            self.add(AIMessage(reply) if isinstance(reply, str) else reply)
        return result

    # -- recall ----------------------------------------------------------------------------------
    def call_recall(
        self, *, page_ids: Any = None, query: Any = None, part: Any = None, call_id: str | None = None
    ) -> ToolMessage:
        """The model calls `recall`: its call is appended, the real tool runs on the thread's state,
        and its result and paging update are applied. Returns the tool's message."""
        runtime, call = self._call(page_ids, query, part, call_id)
        return self._result(self.recall_tool.invoke(call), runtime)

    async def acall_recall(
        self, *, page_ids: Any = None, query: Any = None, part: Any = None, call_id: str | None = None
    ) -> ToolMessage:
        """Async `call_recall`."""
        runtime, call = self._call(page_ids, query, part, call_id)
        return self._result(await self.recall_tool.ainvoke(call), runtime)

    def _call(
        self, page_ids: Any, query: Any, part: Any, call_id: str | None
    ) -> tuple[ToolRuntime, dict[str, Any]]:
        args = {k: v for k, v in (("page_ids", page_ids), ("query", query), ("part", part)) if v is not None}
        # numbered, not random: a random id tokenizes to a varying length, and so would the room
        call_id = call_id or f"call-{next(self._call_numbers)}"
        self.add(AIMessage("", tool_calls=[{"name": self.recall_tool.name, "args": args, "id": call_id}]))
        runtime = ToolRuntime(
            state={"messages": list(self.messages), STATE_KEY: self.paging},
            context=None,
            config={"configurable": {"thread_id": self.thread_id}},
            stream_writer=lambda _: None,
            tool_call_id=call_id,
            store=self.store,
        )
        return runtime, {
            "type": "tool_call",
            "name": self.recall_tool.name,
            "id": call_id,
            "args": {**args, "runtime": runtime},
        }

    def _result(self, output: Any, runtime: ToolRuntime) -> ToolMessage:
        if isinstance(output, Command):
            self.apply(dict(output.update or {}))
        else:
            self.add(ToolMessage(str(output), tool_call_id=runtime.tool_call_id or ""))
        return next(m for m in reversed(self.messages) if isinstance(m, ToolMessage))

    # -- checks ----------------------------------------------------------------------------------
    def history(self) -> list[BaseMessage]:
        """The thread's whole history, rebuilt from its state and its stored pages."""
        page_store = self.page_store
        return reconstruct_history(
            self.messages,
            lambda p: page_store.get(self.thread_id, p),
            clusters=lambda c: page_store.get_cluster(self.thread_id, c),
            state=self.paging,
        )
