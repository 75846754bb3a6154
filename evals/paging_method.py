"""The `paging` method: replay a conversation through cooperative paging, then let a reader
recall pages for each question; everything within the budget B.

The replay is the library's own pure step (`page_messages`, replace mode), taken before
every user turn as `PagingMiddleware` does. For a question, the reader sees the paged
view (resident messages and bookmarks), picks pages, and the recall result arrives as a
ToolMessage; one more paging step then makes room for it, as the next model call would.
With the llm reader (`ask_llm`), the same thread state and pages go to a real agent,
`create_agent` + `PagingMiddleware`, and the model decides itself what to recall.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from evals.methods import COUNTER, Context, cap_to_budget
from evals.readers.lexical import rank_bookmarks, visible_bookmarks
from langmem_paging import Ledger, Page, PagingMiddleware, is_bookmark, page_messages
from langmem_paging.messages import METADATA_KEY
from langmem_paging.pager import plan_recall
from langmem_paging.recall_text import recall_artifact, render_message, render_pages

MAX_RECALLED_PAGES = 3


@dataclass
class PagingSession:
    """One thread being replayed: its state, ledger and stored pages."""

    budget: int
    boundary: str
    policy: str
    state: list[BaseMessage] = field(default_factory=list)
    ledger: Ledger | None = None
    pages: dict[str, Page] = field(default_factory=dict)

    @property
    def recall_cap(self) -> int:
        """The recall tool's default size cap for this budget (as `PagingConfig`)."""
        return max(256, self.budget // 3)

    def step(self, messages: Sequence[BaseMessage], ledger: Ledger | None):
        result = page_messages(messages, max_tokens=self.budget, ledger=ledger, boundary=self.boundary,
                               policy=self.policy, text_counter=COUNTER)
        for page in result.pages:
            self.pages[page.id] = page
        return result

    def add(self, message: BaseMessage) -> None:
        """Append one turn; page before each user turn, as an agent's model call would."""
        self.state.append(message)
        if isinstance(message, HumanMessage):
            result = self.step(self.state, self.ledger)
            self.state, self.ledger = result.view, result.ledger

    def ask(self, question: str, *, persist: bool = False) -> Context:
        """Context for a question after the lexical reader's recall; `persist` keeps the exchange."""
        q = HumanMessage(question, id=f"q-{uuid.uuid4().hex[:12]}")
        first = self.step([*self.state, q], self.ledger)
        view, ledger = first.view, first.ledger
        # what fits in B is all the reader sees (the view exceeds B only when bookmarks alone do)
        seen, over_before = cap_to_budget(view, self.budget, keep_from=len(view) - 1)
        ranked = rank_bookmarks(question, visible_bookmarks(seen))
        chosen: list[Page] = []
        for page_id in ranked[:MAX_RECALLED_PAGES]:
            text = render_pages([*chosen, self.pages[page_id]], max_tokens=10**9, counter=COUNTER)
            if COUNTER.count_text(text) > self.recall_cap:
                break
            chosen.append(self.pages[page_id])
        resident_before = {m.id for m in seen if not is_bookmark(m)}
        if chosen:
            ids = sorted((p.id for p in chosen), key=lambda pid: int(pid[1:]))
            ordered = [self.pages[pid] for pid in ids]
            content = render_pages(ordered, max_tokens=self.recall_cap, counter=COUNTER)
            call_id = f"call-{uuid.uuid4().hex[:8]}"
            call = AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ids}, "id": call_id}],
                             id=f"a-{call_id}")
            result = ToolMessage(content, tool_call_id=call_id, name="recall", id=f"t-{call_id}",
                                 artifact=recall_artifact(ids, max_tokens=self.recall_cap, note=""))
            ledger.record_access(ids)
            second = self.step([*view, call, result], ledger)
            view, ledger = second.view, second.ledger
        question_at = next(i for i, m in enumerate(view) if m.id == q.id)
        context_messages, over = cap_to_budget(view, self.budget, keep_from=question_at)
        context = _paged_context(context_messages, chosen, ranked_pages=[self.pages[pid] for pid in ranked],
                                 resident_before=resident_before, over_budget=over or over_before)
        if persist:
            self.state = [*view, AIMessage("(answered)", id=f"ans-{q.id}")]
            self.ledger = ledger
        return context

    def ask_llm(self, question: str, reader, *, persist: bool = False):
        """`(Context, Answer)` from a real agent: `create_agent` + `PagingMiddleware` over this
        thread's pages, the model deciding what to recall (`evals.readers.llm.LLMReader`).
        Without `persist` the session is left as it was, so questions can be asked concurrently."""
        from evals.readers.llm import PAGING_HINT

        store, thread = InMemoryStore(), "replay"
        paging = PagingMiddleware(max_tokens=self.budget, boundary=self.boundary, policy=self.policy, store=store,
                                  recall_max_tokens=self.recall_cap)
        formed = {entry.id for entry in self.ledger.pages} if self.ledger else set()
        paging.page_store.put_many(thread, [p for p in self.pages.values() if p.id in formed], self.ledger)
        q = HumanMessage(question, id=f"q-{uuid.uuid4().hex[:12]}")
        answer = reader.run_agent([*self.state, q], middleware=[paging], store=store, hint=PAGING_HINT,
                                  thread_id=thread)
        first, final = (answer.prompts[0], answer.final_prompt) if answer.prompts else ([], [])
        stored, ledger = paging.page_store.snapshot(thread)
        pages = {p.id: p for p in stored}
        recalled = [pages[pid] for pid in recalled_in_order(answer) if pid in pages]
        context = _paged_context(final, recalled, ranked_pages=recalled,
                                 resident_before={m.id for m in first if not is_bookmark(m)},
                                 over_budget=COUNTER(final) > self.budget)
        if persist and answer.state:
            self.state, self.ledger = list(answer.state), ledger
            self.pages.update(pages)
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
