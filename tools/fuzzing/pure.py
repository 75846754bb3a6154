"""Pure cases: random histories through `page_messages` and a `Pager` over a page store."""

from __future__ import annotations

import copy
import json
import random
import re
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    PagingConfig,
    PagingState,
    page_messages,
    reconstruct_history,
)
from langmem_paging.core.library_messages import tool_result_stub
from langmem_paging.core.messages import METADATA_KEY, library_mark, tool_call_ids
from langmem_paging.core.records import page_number
from langmem_paging.core.state import paging_reducer, recall_delta
from langmem_paging.integrations.graph_state import GraphCall
from langmem_paging.integrations.pager import Pager
from langmem_paging.step.repair import repair_unanswered
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import FaultInjectingStore
from langmem_paging.testing.conformance import valid_chat as assert_valid_chat

from .oracles import (
    chat_problems,
    generous_protected,
    in_history_order,
    library_tokens,
    order_label,
    recall_structure_problems,
    same_messages,
    shows_page,
    stuck_label,
)
from .report import INJECTED, Failure, FuzzFailure, InjectedStoreError, Report
from .vocabulary import BOUNDARIES, COUNTER, POLICIES, VOCAB, Words

# -- the pure driver ---------------------------------------------------------------------------


@dataclass
class PureParams:
    """One pure case."""

    mode: str
    backend: str  # "local" (page_messages, no store) or "store" (Pager over a PageStore)
    boundary: str
    policy: str
    max_tokens: int
    low_water: int | None
    counter: str  # "tiktoken" or "len"
    bookmark_share: float
    large_result_share: float | None
    fail_rate: float
    turns: int
    other_thread: bool
    forks: bool
    collisions: bool
    spoof: bool = False
    tiers: str | None = None

    def describe(self) -> str:
        return "pure " + " ".join(f"{k}={v}" for k, v in self.__dict__.items())


def pure_params(rng: random.Random) -> PureParams:
    counter = rng.choice(["tiktoken", "tiktoken", "tiktoken", "len"])
    if counter == "len":
        max_tokens = rng.randint(4, 40)
    else:
        max_tokens = rng.choice([60, 120, 200, 300, 400, 600, 900, 1500, 3000])
    backend = rng.choice(["local", "store", "store"])
    return PureParams(
        mode=rng.choice(["replace", "replace", "view"]),
        backend=backend,
        boundary=rng.choice(BOUNDARIES),
        policy=rng.choice(POLICIES),
        max_tokens=max_tokens,
        low_water=rng.choice([None, None, max(1, int(max_tokens * rng.uniform(0.3, 1.0)))]),
        counter=counter,
        bookmark_share=rng.choice([0.2, 0.2, 0.05, 0.5, 1.0]),
        large_result_share=rng.choice([0.5, 0.5, 0.2, None]),
        fail_rate=rng.choice([0.0, 0.0, 0.1, 0.4]) if backend == "store" else 0.0,
        turns=rng.choice([5, 15, 30, 60]),
        other_thread=backend == "store" and rng.random() < 0.5,
        forks=backend == "store" and rng.random() < 0.4,
        collisions=rng.random() < 0.2,
        spoof=rng.random() < 0.15,
        tiers=rng.choice([None, None, None, "importance", "utility"]),
    )


