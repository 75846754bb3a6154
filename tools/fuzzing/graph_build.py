"""Graph cases, the graph under test: a compiled `create_agent` or `StateGraph`, its pager spied on."""

from __future__ import annotations

import random

from langchain_core.messages import SystemMessage

from langmem_paging import PagingState, TokenCounter

from .oracles import library_ids
from .vocabulary import COUNTER, VOCAB


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


class GraphBuild:
    """Compiles the case's graph and wraps its pager to record every step and recall (`GraphCase`
    mixes this in)."""

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
            result.stand_ins_in = library_ids(PagingState.from_value(state))
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
            result.stand_ins_in = library_ids(PagingState.from_value(state))
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
