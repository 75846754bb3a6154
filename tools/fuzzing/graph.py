"""Graph cases: random turns through compiled `create_agent` and `StateGraph` graphs (the driver)."""

from __future__ import annotations

import asyncio
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingState, reconstruct_history
from langmem_paging.core.messages import METADATA_KEY, is_pinned
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import FaultInjectingStore

from .graph_build import GraphBuild, scenario_tools
from .graph_checks import GraphChecks
from .graph_generate import GraphGeneration
from .oracles import kept_by_remove_all, same_messages
from .report import INJECTED, FuzzFailure, InjectedStoreError, Report
from .stores import _sqlite_store
from .vocabulary import BOUNDARIES, COUNTER, POLICIES, Words

__all__ = ["GraphCase", "GraphParams", "graph_params", "scenario_tools"]

# -- the graph driver --------------------------------------------------------------------------


@dataclass
class GraphParams:
    """One graph case."""

    kind: str  # "middleware" or "node"
    mode: str
    sync: bool
    boundary: str
    policy: str
    max_tokens: int
    low_water: int | None
    bookmark_share: float
    large_result_share: float | None
    fail_rate: float
    on_store_error: str
    backend: str  # memory | sqlite
    turns: int
    threads: int
    forks: bool
    concurrent: bool
    system_prompt: bool

    def describe(self) -> str:
        return "graph " + " ".join(f"{k}={v}" for k, v in self.__dict__.items())


def graph_params(rng: random.Random) -> GraphParams:
    kind = rng.choice(["middleware", "middleware", "node"])
    sync = rng.random() < 0.5
    if kind == "middleware":
        max_tokens = rng.choice([420, 500, 700, 1000, 1600, 3000])
    else:
        max_tokens = rng.choice([60, 150, 300, 600, 1200])
    return GraphParams(
        kind=kind,
        mode=rng.choice(["replace", "replace", "view"]),
        sync=sync,
        boundary=rng.choice(BOUNDARIES),
        policy=rng.choice(POLICIES),
        max_tokens=max_tokens,
        low_water=rng.choice([None, None, max(1, int(max_tokens * rng.uniform(0.3, 1.0)))]),
        bookmark_share=rng.choice([0.2, 0.2, 0.05, 0.5]),
        large_result_share=rng.choice([0.5, 0.5, 0.2, None]),
        fail_rate=rng.choice([0.0, 0.0, 0.0, 0.1, 0.3]),
        on_store_error=rng.choice(["raise", "raise", "continue"]),
        backend=rng.choice(["memory", "memory", "memory", "sqlite"]),
        turns=rng.choice([4, 10, 20, 35]),
        threads=rng.choice([1, 1, 2, 3]),
        forks=rng.random() < 0.4,
        concurrent=not sync and rng.random() < 0.3,
        system_prompt=rng.random() < 0.6,
    )