class PureCase:
    """Drives one random history through the pure step (or a `Pager`), checking invariants.

    Generating a case records its events (`self.events`); `run(events=...)` replays them,
    which is how `shrink` finds a minimal failing history.
    """

    def __init__(self, seed: int, params: PureParams, report: Report, *, verbose: bool = False) -> None:
        self.seed, self.p, self.report, self.verbose = seed, params, report, verbose
        self.rng = random.Random(seed)
        self.thread = f"thread-{seed}"
        self.words = Words(self.rng, f"zt{seed}x", nul=False)
        self.count = (lambda m: 1) if params.counter == "len" else COUNTER.count_message
        self.msgs: list[BaseMessage] = []  # replace: the state's messages; view: the history
        self.value: dict = {}
        self.ref: list[BaseMessage] = []  # the full history (unpaged), by add_messages
        self.pages: dict = {}
        self.nodes: dict = {}
        self.page_digests: dict[str, str] = {}
        self.node_digests: dict[str, str] = {}
        self.collided: set[str] = set()
        self.pending_user: list[BaseMessage] = []
        self.snapshots: list[tuple] = []
        self.abandoned: set[str] = set()
        self.other_ids: list[str] = []
        self.other_tag = f"zo{seed}x"
        self.n_ids = 0
        self.trace: list[str] = []
        self.events: list[tuple] = []
        self.flags: set[str] = (
            set()
        )  # what happened before a failure: spoof, reused-id, remove, remove-all, ...
        self.failed: Failure | None = None
        self.store = None
        if params.backend == "store":
            self.store = FaultInjectingStore(
                InMemoryStore(), p=params.fail_rate, seed=seed, landed=0.5, error=InjectedStoreError
            )
            self.pager = Pager(PagingConfig(**self.config_options()), PageStore(self.store))
            self.oracle_store = PageStore(self.store.store)  # reads for the oracle never fail

    def config_options(self) -> dict:
        p = self.p
        options = {
            "max_tokens": p.max_tokens,
            "boundary": p.boundary,
            "policy": p.policy,
            "low_water_tokens": p.low_water,
            "bookmark_share": p.bookmark_share,
            "large_result_share": p.large_result_share,
            "mode": p.mode,
            "tiers": p.tiers,
        }
        if p.counter == "len":
            options["token_counter"] = len
        return options

    # -- plumbing --
    def fail(self, invariant: str, detail: str, error: BaseException | None = None) -> None:
        if self.flags:
            invariant += f" [{','.join(sorted(self.flags))}]"
        self.report.fail(invariant, detail, self.p.describe(), self.seed, error)
        self.failed = self.report.failures[-1]
        if self.verbose:
            print(f"FAILED {invariant}: {detail}\ntrace:", *self.trace[-40:], sep="\n  ")
            print("state:", [m.id for m in self.msgs])
            st = PagingState.from_value(self.value)
            print("resident:", {k: (v.ids, v.order) for k, v in st.pages.items()})
            print(
                "shown:",
                {k: v.anchor for k, v in st.shown.items()},
                "clusters:",
                {k: v.anchor for k, v in st.clusters.items()},
            )
            print("order:", st.order)
            try:
                print("rebuilt:", [m.id for m in self.rebuild()])
            except Exception as e:  # noqa: BLE001
                print("rebuild raised", e)
            print("ref:    ", [m.id for m in self.ref])
        raise FuzzFailure(invariant)

    def log(self, text: str) -> None:
        self.trace.append(text)

    def check(self, name: str) -> None:
        self.report.checks[name] += 1

    def new_id(self, prefix: str) -> str:
        self.n_ids += 1
        return f"{prefix}{self.n_ids}"

    def get_page(self, page_id):
        if self.store is None:
            return self.pages.get(page_id)
        return self.oracle_store.get(self.thread, page_id)

    def get_node(self, cluster_id):
        if self.store is None:
            return self.nodes.get(cluster_id)
        return self.oracle_store.get_cluster(self.thread, cluster_id)

    def rebuild(self, msgs=None, value=None) -> list[BaseMessage]:
        return reconstruct_history(
            self.msgs if msgs is None else msgs,
            self.get_page,
            COUNTER,
            clusters=self.get_node,
            state=self.value if value is None else value,
        )

    # -- events: generated once, replayed when shrinking --
    def emit(self, event: tuple) -> None:
        self.events.append(event)
        self.apply(event)

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

    def run(self, events: list[tuple] | None = None) -> None:
        try:
            if events is not None:
                for event in events:
                    self.events.append(event)
                    self.apply(event)
            else:
                self.generate()
            self.final_checks()
        except FuzzFailure:
            pass
        except Exception as error:  # noqa: BLE001
            self.report.fail(
                "fuzzer or library raised",
                f"{type(error).__name__}: {error}",
                self.p.describe(),
                self.seed,
                error,
            )
            self.failed = self.report.failures[-1]

    # -- generation --
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
        rng, p = self.rng, self.p
        if rng.random() < 0.05 and self.msgs:
            ours = [m for m in self.msgs if m.id and not library_mark(m) and not isinstance(m, ToolMessage)]
            if ours:
                victim = rng.choice(ours)
                self.emit(("remove", victim.id))
                calls = set(tool_call_ids(victim))
                for m in self.msgs:
                    if isinstance(m, ToolMessage) and m.tool_call_id in calls:
                        self.emit(("remove", m.id))
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
        if p.forks and rng.random() < 0.06 and len(self.snapshots) > 2:
            self.emit(("fork", rng.randrange(len(self.snapshots) - 1)))
        self.emit(("user", self.gen_user()))
        self.emit(("step",))
        rounds = 0
        r = rng.random()
        if r < 0.35:
            rounds = rng.randint(1, 3)
        elif r < 0.37:
            rounds = 50  # a long tool loop in one user turn
        for _ in range(rounds):
            if not self.gen_tool_round():
                return  # a call left unanswered: the next user turn comes on top of it
            self.emit(("step",))
        self.emit(("add", [self.words.ai(id=self.new_id("a"))]))

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
            resident = {x.id for x in self.msgs}
            evicted = [m.id for m in self.ref if m.id and m.id not in resident]
            anchors = [m.id for m in self.msgs if library_mark(m)]
            pool = evicted + anchors if self.p.mode == "replace" else [m.id for m in self.ref[:-4] if m.id]
            if pool:
                ident = rng.choice(pool)
        spoof = None
        if self.p.spoof and rng.random() < 0.04:
            spoof = rng.choice(
                [
                    {"bookmark": "p1"},
                    {"bookmark": f"p{rng.randint(1, 6)}"},
                    {"cluster": "c1"},
                    {"paged_result": "p1"},
                    {"shrunk": True},
                    {"bookmark": 3},
                ]
            )
        words = None
        if rng.random() < 0.003:
            words = 40_000  # ~200 KB
        elif rng.random() < 0.03:
            words = rng.randint(600, 2500)
        return self.words.user(
            id=ident, pinned=rng.random() < 0.04, spoof=spoof, words=words, bait=rng.random() < 0.1
        )

    def gen_tool_round(self) -> bool:
        """The model calls tools (parallel, malformed, recall, large results); results come back."""
        rng = self.rng
        calls, invalid = [], []
        for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
            cid = self.new_id("call")
            kind = rng.random()
            if kind < 0.15 and self.store is not None:
                calls.append({"name": "recall", "args": self.gen_recall_args(), "id": cid})
            elif kind < 0.25:
                calls.append({"name": "big_report", "args": {"topic": rng.choice(VOCAB)}, "id": cid})
            else:
                calls.append({"name": "lookup", "args": {"q": self.words.text(rng.randint(0, 6))}, "id": cid})
        if rng.random() < 0.12:
            cut = (
                self.words.text(rng.randint(200, 1500)) if rng.random() < 0.3 else "trunc"
            )  # output limit hit
            invalid.append(
                {
                    "name": "lookup",
                    "args": '{"q": "' + cut,
                    "id": self.new_id("bad"),
                    "error": "malformed JSON",
                    "type": "invalid_tool_call",
                }
            )
        ai = self.words.ai(calls=calls, invalid=invalid, id=self.new_id("t"), words=rng.choice([0, 0, 5]))
        self.emit(("add", [ai]))
        if rng.random() < 0.03:
            return False  # unanswered: a crashed tool
        results: list[Any] = []
        for bad in invalid:
            results.append(
                ToolMessage(
                    f"Tool call lookup with id {bad['id']} could not be executed - arguments "
                    "were malformed or truncated.",
                    tool_call_id=bad["id"],
                    name="lookup",
                    status="error",
                    id=self.new_id("err"),
                )
            )
        order = list(calls)
        if len(order) > 1 and rng.random() < 0.3:
            rng.shuffle(order)
        for call in order:
            if call["name"] == "recall":
                results.append(("recall", call, self.new_id("recall-")))
            elif call["name"] == "big_report":
                tokens = rng.choice([300, 1200, 5000])
                results.append(
                    ToolMessage(
                        self.words.big_text(tokens),
                        tool_call_id=call["id"],
                        name="big_report",
                        id=self.new_id("r"),
                        additional_kwargs={"fz": f"big{tokens}"},
                    )
                )
            else:
                results.append(
                    ToolMessage(
                        self.words.content(self.words.size(), bait=rng.random() < 0.2),
                        tool_call_id=call["id"],
                        name="lookup",
                        id=self.new_id("r"),
                    )
                )
        self.emit(("tools", results))
        return True

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

    # -- event handlers --
    def do_add(self, messages: list[BaseMessage]) -> None:
        self.log(
            "add "
            + ", ".join(
                f"{m.type}:{m.id}"
                + (f"(calls {tool_call_ids(m)})" if tool_call_ids(m) else "")
                + (f"->{m.tool_call_id}" if isinstance(m, ToolMessage) else "")
                + (f"[{self.count(m)}t]")
                for m in messages
            )
        )
        resident = {m.id for m in self.msgs if not library_mark(m)}  # a bookmark's id is an evicted message's
        for m in messages:
            if (
                METADATA_KEY in m.additional_kwargs
                and not isinstance(m, ToolMessage)
                or (isinstance(m, ToolMessage) and library_mark(m))
            ):
                self.flags.add("spoof")
            if m.id and m.id not in resident and any(x.id == m.id for x in self.ref):
                self.collided.add(m.id)
                self.flags.add("reused-id")
            if m.id and self.p.mode == "view" and any(x.id == m.id for x in self.ref):
                self.collided.add(m.id)
                self.flags.add("reused-id")
        self.msgs = add_messages(self.msgs, messages)
        self.ref = add_messages(self.ref, messages)

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

    def check_recall(self, content: str, args: dict, branch: PagingState, cap: int) -> None:
        """`cap`: the room the pager gave the result (the budget net of what is protected, within
        `recall_max_tokens`; `recall_max_tokens` or half the budget before any step measured)."""
        self.check("recall within cap")
        if COUNTER.count_text(content) > cap:
            self.fail(
                "recall over its size cap"
                + (
                    " (the 'size cap reached' notice is not counted)"
                    if "[recall size cap of" in content
                    else ""
                ),
                f"{COUNTER.count_text(content)} tokens > cap {cap}; args={str(args)[:120]}; "
                f"content={content[:200]!r}...{content[-300:]!r}",
            )
        self.check("recall delimited")
        problems = recall_structure_problems(content)
        if problems:
            echo = "Nothing paged out matches the query" in content[:400]
            self.fail(
                "recall text not delimited" + (" (the note echoes the query)" if echo else ""), problems[0]
            )
        if self.other_ids:
            self.check("no read of another thread")
            if self.other_tag in content:
                self.fail("recall read another thread's pages", f"args={args} content={content[:300]!r}")
        asked = args.get("page_ids") if isinstance(args.get("page_ids"), list) else []
        for pid in asked:
            if not isinstance(pid, str) or not re.fullmatch(r"p[1-9]\d*", pid):
                continue
            if not branch.owns("p", page_number(pid)):
                self.check("foreign id is no such page")
                if shows_page(content, pid):
                    self.fail("recall returned a page this branch does not own", f"{pid}: {content[:300]!r}")
                if (
                    pid in self.abandoned
                    and "No such page" not in content
                    and not content.startswith("recall failed")
                ):
                    self.fail("abandoned branch page visible", f"{pid}: {content[:300]!r}")

    def do_remove(self, message_id: str) -> None:
        if not any(m.id == message_id for m in self.msgs):
            return
        self.msgs = add_messages(self.msgs, [RemoveMessage(id=message_id)])
        if any(m.id == message_id for m in self.ref):
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

    # -- the model call --
    def do_step(self) -> None:
        p = self.p
        self.report.steps["pure"] += 1
        call = GraphCall.prepare(self.msgs, self.value, p.mode, self.thread)
        view = call.view
        view_copy, value_copy = copy.deepcopy(view), copy.deepcopy(self.value)
        resident_before = set(PagingState.from_value(self.value).pages)
        t0 = time.perf_counter()
        try:
            if self.store is None:
                options = {
                    "boundary": p.boundary,
                    "policy": p.policy,
                    "low_water_tokens": p.low_water,
                    "bookmark_share": p.bookmark_share,
                    "large_result_share": p.large_result_share,
                    "text_counter": COUNTER,
                }
                if p.counter == "len":
                    options["token_counter"] = len
                result = page_messages(view, max_tokens=p.max_tokens, state=self.value, **options)
            else:
                result = self.pager.step(view, self.value, self.thread)
        except INJECTED:
            self.report.notes["pure steps failed by an injected store error"] += 1
            self.flags.add("store-error")
            self.log("step failed: injected store error")
            return
        except Exception as error:  # noqa: BLE001
            self.fail("paging step raised", f"{type(error).__name__}: {error}", error)
        elapsed = time.perf_counter() - t0
        self.log(
            f"step {len(view)} msgs: {result.tokens_before}->{result.tokens} tokens (budget {p.max_tokens}) "
            f"formed "
            f"{result.formed} evicted {result.evicted} folded {result.folded} over={result.over_budget} "
            f"updates {[(type(u).__name__[0], u.id) for u in result.updates]}"
        )
        if elapsed > 30:
            self.fail(
                "paging step slow",
                f"{elapsed:.1f}s for a view of {len(view)} messages, "
                f"{sum(len(str(m.content)) for m in view)} chars",
            )
        self.check("inputs not mutated")
        if view != view_copy or self.value != value_copy:
            self.fail("step mutated its inputs", "view or state changed")
        self.check_result(result, view, resident_before)
        if self.store is None:
            for page in result.pages:
                self.pages[page.id] = page
            for node in result.nodes:
                self.nodes[node.id] = node
        update = call.update(result)
        if "paging" in update:
            self.value = paging_reducer(self.value, update["paging"])
        if "messages" in update:
            self.msgs = add_messages(self.msgs, update["messages"])
        shown = [*result.view, *(m for page in result.pages for m in page.messages)]
        if p.mode == "replace" and any(library_mark(m).get("repair") for m in shown):
            self.ref = repair_unanswered(self.ref) or self.ref  # answered calls are history now
        if p.mode == "replace":
            self.check("updates turn the state into the view")
            if self.msgs != result.view:
                self.fail(
                    "updates do not turn the state into the view", same_messages(self.msgs, result.view) or ""
                )
        self.pending_user = []
        self.check_lossless()
        self.snapshots.append((list(self.msgs), copy.deepcopy(self.value), list(self.ref), self.rebuild()))
        if self.store is not None and self.store.rewrites:
            self.fail("page record rewritten with other content", "; ".join(self.store.rewrites[:3]))

    def check_result(self, result, view, resident_before) -> None:
        p, count = self.p, self.count
        budget = p.max_tokens
        tokens = sum(count(m) for m in result.view)
        self.check("tokens counted right")
        if tokens != result.tokens:
            self.fail("result.tokens is wrong", f"result.tokens={result.tokens} recount={tokens}")
        self.check("valid chat")
        if not chat_problems(self.ref):
            try:
                assert_valid_chat(result.view)  # tests/harness: the providers' tool-pair rules
            except AssertionError as error:
                self.fail(
                    "prompt is not a valid chat",
                    f"{error} ({chat_problems(result.view)[:1]}, {p.boundary}/{p.policy})",
                )
        self.check("within budget")
        if tokens > budget and not result.over_budget:
            self.fail("over budget with over_budget=False", f"{tokens} > {budget}")
        if result.over_budget:
            self.report.notes["pure over_budget steps"] += 1
            self.check("over budget explained")
            generous = generous_protected(
                result.view,
                count,
                set(PagingState.from_value(self.value).recalled),
                {s.anchor for s in result.state.shown.values()}
                | {c.anchor for c in result.state.clusters.values()},
            )
            if generous <= (p.low_water or int(budget * 0.75)) and tokens - generous > 0.25 * budget:
                self.fail(
                    "over budget not explained by what is protected" + stuck_label(result.state, count),
                    f"tokens={tokens} budget={budget} protected(generous)={generous} "
                    f"reported protected={result.protected_tokens} "
                    f"library={library_tokens(result.view, count)}",
                )
        if result.tokens_before > budget and (result.evicted or result.folded):
            self.check("paging never grows the context")
            if result.tokens > result.tokens_before:
                before = {m.id: m for m in view}
                stubs = [
                    m
                    for m in result.view
                    if "paged_result" in library_mark(m)
                    and m.id in before
                    and "paged_result" not in library_mark(before[m.id])
                    and count(m) > count(before[m.id])
                ]
                self.fail(
                    "paging made the context bigger"
                    + (
                        " (a tool result stub longer than the result)"
                        if stubs
                        else ""
                        if result.evicted
                        else " (folding alone: a cluster bookmark grew)"
                    ),
                    f"{result.tokens_before} -> {result.tokens}",
                )
        # the model sees the user's new message
        in_view = {(m.id, m.type, repr(m.content)) for m in result.view}
        for user in self.pending_user:
            self.check("new user message shown")
            if (user.id, user.type, repr(user.content)) not in in_view:
                self.fail("new user message hidden from the model", f"id={user.id} mode={p.mode}")
        # large tool results become stubs naming the tool and args
        if p.large_result_share is not None:
            limit = max(1, int(p.max_tokens * p.large_result_share))
            by_id = {m.id: m for m in result.view}
            for m in view:
                if (
                    isinstance(m, ToolMessage)
                    and m.id
                    and not library_mark(m)
                    and count(m) > limit
                    and not (isinstance(m.artifact, dict) and METADATA_KEY in m.artifact)
                ):
                    self.check("large result paged on arrival")
                    shown = by_id.get(m.id)
                    call = next(
                        (
                            c
                            for x in view
                            for c in getattr(x, "tool_calls", None) or []
                            if c.get("id") == m.tool_call_id
                        ),
                        None,
                    )
                    if count(tool_result_stub("p999999", m, call, count(m))) >= count(m):
                        continue  # a stub no shorter than the result is never written (B6)
                    if shown is not None and shown.content == m.content:
                        self.fail("large tool result not paged", f"{count(m)} tokens > {limit}, id {m.id}")
                    if shown is not None and m.name and m.name not in str(shown.content):
                        self.fail("tool result stub does not name the tool", str(shown.content)[:200])
                    if shown is not None and call is not None:
                        self.check("tool result stub names the args")
                        args = json.dumps(call["args"], sort_keys=True, default=str, ensure_ascii=False)[:40]
                        if args not in str(shown.content):
                            self.fail(
                                "tool result stub does not name the args",
                                f"{args!r} not in {shown.content!r}",
                            )
        # ids
        for page in result.pages:
            self.check("page ids never reused")
            old = self.page_digests.get(page.id)
            if old is not None and old != page.digest and page.id not in resident_before:
                self.fail("page id reused", f"{page.id}: {old} -> {page.digest}")
            if old is not None and old != page.digest:
                self.report.notes["resident page re-stored after an edit"] += 1
            self.page_digests[page.id] = page.digest
        for node in result.nodes:
            self.check("cluster ids never reused")
            old = self.node_digests.get(node.id)
            if old is not None and old != node.digest:
                self.fail("cluster id reused", f"{node.id}")
            self.node_digests[node.id] = node.digest

    def check_lossless(self) -> None:
        self.check("lossless")
        rebuilt = self.rebuild()
        if self.collided:
            # an id reused by a new message: the unpaged reference replaced the old message in place;
            # require that nothing else was lost and the new version is there
            self.check("lossless with reused ids")
            want = [m for m in self.ref if m.id not in self.collided]
            got = [m for m in rebuilt if m.id not in self.collided]
            diff = same_messages(got, want)
            if diff:
                self.fail("history lost after an id was reused" + self.diagnose_loss(), diff)
            for m in self.ref:
                if m.id in self.collided and m not in rebuilt:
                    self.fail("history lost the new message with a reused id", f"{m.id}")
            return
        diff = same_messages(rebuilt, self.ref)
        if diff:
            self.fail("not lossless (pure)" + (self.diagnose_loss() or order_label(rebuilt, self.ref)), diff)

    def diagnose_loss(self) -> str:
        """Name the known cause of a loss, when it is one."""
        st = PagingState.from_value(self.value)
        ids = {m.id for m in self.msgs}
        if any(s.anchor not in ids for s in st.shown.values()):
            return " (a page evicted without a bookmark: its anchor left the context)"
        return ""

    def final_checks(self) -> None:
        self.check("old snapshots rebuild the same")
        for msgs, value, _, rebuilt in self.snapshots[:: max(1, len(self.snapshots) // 8)]:
            again = self.rebuild(msgs, value)
            diff = same_messages(again, rebuilt)
            if diff:
                self.fail("an older checkpoint no longer rebuilds the same history", diff)
