"""Pure cases, events: what each generated event does to the state and to the unpaged reference."""

from __future__ import annotations

import copy
import random

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from langmem_paging import PagingState, reconstruct_history
from langmem_paging.core.messages import METADATA_KEY, library_mark, tool_call_ids
from langmem_paging.core.state import paging_reducer, recall_delta
from langmem_paging.integrations.graph_state import GraphCall

from .oracles import in_history_order, same_messages
from .report import INJECTED
from .vocabulary import COUNTER, Words


def _spoofed(m: BaseMessage) -> bool:
    """The app's message carries the library's metadata (a tool result: its mark)."""
    return (
        METADATA_KEY in m.additional_kwargs
        and not isinstance(m, ToolMessage)
        or (isinstance(m, ToolMessage) and bool(library_mark(m)))
    )


class PureEvents:
    """Applies events (`apply` dispatches by kind; `PureCase` mixes this in)."""

    def apply(self, event: tuple) -> None:
        kind = event[0]
        if kind == "add":
            self.do_add(event[1])
        elif kind == "user":
            self.do_add([event[1]])
            self.pending_user = [event[1]]
        elif kind == "step":
            self.do_step()
        elif kind == "tools":
            self.do_tools(event[1])
        elif kind == "remove":
            self.do_remove(event[1])
        elif kind == "remove_all":
            self.do_remove_all(event[1], event[2])
        elif kind == "remove_front":
            self.do_remove_front(event[1])
        elif kind == "edit":
            self.do_edit(event[1], event[2])
        elif kind == "fork":
            self.do_fork(event[1])
        elif kind == "other_thread":
            self.do_other_thread()
        else:
            raise ValueError(kind)

    def do_add(self, messages: list[BaseMessage]) -> None:
        self.log("add " + ", ".join(self.added_text(m) for m in messages))
        resident = {m.id for m in self.msgs if not library_mark(m)}  # a bookmark's id is an evicted message's
        for m in messages:
            self.note_reused(m, resident)
        in_state = {m.id for m in self.msgs}
        plain = {m.id for m in self.msgs if set(library_mark(m)) <= {"pinned", "importance"}}  # no stand-in
        self.msgs = add_messages(self.msgs, messages)
        if self.p.mode == "replace":
            self.add_to_ref_replacing(messages, in_state, plain)
        else:
            self.ref = add_messages(self.ref, messages)

    def added_text(self, m: BaseMessage) -> str:
        """One added message as the log shows it."""
        return (
            f"{m.type}:{m.id}"
            + (f"(calls {tool_call_ids(m)})" if tool_call_ids(m) else "")
            + (f"->{m.tool_call_id}" if isinstance(m, ToolMessage) else "")
            + (f"[{self.count(m)}t]")
        )

    def note_reused(self, m: BaseMessage, resident: set) -> None:
        """Flags an added message's spoofed metadata and reused id (`resident`: ids no stand-in holds)."""
        if _spoofed(m):
            self.flags.add("spoof")
        # an id of the unpaged history, or the id of a stand-in shown again under an id of its own
        # (`h3~p2`): no message of the unpaged history has that one, so the reference appends the
        # message, while the graph puts it in the stand-in's place; the rebuilt history keeps the
        # list's order (docs/architecture.md), so only its presence is compared
        if (
            m.id
            and m.id not in resident
            and (any(x.id == m.id for x in self.ref) or any(x.id == m.id for x in self.msgs))
        ):
            self.collided.add(m.id)
            self.flags.add("reused-id")
        if m.id and self.p.mode == "view" and any(x.id == m.id for x in self.ref):
            self.collided.add(m.id)
            self.flags.add("reused-id")
            if m.id not in self.stand_in_ids():
                # view mode keeps the whole history in the state, so LangGraph's add_messages
                # edits the message with that id in place, at its old position: docs/design.md,
                # an edit of a paged-out message shows at the next recall, and an old resident
                # message (edited or not) pages like any other (only the newest user message
                # is kept by rule). A message that took the id under a stand-in must show (B1).
                self.edits_in_place.add(m.id)

    def add_to_ref_replacing(self, messages: list[BaseMessage], in_state: set, plain: set) -> None:
        """Replace mode: the added messages into the unpaged reference (`in_state`: the state's ids
        before the add, `plain`: those of messages no stand-in replaced)."""
        # the graph appends a message whose id left the state (paged out behind a bookmark): to
        # the app it is new, and the history keeps the paged message and the new one, in order
        # (`add_messages` on the unpaged reference would replace the old one in place, leaving a
        # tool group without its result that the reference's own repair then "answers")
        for m in messages:
            appended = m.id and m.id not in in_state and m.id in self.collided
            self.ref = [*self.ref, m] if appended else add_messages(self.ref, [m])
        # a reused id of a resident message is an edit in place, as in view mode: unless it is
        # still the newest user message, it pages like any other old message (pure seed 12034)
        users = [x.id for x in self.msgs if isinstance(x, HumanMessage) and not library_mark(x)]
        for m in messages:
            if m.id in plain and users and m.id != users[-1]:
                self.edits_in_place.add(m.id)

    def stand_in_ids(self) -> set[str | None]:
        """Ids of the stand-ins the view shows now (view mode): bookmarks, digests, stubs."""
        history = {id(m) for m in self.msgs}
        view = GraphCall.prepare(self.msgs, self.value, "view", self.thread).view
        return {m.id for m in view if id(m) not in history}

    def do_tools(self, results: list) -> None:
        out = []
        for r in results:
            out.append(self.recall(r[1], r[2]) if isinstance(r, tuple) else r)
        self.do_add(out)

    def do_other_thread(self) -> None:
        """Another thread in the same store, with pages of its own (numbers past this thread's)."""
        words = Words(random.Random(self.seed + 1), self.other_tag)
        self.store.enabled = False
        value: dict = {}
        msgs: list[BaseMessage] = []
        other_thread = f"other-{self.seed}"
        for i in range(30):
            msgs = add_messages(msgs, [words.user(id=f"o-h{i}", words=20)])
            result = self.pager.step(msgs, value, other_thread)
            value = result.state.to_value()
            if self.p.mode == "replace":
                msgs = result.apply(msgs)
            msgs = add_messages(msgs, [words.ai(id=f"o-a{i}", words=20)])
        self.store.enabled = True
        self.other_ids = [p.id for p in self.oracle_store.list_pages(other_thread)]

    def recall(self, call: dict, message_id: str) -> ToolMessage:
        args = call["args"]
        branch = PagingState.from_value(self.value)
        try:
            answer = self.pager.recall(self.thread, self.value, **args)
        except INJECTED:
            self.report.notes["recall raised an injected store error (a tool error for the app)"] += 1
            return ToolMessage(
                "Error: store unavailable",
                tool_call_id=call["id"],
                name="recall",
                id=message_id,
                status="error",
            )
        except Exception as error:  # noqa: BLE001
            self.fail("recall raised", f"{type(error).__name__}: {error} args={str(args)[:200]}", error)
        if answer.status == "error":  # the store failed under the recall: the model is told (B12)
            self.report.notes["recall answered a store error with an error tool message"] += 1
            self.flags.add("store-error")
            self.log("recall: store error answered as an error tool message")
            return ToolMessage(
                answer.content, tool_call_id=call["id"], name="recall", id=message_id, status="error"
            )
        self.log(f"recall {str(args)[:80]} -> {answer.artifact[METADATA_KEY]['recalled']}")
        self.check_recall(answer.content, args, branch, self.pager.room_for(branch))
        message = ToolMessage(
            answer.content, tool_call_id=call["id"], name="recall", id=message_id, artifact=answer.artifact
        )
        self.value = paging_reducer(
            self.value, recall_delta(answer.accessed, turn=answer.turn, results=[message.id])
        )
        return message

    def do_remove(self, message_id: str) -> None:
        if not any(m.id == message_id for m in self.msgs):
            return
        self.msgs = add_messages(self.msgs, [RemoveMessage(id=message_id)])
        held = [i for i, m in enumerate(self.ref) if m.id == message_id]
        if self.p.mode == "replace" and len(held) > 1:
            # the reference holds a paged message and the new one that took its id (appended): the
            # app removes the one it sees, the newest; the paged one stays history (pure seed 20234)
            self.ref = self.ref[: held[-1]] + self.ref[held[-1] + 1 :]
        elif held:
            self.ref = add_messages(self.ref, [RemoveMessage(id=message_id)])
        self.report.notes["pure RemoveMessage"] += 1
        self.flags.add("remove")
        self.log(f"remove {message_id}")

    def do_remove_all(self, n_keep: int, summary: HumanMessage) -> None:
        """What `SummarizationMiddleware` does: REMOVE_ALL_MESSAGES, a summary, the last few messages."""
        keep = self.msgs[len(self.msgs) - n_keep :] if n_keep else []
        while keep and isinstance(keep[0], ToolMessage):  # never keep a tool result without its call
            keep = keep[1:]
        expected = in_history_order(
            reconstruct_history(keep, self.get_page, COUNTER, clusters=self.get_node), self.ref
        )
        self.msgs = add_messages(self.msgs, [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *keep])
        self.ref = [summary, *expected]
        self.report.notes["pure REMOVE_ALL_MESSAGES"] += 1
        self.flags.add("remove-all")
        self.log(f"REMOVE_ALL, then {summary.id} and keep {[m.id for m in keep]}")

    def do_remove_front(self, n: int) -> None:
        """The app deletes the oldest messages (never leaving a tool result first without its call)."""
        removed = self.msgs[:n]
        while len(removed) < len(self.msgs) and isinstance(self.msgs[len(removed)], ToolMessage):
            removed = self.msgs[: len(removed) + 1]
        if not removed or any(not m.id for m in removed):
            return
        gone = {m.id for m in removed}
        if self.p.mode == "replace":  # a removed bookmark takes its pages with it
            gone |= {
                m.id for m in reconstruct_history(removed, self.get_page, COUNTER, clusters=self.get_node)
            }
        self.msgs = add_messages(self.msgs, [RemoveMessage(id=m.id) for m in removed])
        self.ref = [m for m in self.ref if m.id not in gone]
        self.report.notes["pure front removals"] += 1
        self.flags.add("remove-front")
        self.log(f"remove the first {len(removed)}: {[m.id for m in removed]}")

    def do_edit(self, message_id: str, text: str) -> None:
        """An edit: the message keeps its id and place, its text changes (the edited text wins)."""
        target = next((m for m in self.msgs if m.id == message_id), None)
        if target is None:
            return
        edited = target.model_copy(update={"content": text})
        self.msgs = add_messages(self.msgs, [edited])
        if any(m.id == message_id for m in self.ref):
            self.ref = add_messages(self.ref, [edited])
        self.report.notes["pure edits"] += 1
        self.flags.add("edit")
        self.log(f"edit {message_id}")

    def do_fork(self, k: int) -> None:
        """Time travel: back to an earlier step's state (its checkpoint), continue from there."""
        if k >= len(self.snapshots):
            return
        msgs, value, ref, rebuilt = self.snapshots[k]
        now = PagingState.from_value(self.value)
        then = PagingState.from_value(value)
        for a, b in now.spans["p"]:
            for n in range(a, b):
                if not then.owns("p", n):
                    self.abandoned.add(f"p{n}")
        self.msgs, self.value, self.ref = list(msgs), copy.deepcopy(value), list(ref)
        self.check("fork point rebuilds as before")
        again = self.rebuild()
        diff = same_messages(again, rebuilt)
        if diff:
            self.fail("an older checkpoint no longer rebuilds the same history", diff)
        self.report.notes["pure forks"] += 1
        self.flags.add("fork")
        self.log(f"fork back to snapshot {k}")
