"""Graph cases: random turns through compiled `create_agent` and `StateGraph` graphs."""

from __future__ import annotations

import asyncio
import random
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    PagingState,
    TokenCounter,
    reconstruct_history,
)
from langmem_paging.core.messages import METADATA_KEY, is_pinned, is_user_turn, library_mark, tool_call_ids
from langmem_paging.core.records import page_number
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import FaultInjectingStore

from .oracles import (
    chat_problems,
    generous_protected,
    in_history_order,
    order_label,
    recall_structure_problems,
    same_messages,
    shows_page,
    stuck_label,
    tail_of,
    without_patches,
)
from .report import INJECTED, FuzzFailure, InjectedStoreError, Report
from .stores import _sqlite_store
from .vocabulary import BOUNDARIES, COUNTER, POLICIES, VOCAB, Words

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


def scenario_tools():
    from langchain_core.tools import tool

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        rng = random.Random(q)
        return f"lookup {q!s}: " + " ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 40)))

    @tool
    def big_report(topic: str, tokens: int = 5000) -> str:
        """A long report."""
        rng = random.Random(topic)
        return f"report on {topic}: " + " ".join(
            rng.choice(VOCAB) for _ in range(int(min(tokens, 8000) / 1.3))
        )

    return [lookup, big_report]


