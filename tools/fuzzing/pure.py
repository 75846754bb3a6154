"""Pure cases: random histories through `page_messages` and a `Pager` over a page store."""

from __future__ import annotations

import copy
import random
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    PagingConfig,
    PagingState,
    page_messages,
    reconstruct_history,
)
from langmem_paging.core.messages import library_mark
from langmem_paging.core.state import paging_reducer
from langmem_paging.integrations.graph_state import GraphCall
from langmem_paging.runtime.pager import Pager
from langmem_paging.step.repair import repair_unanswered
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import FaultInjectingStore

from .oracles import same_messages
from .pure_checks import PureChecks
from .pure_events import PureEvents
from .pure_generate import PureGeneration
from .report import INJECTED, Failure, FuzzFailure, InjectedStoreError, Report
from .vocabulary import BOUNDARIES, COUNTER, POLICIES, Words

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


class PureCase(PureGeneration, PureEvents, PureChecks):
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
        self.edits_in_place: set[str] = set()  # reused ids that edit an old message in place
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

    # -- events: generated once (`PureGeneration`), applied by `PureEvents`, replayed when shrinking --
    def emit(self, event: tuple) -> None:
        self.events.append(event)
        self.apply(event)

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

    # -- the model call --
    def do_step(self) -> None:
        """One model call: page the view, check the result, apply the update like the graph does."""
        self.report.steps["pure"] += 1
        call = GraphCall.prepare(self.msgs, self.value, self.p.mode, self.thread)
        view = call.view
        view_copy, value_copy = copy.deepcopy(view), copy.deepcopy(self.value)
        resident_before = set(PagingState.from_value(self.value).pages)
        result = self.timed_step(view)
        if result is None:
            return
        self.check("inputs not mutated")
        if view != view_copy or self.value != value_copy:
            self.fail("step mutated its inputs", "view or state changed")
        self.check_result(result, view, resident_before)
        self.apply_update(call, result)
        self.pending_user = []
        self.check_lossless()
        self.snapshots.append((list(self.msgs), copy.deepcopy(self.value), list(self.ref), self.rebuild()))
        if self.store is not None and self.store.rewrites:
            self.fail("page record rewritten with other content", "; ".join(self.store.rewrites[:3]))

    def timed_step(self, view: list[BaseMessage]) -> Any:
        """The paging step's result, or None when an injected store error failed it (a slow step fails)."""
        p = self.p
        t0 = time.perf_counter()
        try:
            result = self.paging_step(view)
        except INJECTED:
            self.report.notes["pure steps failed by an injected store error"] += 1
            self.flags.add("store-error")
            self.log("step failed: injected store error")
            return None
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
        return result

    def paging_step(self, view: list[BaseMessage]) -> Any:
        """`page_messages` (local backend) or the `Pager` over the page store."""
        p = self.p
        if self.store is not None:
            return self.pager.step(view, self.value, self.thread)
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
        return page_messages(view, max_tokens=p.max_tokens, state=self.value, **options)

    def apply_update(self, call: GraphCall, result: Any) -> None:
        """What the graph does with a step's update (the local backend keeps the records itself)."""
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
        if self.p.mode != "replace":
            return
        shown = [*result.view, *(m for page in result.pages for m in page.messages)]
        if any(library_mark(m).get("repair") for m in shown):
            self.ref = repair_unanswered(self.ref) or self.ref  # answered calls are history now
        self.check("updates turn the state into the view")
        if self.msgs != result.view:
            self.fail(
                "updates do not turn the state into the view", same_messages(self.msgs, result.view) or ""
            )
