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

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from evals.methods import COUNTER, Context, cap_to_budget
from evals.policy_spec import paging_options
from evals.readers.lexical import (
    MAX_STRONG,
    READER_MODES,
    rank_bookmarks,
    strong_bookmarks,
    visible_bookmarks,
)
from langmem_paging import Page, PageStore, PagingConfig, PagingMiddleware, is_bookmark
from langmem_paging.core.messages import METADATA_KEY, recall_copy_pages
from langmem_paging.core.rendering import render_message
from langmem_paging.core.state import STATE_KEY, paging_reducer, recall_delta
from langmem_paging.core.text import content_terms
from langmem_paging.index.base import InMemoryBM25Index
from langmem_paging.runtime.pager import Pager, plan_recall

MAX_RECALLED_PAGES = 3
THREAD = "replay"


def method_name(reader: str) -> str:
    """The method name of paging with a reader mode in result rows: ``paging[search]``."""
    return f"paging[{reader}]"


def reader_of(method: str) -> str | None:
    """The reader mode of a paging method name (``paging`` alone: ``bookmarks``), else None."""
    if method == "paging":
        return "bookmarks"
    if method.startswith("paging[") and method.endswith("]"):
        return method[len("paging[") : -1]
    return None


@dataclass
class PagingSession:
    """One thread being replayed: its messages, its paging state and its page store.

    `policy` is a policy spec (`evals.policy_spec`: ``lfu``, ``stae:beta=0.5``,
    ``tiers:importance``); `reader` is the offline reader's mode (`READER_MODES`).
    """

    budget: int
    boundary: str
    policy: str
    reader: str = "bookmarks"
    state: list[BaseMessage] = field(default_factory=list)
    paging: dict = field(default_factory=dict)
    store: InMemoryStore = field(default_factory=InMemoryStore)
    search_embedder: str | None = None
    """Hybrid search with this embedder (score fusion with BM25); None: BM25 only."""

    def __post_init__(self) -> None:
        if self.reader not in READER_MODES:
            raise ValueError(f"Unknown reader mode {self.reader!r}. Available: {', '.join(READER_MODES)}.")
        self.config = PagingConfig(
            max_tokens=self.budget, boundary=self.boundary, **paging_options(self.policy)
        )
        # every replay uses the thread id THREAD: a search index of its own keeps threads apart
        embedder = None
        if self.search_embedder:
            from evals.methods import shared_vectors

            # one process's units share vectors (the same conversation at each budget is embedded
            # once), as one process's default index does for the threads it serves
            embedder = shared_vectors(self.search_embedder)
        self.index = InMemoryBM25Index(embedder=embedder)
        self.pager = Pager(self.config, PageStore(self.store), index=self.index)
        self._semantic = None
        self._ids = 0
        if self.reader == "semantic":
            from evals.readers.semantic import shared_ranker

            self._semantic = shared_ranker()

    @property
    def recall_cap(self) -> int:
        """The recall tool's size cap for this budget (as the library sets it)."""
        return self.config.recall_cap_for(self.budget)

    @property
    def pages(self) -> dict[str, Page]:
        """Every stored page of the thread, by id."""
        return {p.id: p for p in self.pager.page_store.list_pages(THREAD)}

    def step(self, messages: Sequence[BaseMessage], paging: dict):
        """One paging step on `messages` (what the middleware does before a model call)."""
        return self.pager.step(list(messages), paging, THREAD, model=None)

    def add(self, message: BaseMessage) -> None:
        """Append one turn; page before each user turn, as an agent's model call would."""
        self.state.append(message)
        if isinstance(message, HumanMessage):
            result = self.step(self.state, self.paging)
            self.state = result.apply(self.state) if result.updates else self.state
            self.paging = result.state.to_value()

    def _rank(self, question: str, bookmarks: list[tuple[str, list[str]]]) -> list[str]:
        if self._semantic is not None:
            return self._semantic.rank(question, bookmarks)
        return rank_bookmarks(question, bookmarks)

    def _members(self, cluster_id: str) -> list[tuple[str, list[str]]]:
        members = self.pager.page_store.members(THREAD, cluster_id, limit=200)
        pages = self.pager.page_store.get_many(THREAD, members)
        return [(pid, pages[pid].keywords) for pid in members if pid in pages]

    def _candidates(self, question: str, seen: list[BaseMessage]) -> list[str]:
        """Page ids by the reader's ranking of the bookmarks it sees: a cluster bookmark that
        ranks stands for its member pages, ranked by their own bookmarks (what a model would
        get by recalling the cluster id)."""
        ranked: list[str] = []
        for ident in self._rank(question, visible_bookmarks(seen)):
            if ident.startswith("p"):
                ranked.append(ident)
                continue
            ranked += [pid for pid in self._rank(question, self._members(ident)) if pid not in ranked]
        return ranked

    def _strong(self, question: str, seen: list[BaseMessage]) -> list[str]:
        """Pages whose bookmarks match the question strongly (`strong_bookmarks`); a strong
        cluster stands for its members that carry one of its rare shared terms."""
        out: list[str] = []
        for ident, rare in strong_bookmarks(question, visible_bookmarks(seen)):
            if ident.startswith("p"):
                out.append(ident)
                continue
            members = self._members(ident)
            carry = [pid for pid, kws in members if rare & set(content_terms(" ".join(kws)))]
            out += rank_bookmarks(question, [(pid, kws) for pid, kws in members if pid in carry])
        return list(dict.fromkeys(out))[:MAX_STRONG]

    def _within_cap(self, ranked: list[str]) -> list[str]:
        """The first `MAX_RECALLED_PAGES` of `ranked` while their tokens fit the recall cap."""
        pages = self.pager.page_store.get_many(THREAD, ranked[:MAX_RECALLED_PAGES])
        chosen: list[str] = []
        for page_id in ranked[:MAX_RECALLED_PAGES]:
            if page_id not in pages:
                continue
            if sum(pages[p].token_count for p in [*chosen, page_id]) > self.recall_cap:
                break
            chosen.append(page_id)
        return chosen

    def _request(self, question: str, seen: list[BaseMessage]) -> tuple[list[str], str | None, list[str]]:
        """What the reader asks `recall` for: ``(page_ids, query, ranked page ids)``; the ranking
        (before the cap) is what page selection is measured on (search: filled in from the
        result)."""
        if not any(is_bookmark(m) for m in seen):
            return [], None, []  # nothing paged out in view: no reader has a reason to recall
        if self.reader == "search":
            return [], question, []
        if self.reader == "bookmarks_then_search":
            strong = self._within_cap(self._strong(question, seen))
            return strong, (question if len(strong) < MAX_STRONG else None), strong
        ranked = self._candidates(question, seen)
        return self._within_cap(ranked), None, ranked

    def _message_id(self, kind: str, question: str, digits: int) -> str:
        """An id for a message this session adds, the same in every run: the provider counts a tool
        call's id, so random ids (uuid4, before) moved a fold at the edge of the budget and runs of one
        commit differed by a question or two."""
        self._ids += 1
        digest = hashlib.sha256(f"{kind}:{self._ids}:{question}".encode()).hexdigest()
        return f"{kind}-{digest[:digits]}"

    def ask(self, question: str, *, persist: bool = False) -> Context:
        """Context for a question after the reader's recall; `persist` keeps the exchange."""
        q = HumanMessage(question, id=self._message_id("q", question, 12))
        first = self.step([*self.state, q], self.paging)
        view = first.view
        paging = first.state.to_value()
        # what fits in B is all the reader sees (the view exceeds B only when protected text does)
        seen, over_before = cap_to_budget(view, self.budget, keep_from=len(view) - 1)
        page_ids, query, ranked = self._request(question, seen)
        resident_before = self._present(seen)
        recalled: list[str] = []
        if page_ids or query:
            call_id = self._message_id("call", question, 8)
            args = {k: v for k, v in (("page_ids", page_ids), ("query", query)) if v}
            call = AIMessage(
                "", tool_calls=[{"name": "recall", "args": args, "id": call_id}], id=f"a-{call_id}"
            )
            answer = self.pager.recall(
                THREAD,
                paging,
                page_ids=page_ids or None,
                query=query,
                call_tokens=self.pager.counter_for().count_message(call),
                context=view,
            )
            result = ToolMessage(
                answer.content,
                tool_call_id=call_id,
                name="recall",
                id=f"t-{call_id}",
                artifact=answer.artifact,
            )
            paging = paging_reducer(
                paging, recall_delta(answer.accessed, turn=answer.turn, results=[result.id, *answer.kept])
            )
            second = self.step([*view, call, result], paging)
            view, paging = second.view, second.state.to_value()
            recalled = recall_copy_pages(result)
            if query:  # the search's own order: named pages first, then hits
                ranked = [*ranked, *(p for p in recalled if p not in ranked)]
        question_at = next(i for i, m in enumerate(view) if m.id == q.id)
        context_messages, over = cap_to_budget(view, self.budget, keep_from=question_at)
        all_ranked = self.pager.page_store.get_many(THREAD, ranked)
        context = self._context(
            context_messages,
            recalled=recalled,
            ranked_pages=[all_ranked[p] for p in ranked if p in all_ranked],
            resident_before=resident_before,
            over_budget=over or over_before,
        )
        if persist:
            self.state = [*view, AIMessage("(answered)", id=f"ans-{q.id}")]
            self.paging = paging
        return context

    def _present(self, messages: Sequence[BaseMessage]) -> set[str]:
        """Turn ids whose text is in `messages` (`present_turns` over this thread's pages)."""
        wanted = [pid for m in messages for pid in recall_pages(m)]
        return present_turns(messages, self.pager.page_store.get_many(THREAD, wanted) if wanted else {})

    def _context(
        self,
        messages: list[BaseMessage],
        *,
        recalled: list[str],
        ranked_pages: list[Page],
        resident_before: set[str],
        over_budget: bool,
    ) -> Context:
        return Context(
            messages=messages,
            present=self._present(messages),
            bookmark_tokens=sum(COUNTER.count_message(m) for m in messages if is_bookmark(m)),
            ranked_pages=[[m.id for m in page.messages] for page in ranked_pages],
            recalled=list(recalled),
            resident_before=resident_before,
            over_budget=over_budget,
        )

    def ask_llm(self, question: str, reader, *, persist: bool = False):
        """`(Context, Answer)` from a real agent: `create_agent` + `PagingMiddleware` over this
        thread's pages and paging state, the model deciding what to recall
        (`evals.readers.llm.LLMReader`). Without `persist` the session is left as it was, so
        questions can be asked concurrently."""
        from evals.readers.llm import PAGING_HINT

        paging = PagingMiddleware(config=self.config, store=self.store, index=self.index)
        q = HumanMessage(question, id=self._message_id("q", question, 12))
        answer = reader.run_agent(
            [*self.state, q],
            middleware=[paging],
            store=self.store,
            hint=PAGING_HINT,
            thread_id=THREAD,
            state={STATE_KEY: self.paging},
        )
        first, final = (answer.prompts[0], answer.final_prompt) if answer.prompts else ([], [])
        recalled_ids = recalled_in_order(answer)
        pages = self.pager.page_store.get_many(THREAD, recalled_ids)
        context = self._context(
            final,
            recalled=[pid for pid in recalled_ids if pid in pages],
            ranked_pages=[pages[pid] for pid in recalled_ids if pid in pages],
            resident_before=self._present(first),
            over_budget=COUNTER(final) > self.budget,
        )
        if persist and answer.state:
            self.state = list(answer.state)
            self.paging = answer.paging if answer.paging is not None else self.paging
        return context, answer


