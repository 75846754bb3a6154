"""The `paging` method: replay a conversation through cooperative paging, then let a reader
recall pages for each question; everything within the budget B.

The replay is the library's own `Pager` (the code `PagingMiddleware` runs), replace mode,
stepped before every user turn, over an in-memory page store. For a question, the reader
sees the paged view (resident messages, page and cluster bookmarks), picks pages, and the
library's `recall` renders them into a ToolMessage; one more paging step then makes room,
as the next model call would. With the llm reader (`ask_llm`), the same thread state and
pages go to a real agent, `create_agent` + `PagingMiddleware`, and the model decides itself
what to recall.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from evals.methods import COUNTER, Context, cap_to_budget
from evals.readers.lexical import rank_bookmarks, visible_bookmarks
from langmem_paging import Page, PagingConfig, PagingMiddleware, PageStore, is_bookmark
from langmem_paging.messages import METADATA_KEY
from langmem_paging.pager import Pager, plan_recall
from langmem_paging.recall_text import render_message
from langmem_paging.state import STATE_KEY, paging_reducer, recall_delta

MAX_RECALLED_PAGES = 3
THREAD = "replay"


@dataclass
class PagingSession:
    """One thread being replayed: its messages, its paging state and its page store."""

    budget: int
    boundary: str
    policy: str
    state: list[BaseMessage] = field(default_factory=list)
    paging: dict = field(default_factory=dict)
    store: InMemoryStore = field(default_factory=InMemoryStore)

    def __post_init__(self) -> None:
        self.config = PagingConfig(max_tokens=self.budget, boundary=self.boundary, policy=self.policy)
        self.pager = Pager(self.config, PageStore(self.store))

    @property
    def recall_cap(self) -> int:
        """The recall tool's size cap for this budget (as the library sets it)."""
        return self.config.recall_cap_for(self.budget)

    @property
    def pages(self) -> dict[str, Page]:
        """Every stored page of the thread, by id."""
        return {p.id: p for p in self.pager.page_store.list(THREAD)}

    def step(self, messages: Sequence[BaseMessage], paging: dict):
        """One paging step on `messages` (what the middleware does before a model call)."""
        return self.pager.step(list(messages), paging, THREAD, model=None)

    def add(self, message: BaseMessage) -> None:
        """Append one turn; page before each user turn, as an agent's model call would."""
        self.state.append(message)
        if isinstance(message, HumanMessage):
            result = self.step(self.state, self.paging)
            self.state = add_messages(self.state, result.updates) if result.updates else self.state
            self.paging = result.state.to_value()

    def _candidates(self, question: str, seen: list[BaseMessage]) -> list[str]:
        """Page ids by the reader's ranking of the bookmarks it sees: a cluster bookmark that
        ranks stands for its member pages, ranked by their own bookmarks (what a model would
        get by recalling the cluster id)."""
        ranked: list[str] = []
        for ident in rank_bookmarks(question, visible_bookmarks(seen)):
            if ident.startswith("p"):
                ranked.append(ident)
                continue
            members = self.pager.page_store.members(THREAD, ident, limit=200)
            pages = self.pager.page_store.get_many(THREAD, members)
            member_marks = [(pid, pages[pid].keywords) for pid in members if pid in pages]
            ranked += [pid for pid in rank_bookmarks(question, member_marks) if pid not in ranked]
        return ranked

    def ask(self, question: str, *, persist: bool = False) -> Context:
        """Context for a question after the lexical reader's recall; `persist` keeps the exchange."""
        q = HumanMessage(question, id=f"q-{uuid.uuid4().hex[:12]}")
        first = self.step([*self.state, q], self.paging)
        view = first.view
        paging = first.state.to_value()
        # what fits in B is all the reader sees (the view exceeds B only when protected text does)
        seen, over_before = cap_to_budget(view, self.budget, keep_from=len(view) - 1)
        ranked = self._candidates(question, seen)
        pages = self.pager.page_store.get_many(THREAD, ranked[:MAX_RECALLED_PAGES])
        chosen: list[str] = []
        for page_id in ranked[:MAX_RECALLED_PAGES]:
            if page_id not in pages:
                continue
            tokens = sum(pages[p].token_count for p in [*chosen, page_id])
            if tokens > self.recall_cap:
                break
            chosen.append(page_id)
        resident_before = {m.id for m in seen if not is_bookmark(m)}
        recalled: list[Page] = []
        if chosen:
            answer = self.pager.recall(THREAD, paging, page_ids=chosen)
            call_id = f"call-{uuid.uuid4().hex[:8]}"
            call = AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": chosen}, "id": call_id}],
                             id=f"a-{call_id}")
            result = ToolMessage(answer.content, tool_call_id=call_id, name="recall", id=f"t-{call_id}",
                                 artifact=answer.artifact)
            paging = paging_reducer(paging, recall_delta(answer.accessed, turn=answer.turn, results=[result.id]))
            second = self.step([*view, call, result], paging)
            view, paging = second.view, second.state.to_value()
            recalled = [pages[p] for p in chosen]
        question_at = next(i for i, m in enumerate(view) if m.id == q.id)
        context_messages, over = cap_to_budget(view, self.budget, keep_from=question_at)
        all_ranked = self.pager.page_store.get_many(THREAD, ranked)
        context = _paged_context(context_messages, recalled, ranked_pages=[all_ranked[p] for p in ranked
                                                                           if p in all_ranked],
                                 resident_before=resident_before, over_budget=over or over_before)
        if persist:
            self.state = [*view, AIMessage("(answered)", id=f"ans-{q.id}")]
            self.paging = paging
        return context

    def ask_llm(self, question: str, reader, *, persist: bool = False):
        """`(Context, Answer)` from a real agent: `create_agent` + `PagingMiddleware` over this
        thread's pages and paging state, the model deciding what to recall
        (`evals.readers.llm.LLMReader`). Without `persist` the session is left as it was, so
        questions can be asked concurrently."""
        from evals.readers.llm import PAGING_HINT

        paging = PagingMiddleware(config=self.config, store=self.store)
        q = HumanMessage(question, id=f"q-{uuid.uuid4().hex[:12]}")
        answer = reader.run_agent([*self.state, q], middleware=[paging], store=self.store, hint=PAGING_HINT,
                                  thread_id=THREAD, state={STATE_KEY: self.paging})
        first, final = (answer.prompts[0], answer.final_prompt) if answer.prompts else ([], [])
        recalled_ids = recalled_in_order(answer)
        pages = self.pager.page_store.get_many(THREAD, recalled_ids)
        recalled = [pages[pid] for pid in recalled_ids if pid in pages]
        context = _paged_context(final, recalled, ranked_pages=recalled,
                                 resident_before={m.id for m in first if not is_bookmark(m)},
                                 over_budget=COUNTER(final) > self.budget)
        if persist and answer.state:
            self.state = list(answer.state)
            self.paging = answer.paging if answer.paging is not None else self.paging
        return context, answer