class GraphCase:
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

    def build(self, saver) -> None:
        p = self.p
        options = {
            "max_tokens": p.max_tokens,
            "boundary": p.boundary,
            "policy": p.policy,
            "mode": p.mode,
            "low_water_tokens": p.low_water,
            "bookmark_share": p.bookmark_share,
            "large_result_share": p.large_result_share,
        }
        if p.kind == "middleware":
            from langchain.agents import create_agent

            from langmem_paging import PagingMiddleware

            store_arg = self.store if self.rng.random() < 0.5 else None
            self.paging = PagingMiddleware(store=store_arg, on_store_error=p.on_store_error, **options)
            self.all_tools = [*self.tools, *self.paging.tools]
            self.graph = create_agent(
                self.model,
                tools=self.tools,
                middleware=[self.paging],
                checkpointer=saver,
                store=self.store,
                system_prompt=("You are a careful assistant. " * 8 if p.system_prompt else None),
            )
            # a fresh counter: TokenCounter caches tool counts by id(tool), and ids recycle across cases (B13)
            self.tool_tokens = TokenCounter().count_tools(self.all_tools)
            self.overhead = self.tool_tokens + (
                COUNTER.count_message(SystemMessage("You are a careful assistant. " * 8))
                if p.system_prompt
                else 0
            )
        else:
            from langgraph.graph import START, StateGraph
            from langgraph.prebuilt import ToolNode, tools_condition

            from langmem_paging import PagingMessagesState, PagingNode

            view = p.mode == "view"
            paging = PagingNode(
                output_messages_key="llm_input_messages" if view else "messages",
                on_store_error=p.on_store_error,
                **{k: v for k, v in options.items() if k != "mode"},
            )
            self.paging = paging
            self.all_tools = [*self.tools, paging.recall_tool]
            bound = self.model.bind_tools(self.all_tools)

            class ViewState(PagingMessagesState):
                llm_input_messages: list

            def agent(state):
                messages = state["llm_input_messages"] if view else state["messages"]
                return {"messages": [bound.invoke(messages)]}

            async def aagent(state):
                messages = state["llm_input_messages"] if view else state["messages"]
                return {"messages": [await bound.ainvoke(messages)]}

            from langchain_core.runnables import RunnableLambda

            self.graph = (
                StateGraph(ViewState if view else PagingMessagesState)
                .add_node("paging", paging)
                .add_node("agent", RunnableLambda(agent, afunc=aagent))
                .add_node("tools", ToolNode(self.all_tools))
                .add_edge(START, "paging")
                .add_edge("paging", "agent")
                .add_conditional_edges("agent", tools_condition)
                .add_edge("tools", "paging")
                .compile(checkpointer=saver, store=self.store)
            )
            self.overhead = 0
        pager = self.paging.pager
        step, astep, recall, arecall = pager.step, pager.astep, pager.recall, pager.arecall

        def wrapped_step(view, state, thread_id, **kw):
            self.recalled_in[id(view)] = set(PagingState.from_value(state).recalled)
            try:
                result = step(view, state, thread_id, **kw)
            except BaseException:
                self.results.append((thread_id, "error"))
                raise
            self.results.append((thread_id, result))
            result.recalled_in = self.recalled_in.pop(id(view), set())
            self.log_step(thread_id, view, result)
            return result

        async def wrapped_astep(view, state, thread_id, **kw):
            self.recalled_in[id(view)] = set(PagingState.from_value(state).recalled)
            try:
                result = await astep(view, state, thread_id, **kw)
            except BaseException:
                self.results.append((thread_id, "error"))
                raise
            self.results.append((thread_id, result))
            result.recalled_in = self.recalled_in.pop(id(view), set())
            self.log_step(thread_id, view, result)
            return result

        def wrapped_recall(thread_id, state, **kw):
            answer = recall(thread_id, state, **kw)
            self.recalls.append((thread_id, state, kw, answer))
            return answer

        async def wrapped_arecall(thread_id, state, **kw):
            answer = await arecall(thread_id, state, **kw)
            self.recalls.append((thread_id, state, kw, answer))
            return answer

        pager.step, pager.astep, pager.recall, pager.arecall = (
            wrapped_step,
            wrapped_astep,
            wrapped_recall,
            wrapped_arecall,
        )

    def log_step(self, thread_id, view, result) -> None:
        self.log(
            f"  step {thread_id} view {[m.id[-6:] if m.id else None for m in view]}: {result.tokens_before}->"
            f"{result.tokens} formed {result.formed} evicted {result.evicted} folded {result.folded} "
            f"over={result.over_budget} "
            f"updates {[(type(u).__name__[0], (u.id or '')[-6:]) for u in result.updates]}"
        )

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

    def check_prompt(self, prompt: list[BaseMessage]) -> None:
        p = self.p
        self.report.steps[f"graph-{p.kind}"] += 1
        tokens = COUNTER(prompt) + (self.tool_tokens if p.kind == "middleware" else 0)
        result = self.results[-1][1] if self.results else None
        body = [m for m in prompt if not isinstance(m, SystemMessage)] if p.kind == "middleware" else prompt
        for _thread_id, candidate in reversed(self.results):  # concurrent runs interleave their steps
            if candidate != "error" and (candidate.view == body or candidate.view == prompt):
                result = candidate
                break
        fallback = (
            result is not None and result != "error" and result.tokens_before == 0 and result.tokens == 0
        )
        if fallback:
            self.report.notes["graph steps unpaged after a store error (on_store_error=continue)"] += 1
        self.check("valid chat (graph)")
        problems = chat_problems(prompt)
        for problem, calls in problems:
            if calls and calls <= self.dangling:
                self.flags.add("dangling-call")
                self.report.notes["prompt with a call left unanswered by a failed tool run"] += 1
                continue
            self.fail("prompt is not a valid chat (graph)", problem)
        self.check("within budget (graph)")
        if tokens > p.max_tokens and not fallback:
            over = result is not None and result != "error" and result.over_budget
            if not over:
                self.fail(
                    "prompt over budget with over_budget=False",
                    f"{tokens} > {p.max_tokens} (messages {COUNTER(prompt)}, overhead {self.overhead})",
                )
            self.report.notes["graph over_budget prompts"] += 1
            generous = generous_protected(
                [m for m in prompt if not isinstance(m, SystemMessage)],
                COUNTER.count_message,
                getattr(result, "recalled_in", set()),
            )
            budget = p.max_tokens - self.overhead
            if (
                generous <= (p.low_water or budget * 0.75) - self.overhead
                and tokens - generous - self.overhead > 0.25 * budget
            ):
                self.fail(
                    "over budget not explained by what is protected (graph)"
                    + stuck_label(result.state, COUNTER.count_message),
                    f"tokens={tokens} max={p.max_tokens} overhead={self.overhead} protected={generous}",
                )
        newest = [m for m in prompt if is_user_turn(m)]
        self.check("newest user message shown (graph)")
        want = self.expect_user
        if (
            want is not None
            and not fallback
            and not any(m.id == want.id and m.content == want.content and m.type == want.type for m in prompt)
        ):
            label = " (it carries library metadata)" if METADATA_KEY in want.additional_kwargs else ""
            shown = next((m for m in prompt if m.id == want.id), None)
            self.fail(
                "new user message hidden from the model (graph)" + label,
                f"{want.id} not in prompt{' (a bookmark has its id)' if shown is not None else ''}; newest "
                f"shown {newest[-1].id if newest else None}; {len(self.returned)} model calls into the turn",
            )

    # -- a turn --
    def plan_turn(self, thread: str) -> None:
        """What the model will answer this turn: tool rounds, then a final answer."""
        rng = self.rng
        self.plan = []
        r = rng.random()
        rounds = 0 if r < 0.55 else rng.randint(1, 3) if r < 0.97 else 25
        for _ in range(rounds):
            self.plan.append(self.tool_step(thread))

    def tool_step(self, thread: str):
        rng, words = self.rng, self.words[thread]
        specs = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            k = rng.random()
            if k < 0.3:
                specs.append("recall")
            elif k < 0.4:
                specs.append("big")
            else:
                specs.append("lookup")
        invalid = self.p.kind == "middleware" and rng.random() < 0.12

        def make(prompt):
            calls = []
            for spec in specs:
                cid = f"call_{words.marker('c')}_{thread}"
                if spec == "recall":
                    calls.append({"name": "recall", "args": self.recall_args(thread, prompt), "id": cid})
                elif spec == "big":
                    calls.append(
                        {
                            "name": "big_report",
                            "args": {"topic": rng.choice(VOCAB), "tokens": rng.choice([800, 5000])},
                            "id": cid,
                        }
                    )
                else:
                    calls.append({"name": "lookup", "args": {"q": words.text(rng.randint(0, 5))}, "id": cid})
            bad = (
                [
                    {
                        "name": "lookup",
                        "args": '{"q": "trunc',
                        "id": f"bad_{words.marker('b')}_{thread}",
                        "error": "malformed",
                        "type": "invalid_tool_call",
                    }
                ]
                if invalid
                else []
            )
            return words.ai(calls=calls, invalid=bad, words=rng.choice([0, 0, 4]))

        return make

    def recall_args(self, thread: str, prompt: list[BaseMessage]) -> dict:
        rng = self.rng
        seen = sorted({i for m in prompt for i in re.findall(r"\[(p[1-9]\d*|c[1-9]\d*)[:;]", str(m.content))})
        seen += sorted(
            {
                i
                for m in prompt
                for i in re.findall(r"\|p([1-9]\d*)-p([1-9]\d*)\]", str(m.content))
                for i in (f"p{i[0]}",)
            }
        )
        others = [pid for t, ids in self.thread_pages().items() if t != thread for pid in ids]
        pool = (
            seen
            + [f"p{rng.randint(1, 30)}", "c1", "p999"]
            + others[:4]
            + sorted(self.abandoned.get(thread, ()))[:4]
        )
        r = rng.random()
        if r < 0.6:
            return {"page_ids": rng.sample(pool, min(len(pool), rng.randint(1, 3)))}
        if r < 0.85:
            return {"query": self.words[thread].text(rng.randint(1, 4))}
        if r < 0.9:
            return {"query": "x " * 50_000}
        return {"page_ids": [rng.choice(pool)], "part": rng.randint(1, 3)}

    def thread_pages(self) -> dict[str, list[str]]:
        out = {}
        for thread in self.words:
            out[thread] = sorted(
                (k for (ns, k) in self.store.written if ns[1] == thread and ns[2] == "pages"), key=page_number
            )
        return out

    def user_input(self, thread: str, values: dict) -> list:
        rng, words = self.rng, self.words[thread]
        inputs: list = []
        messages = values.get("messages", [])
        remove_all = False
        if messages and rng.random() < 0.05:
            ours = [m for m in messages if not library_mark(m) and not isinstance(m, ToolMessage)]
            if ours:
                victim = rng.choice(ours)
                inputs.append(RemoveMessage(id=victim.id))
                # an app deleting a tool call deletes its results too
                calls = set(tool_call_ids(victim))
                inputs += [
                    RemoveMessage(id=m.id)
                    for m in messages
                    if isinstance(m, ToolMessage) and m.tool_call_id in calls
                ]
        elif messages and rng.random() < 0.03:
            keep = messages[-rng.randint(0, 4) :]
            while keep and isinstance(keep[0], ToolMessage):
                keep = keep[1:]
            inputs += [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                HumanMessage(f"Summary: {words.text(10)}", id=f"sum-{words.marker('s')}"),
                *keep,
            ]
            remove_all = True
        spoof = None
        if rng.random() < 0.04:
            spoof = rng.choice([{"bookmark": "p1"}, {"bookmark": "p2"}, {"cluster": "c1"}])
        size = None
        if rng.random() < 0.03:
            size = rng.randint(500, 1500)
        user = words.user(
            id=f"h-{thread}-{words.marker('h')}",
            pinned=rng.random() < 0.03,
            spoof=spoof,
            words=size,
            bait=rng.random() < 0.1,
        )
        inputs.append(user)
        return inputs, remove_all

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
            keep = list(inputs[2:-1])
            # a kept cluster bookmark stands for pages from several places in the history (some
            # after messages kept beside it): keeping messages never reorders them
            kept = reconstruct_history(
                keep,
                lambda pid: self.oracle.get(thread, pid),
                COUNTER,
                clusters=lambda cid: self.oracle.get_cluster(thread, cid),
            )
            expected = [inputs[1], *in_history_order(kept, history)]
            self.report.notes["graph REMOVE_ALL_MESSAGES"] += 1
        else:
            for m in inputs[:-1]:
                expected = [x for x in expected if x.id != m.id]
                self.report.notes["graph RemoveMessage"] += 1
        self.run_turn(thread, inputs, expected, checkpoint_id)

    def run_turn(self, thread, inputs, expected, checkpoint_id=None, plan=True):
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
        for m in inputs:
            if isinstance(m, RemoveMessage):
                self.flags.add("remove-all" if m.id == REMOVE_ALL_MESSAGES else "remove")
            elif METADATA_KEY in m.additional_kwargs and not is_pinned(m):
                self.flags.add("spoof")
        error = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self.invoke({"messages": inputs}, self.config(thread, checkpoint_id))
            except INJECTED as e:
                error = e
                self.flags.add("store-error")
                self.report.notes["graph runs failed by an injected store error"] += 1
            except FuzzFailure:
                raise
            except Exception as e:
                if self.problems:
                    raise FuzzFailure("recorded") from e
                cause = e
                while cause.__cause__ is not None or cause.__context__ is not None:
                    if isinstance(cause, INJECTED):
                        break
                    cause = cause.__cause__ or cause.__context__
                if isinstance(cause, INJECTED):
                    error = e
                    self.flags.add("store-error")
                    self.report.notes["graph runs failed by an injected store error"] += 1
                else:
                    self.fail("graph run raised", f"{type(e).__name__}: {e}", e)
        if self.problems:
            raise FuzzFailure("recorded")
        self.log(
            f"  -> {'failed: ' + str(error)[:60] if error else 'ok'}; model answered "
            f"{[m.additional_kwargs.get('fz') for m in self.returned]}"
        )
        self.check_after_run(thread, inputs, expected, error)

    def check_after_run(self, thread, inputs, expected, error) -> None:
        after = self.state_of(thread)
        history = self.rebuild(thread, after.values)
        # dangling tool calls (a tool run that failed) are LangGraph's, not paging's
        answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
        for m in history:
            for c in tool_call_ids(m):
                if c not in answered:
                    self.dangling.add(c)
        self.check("history only grows (graph lossless)")
        grown = without_patches(history, expected)
        prefix = grown[: len(expected)]
        diff = same_messages(prefix, expected)
        if diff:
            self.fail(
                "not lossless (graph): the history lost or changed earlier messages"
                + (
                    self.diagnose_loss(after.values)
                    or order_label(grown, expected + tail_of(grown, expected))
                ),
                diff + (f" [after injected error: {error}]" if error else ""),
            )
        tail = grown[len(expected) :]
        tail_ids = [m.id for m in tail]
        if inputs[-1].id not in tail_ids:
            self.fail(
                "not lossless (graph): the user message is missing" + self.diagnose_loss(after.values),
                f"{inputs[-1].id} not in the new part of the history",
            )
        marks = [m.additional_kwargs.get("fz") for m in tail if isinstance(m, AIMessage)]
        for m in self.returned:
            self.check("model answers kept")
            if m.additional_kwargs.get("fz") not in marks:
                self.fail(
                    "not lossless (graph): an AI message the model returned is missing",
                    f"{m.additional_kwargs.get('fz')}",
                )
        # recalls of this run
        for rthread, state, kwargs, answer in self.recalls:
            self.check_recall(rthread, state, kwargs, answer)
        self.recalls = []
        # ids never reused / records never rewritten
        self.check("page records never rewritten (graph)")
        if self.store.rewrites:
            self.fail("page record rewritten with other content (graph)", "; ".join(self.store.rewrites[:3]))
        checkpoint = after.config["configurable"]["checkpoint_id"]
        if error is None and not after.next:
            # a failed run's head shows the successful tasks' pending writes, which a checkpoint read
            # by id does not: only finished runs are snapshots
            self.snapshots[thread][checkpoint] = history
        self.heads[thread] = checkpoint

    def diagnose_loss(self, values: dict) -> str:
        st = PagingState.from_value(values.get("paging"))
        ids = {m.id for m in values.get("messages", [])}
        if self.p.mode == "replace" and any(s.anchor not in ids for s in st.shown.values()):
            return " (a page evicted without a bookmark: its anchor left the context)"
        return ""

    def check_recall(self, thread, state, kwargs, answer) -> None:
        branch = PagingState.from_value(state)
        cap = self.paging.pager.room_for(branch)  # one call and no calling message: the largest room
        content = answer.content
        self.check("recall within cap (graph)")
        if COUNTER.count_text(content) > cap:
            self.fail(
                "recall over its size cap (graph)"
                + (
                    " (the 'size cap reached' notice is not counted)"
                    if "[recall size cap of" in content
                    else ""
                ),
                f"{COUNTER.count_text(content)} > {cap}; args={str(kwargs)[:100]}",
            )
        self.check("recall delimited (graph)")
        problems = recall_structure_problems(content)
        if problems:
            echo = "Nothing paged out matches the query" in content[: problems[0].count("") and 400]
            self.fail(
                "recall text not delimited (graph)" + (" (the note echoes the query)" if echo else ""),
                problems[0],
            )
        for other, words in self.words.items():
            if other != thread:
                self.check("no read of another thread (graph)")
                if words.tag in content:
                    self.fail(
                        "recall read another thread's pages (graph)",
                        f"{thread} read {other}: {content[:300]!r}",
                    )
        asked = kwargs.get("page_ids") if isinstance(kwargs.get("page_ids"), list) else []
        for pid in asked:
            if (
                isinstance(pid, str)
                and re.fullmatch(r"p[1-9]\d*", pid)
                and not branch.owns("p", page_number(pid))
            ):
                self.check("foreign id is no such page (graph)")
                if shows_page(content, pid):
                    self.fail("recall returned a page this branch does not own (graph)", f"{pid}")
                if (
                    pid in self.abandoned.get(thread, set())
                    and "No such page" not in content
                    and not content.startswith("recall failed")
                ):
                    self.fail("abandoned branch page visible (graph)", f"{pid}: {content[:200]!r}")

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

    def final_checks(self, thread: str) -> None:
        self.check("every checkpoint rebuilds the same (graph)")
        items = list(self.snapshots[thread].items())
        for checkpoint, history in items[:: max(1, len(items) // 6)]:
            state = self.state_of(thread, checkpoint)
            again = self.rebuild(thread, state.values)
            diff = same_messages(again, history)
            if diff:
                self.fail("an older checkpoint no longer rebuilds the same history (graph)", diff)