def recall_pages(message: BaseMessage) -> list[str]:
    """Page ids whose text a recall ToolMessage may carry: the pages it shows and the members
    of clusters it shows; [] for any other message."""
    if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
        return []
    pages = recall_copy_pages(message)
    spec = (message.artifact.get(METADATA_KEY) or {}).get("spec") or {}
    members = [pid for item in spec.get("items", []) if "cluster" in item for pid in item.get("members", [])]
    return list(dict.fromkeys([*pages, *members]))


def present_turns(messages: Sequence[BaseMessage], pages: dict[str, Page]) -> set[str]:
    """Turn ids whose full text is in `messages`: resident turns, and the turns of `pages` whose
    rendering is in a recall result among `messages`, whichever question recalled them (in
    the streaming protocol earlier recalls stay in the thread; a result shrunk to a reference or
    cut off by the budget shows nothing).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> old = HumanMessage("We adopted a greyhound.", id="D1:1", name="Ana")
        >>> page = Page(id="p1", messages=[old], bookmark="[p1:greyhound]", keywords=["greyhound"],
        ...             token_count=9, boundary="fixed_2", created_turn=1)
        >>> result = ToolMessage(render_message(old), tool_call_id="c", id="t",
        ...                      artifact={METADATA_KEY: {"recalled": ["p1"]}})
        >>> sorted(present_turns([result, HumanMessage("Any pets?", id="q")], {"p1": page}))
        ['D1:1', 'q']
    """
    results = ["\n" + str(m.content) + "\n" for m in messages if isinstance(m, ToolMessage)]
    shown = {
        m.id
        for page in pages.values()
        for m in page.messages  # whole lines: a turn, not a substring
        if any("\n" + render_message(m) + "\n" in r for r in results)
    }
    return {m.id for m in messages if not is_bookmark(m) and not isinstance(m, ToolMessage)} | shown


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