def _paged_context(messages: list[BaseMessage], recalled: list[Page], *, ranked_pages: list[Page],
                   resident_before: set[str], over_budget: bool) -> Context:
    """The measured context: resident turns, plus the turns of `recalled` pages whose text is in
    a recall result among `messages` (a result cut off by the budget shows nothing)."""
    results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
    shown = {m.id for page in recalled for m in page.messages if any(render_message(m) in r for r in results)}
    return Context(
        messages=messages,
        present={m.id for m in messages if not is_bookmark(m) and not isinstance(m, ToolMessage)} | shown,
        bookmark_tokens=sum(COUNTER.count_message(m) for m in messages if is_bookmark(m)),
        ranked_pages=[[m.id for m in page.messages] for page in ranked_pages],
        recalled=[page.id for page in recalled],
        resident_before=resident_before,
        over_budget=over_budget,
    )


def recalled_in_order(answer) -> list[str]:
    """Page ids the model's recall calls brought back, in the order it asked for them
    (within one call: the ids it named first, then pages its query found)."""
    calls = {c["id"]: c["args"] for c in answer.tool_calls if c["name"] == "recall"}
    order: list[str] = []
    for result in answer.tool_results:
        if result.tool_call_id not in calls:
            continue
        returned = ((result.artifact or {}).get(METADATA_KEY) or {}).get("recalled", [])
        args = calls[result.tool_call_id]
        asked = plan_recall(args.get("page_ids"), args.get("query")).page_ids
        for pid in [*[p for p in asked if p in returned], *returned]:
            if pid not in order:
                order.append(pid)
    return order