class GraphCase(GraphBuild, GraphGeneration, GraphChecks):
    """Drives random turns through a compiled graph (middleware or node), checking invariants."""

    def __init__(self, seed: int, params: GraphParams, report: Report, *, verbose: bool = False) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        from langmem_paging.testing import ScriptedChatModel

        self.seed, self.p, self.report, self.verbose = seed, params, report, verbose
        self.rng = random.Random(seed)
        inner = InMemoryStore() if params.backend == "memory" else _sqlite_store()
        self.store = FaultInjectingStore(
            inner, p=params.fail_rate, seed=seed, landed=0.5, error=InjectedStoreError
        )
        self.oracle = PageStore(inner)
        self.plan: list[Callable[[list[BaseMessage]], AIMessage]] = []
        self.model = ScriptedChatModel(responses=[self.respond] * 100_000)
        self.results: list[tuple[str, Any]] = []  # (thread, PagingResult or "error") per paging step
        self.recalls: list[tuple] = []
        self.problems: list[tuple[str, str]] = []
        self.returned: list[AIMessage] = []
        self.current_thread = ""
        self.words: dict[str, Words] = {}
        self.snapshots: dict[str, dict[str, list[BaseMessage]]] = {}
        self.heads: dict[str, str | None] = {}
        self.dangling: set[str] = set()
        self.abandoned: dict[str, set[str]] = {}
        self.tools = scenario_tools()
        self.trace: list[str] = []
        self.flags: set[str] = set()
        self.recalled_in: dict[int, set[str]] = {}
        self.build(InMemorySaver())

    # -- plumbing --
    def fail(self, invariant: str, detail: str, error: BaseException | None = None) -> None:
        if self.flags:
            invariant += f" [{','.join(sorted(self.flags))}]"
        self.report.fail(invariant, detail, self.p.describe(), self.seed, error)
        if self.verbose:
            print(f"FAILED {invariant}: {detail}\ntrace:", *self.trace[-40:], sep="\n  ")
        raise FuzzFailure(invariant)

    def log(self, text: str) -> None:
        self.trace.append(text)

    def check(self, name: str) -> None:
        self.report.checks[name] += 1

    def config(self, thread: str, checkpoint_id: str | None = None) -> dict:
        configurable = {"thread_id": thread, "checkpoint_ns": ""}
        if checkpoint_id:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    def invoke(self, inputs, config):
        if self.p.sync:
            return self.graph.invoke(inputs, config)
        return asyncio.run(self.graph.ainvoke(inputs, config))

    def state_of(self, thread: str, checkpoint_id: str | None = None):
        return self.graph.get_state(self.config(thread, checkpoint_id))

    def rebuild(self, thread: str, values: dict) -> list[BaseMessage]:
        return reconstruct_history(
            values.get("messages", []),
            lambda pid: self.oracle.get(thread, pid),
            COUNTER,
            clusters=lambda cid: self.oracle.get_cluster(thread, cid),
            state=values.get("paging"),
        )

    # -- the scripted model --
    def respond(self, prompt: list[BaseMessage]) -> AIMessage:
        """Check the prompt, then answer with the next planned message."""
        try:
            self.check_prompt(prompt)
        except FuzzFailure:
            self.problems.append(("recorded", ""))
        planned = self.plan.pop(0) if self.plan else None
        message = (
            planned(prompt)
            if planned is not None
            else self.words[self.current_thread].ai(words=self.rng.randint(0, 12))
        )
        self.returned.append(message)
        return message

    # -- a turn --

    def run(self) -> None:
        p = self.p
        threads = [f"g{self.seed}-{k}" for k in range(p.threads)]
        for k, thread in enumerate(threads):
            self.words[thread] = Words(self.rng, f"zt{self.seed}t{k}x")
            self.snapshots[thread] = {}
            self.heads[thread] = None
        try:
            for _turn in range(p.turns):
                self.report.turns[f"graph-{p.kind}"] += 1
                thread = self.rng.choice(threads)
                r = self.rng.random()
                if p.forks and r < 0.1 and len(self.snapshots[thread]) > 2:
                    self.time_travel(thread)
                elif p.concurrent and r < 0.18:
                    self.concurrent(thread)
                else:
                    self.turn(thread)
            for thread in threads:
                self.final_checks(thread)
        except FuzzFailure:
            pass
        except Exception as error:  # noqa: BLE001
            self.report.fail(
                "fuzzer or library raised (graph)",
                f"{type(error).__name__}: {error}",
                self.p.describe(),
                self.seed,
                error,
            )

    def turn(self, thread: str, checkpoint_id: str | None = None) -> None:
        before = self.state_of(thread, checkpoint_id) if checkpoint_id else self.state_of(thread)
        values = before.values
        history = self.rebuild(thread, values) if values else []
        # after a failed run, get_state shows the finished tasks' pending writes, which the next run does
        # not have: removing one of those messages would make LangGraph raise, so remove nothing then
        inputs, remove_all = self.user_input(thread, {} if before.next else values)
        expected = list(history)
        if remove_all:
            kept = kept_by_remove_all(
                list(inputs[2:-1]),
                history,
                values.get("paging"),
                lambda pid: self.oracle.get(thread, pid),
                lambda cid: self.oracle.get_cluster(thread, cid),
            )
            expected = [inputs[1], *kept]
            self.report.notes["graph REMOVE_ALL_MESSAGES"] += 1
        else:
            for m in inputs[:-1]:
                expected = [x for x in expected if x.id != m.id]
                self.report.notes["graph RemoveMessage"] += 1
        self.run_turn(thread, inputs, expected, checkpoint_id)

    def run_turn(self, thread, inputs, expected, checkpoint_id=None, plan=True):
        """Run the graph on `inputs` (from `checkpoint_id`, else the head), then check the history
        against `expected`."""
        self.current_thread = thread
        if plan:
            self.plan_turn(thread)
        self.returned = []
        self.problems = []
        self.expect_user = inputs[-1]
        self.log(
            f"run {thread}{' from ' + checkpoint_id[-6:] if checkpoint_id else ''}: "
            f"{[(type(m).__name__[0], m.id[-12:]) for m in inputs]}, {len(self.plan)} tool rounds planned"
        )
        self.flag_inputs(inputs)
        error = self.invoke_run(inputs, self.config(thread, checkpoint_id))
        if self.problems:
            raise FuzzFailure("recorded")
        self.log(
            f"  -> {'failed: ' + str(error)[:60] if error else 'ok'}; model answered "
            f"{[m.additional_kwargs.get('fz') for m in self.returned]}"
        )
        self.check_after_run(thread, inputs, expected, error)

    def flag_inputs(self, inputs: list) -> None:
        for m in inputs:
            if isinstance(m, RemoveMessage):
                self.flags.add("remove-all" if m.id == REMOVE_ALL_MESSAGES else "remove")
            elif METADATA_KEY in m.additional_kwargs and not is_pinned(m):
                self.flags.add("spoof")

    def invoke_run(self, inputs: list, config: dict) -> BaseException | None:
        """Invoke the graph; returns the injected store error that failed the run (None: it finished).
        Anything else it raises is a failure."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self.invoke({"messages": inputs}, config)
            except INJECTED as e:
                return self.store_error(e)
            except FuzzFailure:
                raise
            except Exception as e:
                if self.problems:
                    raise FuzzFailure("recorded") from e
                if isinstance(injected_cause(e), INJECTED):
                    return self.store_error(e)
                self.fail("graph run raised", f"{type(e).__name__}: {e}", e)
        return None

    def store_error(self, error: BaseException) -> BaseException:
        self.flags.add("store-error")
        self.report.notes["graph runs failed by an injected store error"] += 1
        return error

    def time_travel(self, thread: str) -> None:
        """Resume from an earlier checkpoint (or edit it with update_state); the abandoned branch's
        pages stay intact and invisible here."""
        checkpoints = list(self.snapshots[thread])
        target = self.rng.choice(checkpoints[:-1])
        head = self.state_of(thread)
        then = self.state_of(thread, target)
        now_state = PagingState.from_value(head.values.get("paging"))
        then_state = PagingState.from_value(then.values.get("paging"))
        abandoned = {
            f"p{n}" for a, b in now_state.spans["p"] for n in range(a, b) if not then_state.owns("p", n)
        }
        self.abandoned.setdefault(thread, set()).update(abandoned)
        self.check("checkpoint rebuilds as before (time travel)")
        again = self.rebuild(thread, then.values)
        diff = same_messages(again, self.snapshots[thread][target])
        if diff:
            self.fail("an older checkpoint no longer rebuilds the same history", diff)
        self.report.notes["graph time travel"] += 1
        self.flags.add("time-travel")
        self.log(f"time travel {thread} to {target[-6:]}")
        if self.rng.random() < 0.3:
            # update_state on the old checkpoint: a new user message, then run from there
            words = self.words[thread]
            edit = words.user(id=f"h-{thread}-{words.marker('e')}")
            try:
                as_node = "model" if self.p.kind == "middleware" else "agent"
                config = self.graph.update_state(then.config, {"messages": [edit]}, as_node=as_node)
            except Exception as error:  # noqa: BLE001
                self.fail("update_state raised", f"{type(error).__name__}: {error}", error)
            self.report.notes["graph update_state forks"] += 1
            new_id = config["configurable"]["checkpoint_id"]
            # update_state writes no paging step: the history is the old one plus the edit
            self.snapshots[thread][new_id] = [*self.snapshots[thread][target], edit]
            target = new_id
        self.turn(thread, checkpoint_id=target)

    def concurrent(self, thread: str) -> None:
        """Two runs at once on one thread (asyncio.gather): LangGraph keeps one lineage; nothing else
        is lost."""
        before = self.state_of(thread)
        history = self.rebuild(thread, before.values) if before.values else []
        words = self.words[thread]
        a = words.user(id=f"h-{thread}-{words.marker('ca')}")
        b = words.user(id=f"h-{thread}-{words.marker('cb')}")
        self.current_thread = thread
        self.plan = []
        self.returned = []
        self.problems = []
        self.expect_user = None
        self.report.notes["graph concurrent double submits"] += 1
        self.flags.add("concurrent")
        self.log(f"concurrent {a.id} and {b.id}")

        async def both():
            return await asyncio.gather(
                self.graph.ainvoke({"messages": [a]}, self.config(thread)),
                self.graph.ainvoke({"messages": [b]}, self.config(thread)),
                return_exceptions=True,
            )

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcomes = asyncio.run(both())
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, INJECTED):
                if isinstance(outcome, FuzzFailure) or self.problems:
                    raise FuzzFailure("recorded")
                self.fail("concurrent run raised", f"{type(outcome).__name__}: {outcome}", outcome)
        if self.problems:
            raise FuzzFailure("recorded")
        after = self.state_of(thread)
        new = self.rebuild(thread, after.values)
        self.check("concurrent runs keep a whole lineage")
        diff = same_messages(new[: len(history)], history)
        if diff:
            self.fail("not lossless after concurrent runs", diff)
        kept = [m.id for m in new[len(history) :] if isinstance(m, HumanMessage)]
        if not (set(kept) & {a.id, b.id}) and not any(isinstance(o, BaseException) for o in outcomes):
            self.fail("concurrent runs lost both user turns", f"{kept}")
        self.snapshots[thread][after.config["configurable"]["checkpoint_id"]] = new
        # the next turn must hold the budget (checked in check_prompt)
        self.turn(thread)


def injected_cause(error: BaseException) -> BaseException:
    """The first injected store error in `error`'s chain of causes (else the chain's last link)."""
    cause = error
    while cause.__cause__ is not None or cause.__context__ is not None:
        if isinstance(cause, INJECTED):
            break
        cause = cause.__cause__ or cause.__context__
    return cause
