"""Pure cases, generation: the random events of a history (turns, tool rounds, edits, removals)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from langmem_paging import PagingState
from langmem_paging.core.messages import library_mark, tool_call_ids

from .vocabulary import VOCAB


class PureGeneration:
    """Draws a case's events from its seeded `rng` and emits them (`PureCase` mixes this in)."""

    def generate(self) -> None:
        if self.p.other_thread:
            self.emit(("other_thread",))
        if self.rng.random() < 0.5:
            self.emit(
                (
                    "add",
                    [
                        SystemMessage(
                            self.words.text(self.rng.randint(0, 30)),
                            id="sys",
                            additional_kwargs={"fz": "sys"},
                        )
                    ],
                )
            )
        for _turn in range(self.p.turns):
            self.report.turns["pure"] += 1
            self.gen_turn()

    def gen_turn(self) -> None:
        """The app's changes, a user message, the model's tool rounds, its answer."""
        self.gen_app_changes()
        self.emit(("user", self.gen_user()))
        self.emit(("step",))
        for _ in range(self.gen_rounds()):
            if not self.gen_tool_round():
                return  # a call left unanswered: the next user turn comes on top of it
            self.emit(("step",))
        self.emit(("add", [self.words.ai(id=self.new_id("a"))]))

    def gen_app_changes(self) -> None:
        """What the app does to the state between turns: a removal, a summary, a front cut, an edit,
        time travel (each drawn every turn, in this order, so a seed replays the same case)."""
        rng = self.rng
        if rng.random() < 0.05 and self.msgs:
            self.gen_remove()
        if rng.random() < 0.015 and self.msgs:
            keep = rng.randint(0, 4) if rng.random() < 0.7 else 0
            summary = HumanMessage(
                f"Summary: {self.words.text(12)}", id=self.new_id("sum"), additional_kwargs={"fz": "summary"}
            )
            self.emit(("remove_all", keep, summary))
        if rng.random() < 0.02 and self.msgs:  # LangGraph's "delete old messages"
            self.emit(("remove_front", rng.randint(1, 5)))
        if rng.random() < 0.04 and self.msgs:
            self.gen_edit()
        if self.p.forks and rng.random() < 0.06 and len(self.snapshots) > 2:
            self.emit(("fork", rng.randrange(len(self.snapshots) - 1)))

    def gen_remove(self) -> None:
        """The app removes one of its messages; removing a tool call removes its results too."""
        ours = [m for m in self.msgs if m.id and not library_mark(m) and not isinstance(m, ToolMessage)]
        if not ours:
            return
        victim = self.rng.choice(ours)
        self.emit(("remove", victim.id))
        calls = set(tool_call_ids(victim))
        for m in self.msgs:
            if isinstance(m, ToolMessage) and m.tool_call_id in calls:
                self.emit(("remove", m.id))

    def gen_rounds(self) -> int:
        """Tool rounds in this user turn: mostly none, sometimes 1-3, rarely a long loop."""
        rng = self.rng
        r = rng.random()
        if r < 0.35:
            return rng.randint(1, 3)
        if r < 0.37:
            return 50  # a long tool loop in one user turn
        return 0

    def gen_edit(self) -> None:
        """The app edits a message (same id, new text): in view mode any message of the history, in
        replace mode one still in the state."""
        editable = [
            m.id
            for m in self.msgs
            if m.id
            and not library_mark(m)
            and not isinstance(m, ToolMessage)
            and not getattr(m, "tool_calls", None)
        ]
        if editable:
            self.emit(
                ("edit", self.rng.choice(editable), f"Edited: {self.words.text(self.rng.randint(1, 12))}")
            )

    def gen_user(self) -> HumanMessage:
        rng = self.rng
        ident = self.new_id("h")
        if self.p.collisions and rng.random() < 0.1:
            ident = self.reused_user_id(ident)
        spoof = None
        if self.p.spoof and rng.random() < 0.04:
            spoof = self.spoofed_mark()
        words = None
        if rng.random() < 0.003:
            words = 40_000  # ~200 KB
        elif rng.random() < 0.03:
            words = rng.randint(600, 2500)
        return self.words.user(
            id=ident, pinned=rng.random() < 0.04, spoof=spoof, words=words, bait=rng.random() < 0.1
        )

    def reused_user_id(self, ident: str) -> str:
        """An id the history already used (an evicted message's or a stand-in's), else `ident`."""
        resident = {x.id for x in self.msgs}
        evicted = [m.id for m in self.ref if m.id and m.id not in resident]
        anchors = [m.id for m in self.msgs if library_mark(m)]
        pool = evicted + anchors if self.p.mode == "replace" else [m.id for m in self.ref[:-4] if m.id]
        return self.rng.choice(pool) if pool else ident

    def spoofed_mark(self) -> dict:
        """The library's metadata, forged by the app."""
        rng = self.rng
        return rng.choice(
            [
                {"bookmark": "p1"},
                {"bookmark": f"p{rng.randint(1, 6)}"},
                {"cluster": "c1"},
                {"paged_result": "p1"},
                {"shrunk": True},
                {"bookmark": 3},
            ]
        )

    def gen_tool_round(self) -> bool:
        """The model calls tools (parallel, malformed, recall, large results); results come back.
        False when the calls are left unanswered (a crashed tool)."""
        rng = self.rng
        calls = self.gen_calls()
        invalid = self.gen_invalid()
        ai = self.words.ai(calls=calls, invalid=invalid, id=self.new_id("t"), words=rng.choice([0, 0, 5]))
        self.emit(("add", [ai]))
        if rng.random() < 0.03:
            return False  # unanswered: a crashed tool
        results: list[Any] = [self.repair_result(bad) for bad in invalid]
        order = list(calls)
        if len(order) > 1 and rng.random() < 0.3:
            rng.shuffle(order)
        results += [self.gen_result(call) for call in order]
        self.emit(("tools", results))
        return True

    def gen_calls(self) -> list[dict]:
        """1-4 parallel calls: recall (with a store), a big report, or a lookup."""
        rng = self.rng
        calls = []
        for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
            cid = self.new_id("call")
            kind = rng.random()
            if kind < 0.15 and self.store is not None:
                calls.append({"name": "recall", "args": self.gen_recall_args(), "id": cid})
            elif kind < 0.25:
                calls.append({"name": "big_report", "args": {"topic": rng.choice(VOCAB)}, "id": cid})
            else:
                calls.append({"name": "lookup", "args": {"q": self.words.text(rng.randint(0, 6))}, "id": cid})
        return calls

    def gen_invalid(self) -> list[dict]:
        """Sometimes a malformed call: its JSON cut short, as when the model hits its output limit."""
        rng = self.rng
        if rng.random() >= 0.12:
            return []
        cut = self.words.text(rng.randint(200, 1500)) if rng.random() < 0.3 else "trunc"
        return [
            {
                "name": "lookup",
                "args": '{"q": "' + cut,
                "id": self.new_id("bad"),
                "error": "malformed JSON",
                "type": "invalid_tool_call",
            }
        ]

    def repair_result(self, bad: dict) -> ToolMessage:
        """The error result an agent sends back for a malformed call."""
        return ToolMessage(
            f"Tool call lookup with id {bad['id']} could not be executed - arguments "
            "were malformed or truncated.",
            tool_call_id=bad["id"],
            name="lookup",
            status="error",
            id=self.new_id("err"),
        )

    def gen_result(self, call: dict) -> Any:
        """A call's result; a recall is a placeholder answered when the event is applied."""
        rng = self.rng
        if call["name"] == "recall":
            return ("recall", call, self.new_id("recall-"))
        if call["name"] == "big_report":
            tokens = rng.choice([300, 1200, 5000])
            return ToolMessage(
                self.words.big_text(tokens),
                tool_call_id=call["id"],
                name="big_report",
                id=self.new_id("r"),
                additional_kwargs={"fz": f"big{tokens}"},
            )
        return ToolMessage(
            self.words.content(self.words.size(), bait=rng.random() < 0.2),
            tool_call_id=call["id"],
            name="lookup",
            id=self.new_id("r"),
        )

    def gen_recall_args(self) -> dict:
        rng = self.rng
        state = PagingState.from_value(self.value)
        own = [*state.shown, *[f"p{n}" for a, b in state.spans["p"] for n in range(a, b)]]
        pool = own + list(state.clusters) + [f"p{rng.randint(1, 40)}", "c1", "p999"]
        pool += self.other_ids[:3] + sorted(self.abandoned)[:3]
        r = rng.random()
        if r < 0.6:
            args: dict[str, Any] = {"page_ids": rng.sample(pool, min(len(pool), rng.randint(1, 3)))}
        elif r < 0.85:
            args = {"query": self.words.text(rng.randint(1, 4))}
        elif r < 0.9:
            args = {"query": "x " * 50_000}  # 100 KB query echoed in the note
        elif r < 0.95:
            args = {"page_ids": rng.choice(["p1, p2", "[p1:foo,bar]", "drop table", [3], [None]])}
        else:
            args = {"page_ids": [rng.choice(pool)], "part": rng.randint(1, 4)}
        return args
