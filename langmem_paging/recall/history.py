"""Losslessness: the thread's whole history, exactly, from its context and the stored pages.

Bookmarks expand to their page's messages, cluster bookmarks to their member pages (walking
the cluster forest), shrunk recall results, paged tool results and malformed calls to their full
text. With the branch's paging state, everything is put back in history order, by one rule:

- a message a step has numbered sits at its ordinal (`PagingState.order`; a page at its first
  message's, `Page.order`), ties broken by list order; the step numbers a new message where the
  list has it (at the end: the next ordinal; first: below every ordinal; between older messages:
  just below the next one's, `step.reconcile.number_new_messages`);
- a message no step has numbered yet (the model's last answer, or what the app wrote with
  `update_state` since) follows everything before it in the list, or comes first if nothing is;
- the list's own messages never pass one another (a rewrite's order is the history's); page
  expansions go where their ordinals say.

So a removal, an edit, a ``REMOVE_ALL_MESSAGES`` rewrite or a fork rebuilds in the order the app
left, whether or not a step ran since.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langmem_paging.core.forest import members_of
from langmem_paging.core.messages import library_mark, recall_copy_pages, tool_call_ids
from langmem_paging.core.records import ClusterNode, Page, page_number
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter, shared_counter
from langmem_paging.step.result import PagingValue

__all__ = ["reconstruct_history"]

GetPage = Callable[[str], "Page | None"]
GetNode = Callable[[str], "ClusterNode | None"]
_Segment = tuple[tuple[int, int, int], list[BaseMessage]]

_AFTER = 1 << 30
"""Position within an ordinal of a message never numbered: after everything numbered there."""
_BEFORE_ALL = -(1 << 62)
"""Ordinal of a message never numbered that comes first in the list: a rewrite put it before every
message and page (``REMOVE_ALL_MESSAGES`` with a summary, before the next step numbers it below
every ordinal given, earlier summaries' included)."""


def reconstruct_history(
    messages: Sequence[BaseMessage],
    pages: Mapping[str, Page] | GetPage,
    counter: TokenCounter | None = None,
    *,
    clusters: Mapping[str, ClusterNode] | GetNode | None = None,
    state: PagingValue = None,
) -> list[BaseMessage]:
    """The original history from the context and the stored pages, exactly.

    Bookmarks expand to their page's messages, cluster bookmarks to their member pages,
    shrunk recall results and paged tool results to their full text. With the branch's
    paging `state`, everything is put back in history order (pages and resident messages
    carry history ordinals); without it, expansions stay where their bookmark is. Messages
    that only look like ours (no such page) are kept as they are.

    Args:
        messages: The state's messages.
        pages: Stored pages by id (a mapping, or a function such as ``lambda p: store.get(t, p)``).
        counter: Tokenizer used to re-render recall results (default: the one each result names).
        clusters: Stored cluster nodes by id, to expand cluster bookmarks.
        state: The paging state (``state["paging"]``), to restore history order.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langmem_paging import page_messages
        >>> history = [HumanMessage("Lisbon?", id="h1"), AIMessage("Booked.", id="a1"),
        ...            HumanMessage("Kyoto?", id="h2")]
        >>> result = page_messages(history, max_tokens=2, boundary="fixed_2", token_counter=len,
        ...                        bookmark_share=1.0)
        >>> [m.content for m in result.view] == [m.content for m in result.apply(history)]  # the graph's update
        True
        >>> [m.content for m in result.view]
        ['[p1:Booked Lisbon user]', 'Kyoto?']
        >>> pages = {p.id: p for p in result.pages}
        >>> rebuilt = reconstruct_history(result.view, pages, state=result.state)
        >>> [m.content for m in rebuilt] == [m.content for m in history]
        True
    """
    get_page: GetPage = pages.get if isinstance(pages, Mapping) else pages
    get_node: GetNode | None = clusters.get if isinstance(clusters, Mapping) else clusters
    branch = PagingState.from_value(state) if state is not None else None
    rebuild = _Rebuild(get_page, get_node, counter, branch)
    for n, message in enumerate(messages):
        rebuild.add(n, message)
    return rebuild.history()


class _Rebuild:
    """History segments as the messages are read: page expansions keyed by their ordinals, the
    list's own messages by theirs."""

    def __init__(
        self,
        get_page: GetPage,
        get_node: GetNode | None,
        counter: TokenCounter | None,
        branch: PagingState | None,
    ) -> None:
        self.get_page, self.get_node, self.counter, self.branch = get_page, get_node, counter, branch
        self.in_pages = (
            {k: (p.order, i) for p in branch.pages.values() for i, k in enumerate(p.ids)} if branch else {}
        )
        self.segments: list[_Segment] = []
        self.resident: list[int] = []  # segments holding a message of the list itself
        self.high = _BEFORE_ALL  # the highest ordinal of the segments so far

    def add(self, n: int, message: BaseMessage) -> None:
        members = self._expansion(message)
        if members is not None:
            for page in members:
                self.segments.append(((page.order, 0, n), [self._restore(m) for m in page.messages]))
                self.high = max(self.high, page.order)
            return
        self.resident.append(len(self.segments))
        key = self._key(n, message)
        self.segments.append((key, [self._restore(message)]))
        self.high = max(self.high, key[0])

    def history(self) -> list[BaseMessage]:
        if self.branch is not None:
            _keep_list_order(self.segments, self.resident)
            self.segments.sort(key=lambda s: s[0])
        return [m for _, ms in self.segments for m in ms]

    def _expansion(self, message: BaseMessage) -> list[Page] | None:
        """The pages a bookmark or cluster bookmark the branch shows stands for (None: not one)."""
        if not _shows_a_page(self.branch, message):
            return None
        mark = library_mark(message)
        if "bookmark" in mark and (page := self.get_page(mark["bookmark"])) is not None:
            return [page]
        if "cluster" in mark and self.get_node is not None:
            members = members_of(mark["cluster"], self.get_node)
            found = [self.get_page(pid) for pid in members.pages]
            if members.complete and all(p is not None for p in found):
                return sorted((p for p in found if p is not None), key=lambda p: (p.order, page_number(p.id)))
        return None

    def _key(self, n: int, message: BaseMessage) -> tuple[int, int, int]:
        if self.branch is not None and message.id in self.branch.order:
            return self.branch.order[message.id], 0, n
        if message.id in self.in_pages:
            order, at = self.in_pages[message.id]
            return order, at, n
        if self.segments:  # never numbered (no step saw it yet): it follows all that precedes it in
            # the list, a cluster bookmark's latest member page included
            return self.high, _AFTER, n
        return _BEFORE_ALL, 0, n

    def _restore(self, message: BaseMessage) -> BaseMessage:
        mark = library_mark(message)
        if (
            "paged_result" in mark
            and (page := self.get_page(mark["paged_result"])) is not None
            and _stub_of(message, page)
        ):
            return page.messages[0]
        if isinstance(message, ToolMessage) and recall_copy_pages(message) and mark.get("shrunk"):
            from langmem_paging.recall.render import expand_recall_copy

            return expand_recall_copy(
                message, self.get_page, self.counter or shared_counter("cl100k_base"), self.get_node
            )
        return message


def _stub_of(message: BaseMessage, page: Page) -> bool:
    """True if `message` is the stub of the one message `page` holds (a tool result paged on
    arrival, or a malformed call's AI message): same type, id and call ids, not a message that
    only copies a stub's metadata (a user message carrying it was replaced by the page's first
    message)."""
    original = page.messages[0] if page.kind == "tool_result" and len(page.messages) == 1 else None
    return (
        isinstance(message, (ToolMessage, AIMessage))
        and type(original) is type(message)
        and original.id == message.id
        and tool_call_ids(original) + _result_of(original) == tool_call_ids(message) + _result_of(message)
    )


def _result_of(message: BaseMessage) -> list[str]:
    return [message.tool_call_id] if isinstance(message, ToolMessage) else []


def _shows_a_page(branch: PagingState | None, message: BaseMessage) -> bool:
    """True if `message` is a bookmark or cluster bookmark the branch's state shows (without a
    state, any message marked as one): a user's message carrying copied metadata is not."""
    mark = library_mark(message)
    if not ("bookmark" in mark or "cluster" in mark):
        return False
    if branch is None:
        return True
    shown, cluster = (
        branch.shown.get(str(mark.get("bookmark"))),
        branch.clusters.get(str(mark.get("cluster"))),
    )
    return (shown is not None and shown.anchor == message.id) or (
        cluster is not None and cluster.anchor == message.id
    )


def _keep_list_order(segments: list[_Segment], resident: list[int]) -> None:
    """Lower the sort keys of the list's own messages so they never pass one another: the list's
    order is the history's, also where it was rewritten (``REMOVE_ALL_MESSAGES`` put a summary, or
    a repaired tool call's result, before messages numbered earlier). Page expansions still go
    where their ordinals say."""
    floor: tuple[int, int] | None = None
    for i in reversed(resident):
        key, content = segments[i]
        if floor is not None and key[:2] > floor:
            segments[i] = ((*floor, key[2]), content)
        floor = segments[i][0][:2]
