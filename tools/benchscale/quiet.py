"""Part 5, quiet: CPU time of a call that pages nothing against the tiktoken floor."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from evals.policy_spec import paging_options

from .conversation import Chat, shared_vocabulary
from .settings import BOUNDARY, MAX_TOKENS
from .stats import summary


def bench_quiet(args, workdir: Path) -> dict[str, Any]:
    """CPU time of a model call that pages nothing against the floor every budget-exact method
    pays: tiktoken on the messages new at that call (encoded afresh). Side by side in one loop, on
    one conversation at `MAX_TOKENS`: the floor, `page_messages` (the pure function, its state
    passed on) and `PagingMiddleware.wrap_model_call` (a handler that answers at once, its update
    applied as the graph would). A call is quiet for a path when it formed, evicted and folded
    nothing there; ratios are per call (the same new messages), then their median."""
    from types import SimpleNamespace

    from langchain.agents.middleware import ModelRequest, ModelResponse

    from langmem_paging import PagingMiddleware, page_messages
    from langmem_paging.core.tokens import get_encoding, wire_text
    from langmem_paging.testing import ScriptedChatModel

    options = {"boundary": BOUNDARY, **paging_options(args.policy)}
    store = InMemoryStore()
    middleware = PagingMiddleware(max_tokens=MAX_TOKENS, store=store, **options)
    model = ScriptedChatModel()
    runtime = SimpleNamespace(execution_info=SimpleNamespace(thread_id="quiet"), store=store)
    answer = ModelResponse(result=[AIMessage("ok", id="answer")])
    encoding = get_encoding("cl100k_base")
    pure: dict[str, Any] = {"messages": [], "state": None}
    graph: dict[str, Any] = {"messages": [], "paging": None}

    def floor(segment: list[BaseMessage]) -> int:
        t0 = time.thread_time_ns()
        for message in segment:
            encoding.encode(wire_text(message), disallowed_special=())
        return time.thread_time_ns() - t0

    def pure_call() -> tuple[int, bool]:
        t0 = time.thread_time_ns()
        result = page_messages(pure["messages"], max_tokens=MAX_TOKENS, state=pure["state"], **options)
        spent = time.thread_time_ns() - t0
        pure["messages"], pure["state"] = result.apply(pure["messages"]), result.state
        return spent, result.changed

    def graph_call() -> tuple[int, bool]:
        request = ModelRequest(
            model=model,
            messages=graph["messages"],
            tools=[],
            runtime=runtime,
            state={"messages": graph["messages"], "paging": graph["paging"]},
        )
        t0 = time.thread_time_ns()
        response = middleware.wrap_model_call(request, lambda _: answer)
        spent = time.thread_time_ns() - t0
        update = getattr(getattr(response, "command", None), "update", None) or {}
        if "messages" in update:
            graph["messages"] = add_messages(graph["messages"], update["messages"])
        graph["paging"] = update.get("paging", graph["paging"])
        return spent, "messages" in update

    stream = Chat(shared_vocabulary(), seed=args.seed).segments()
    rows = []
    for i in range(args.quiet_warmup + args.repeats):
        segment = next(stream)
        pure["messages"] = add_messages(pure["messages"], segment)
        graph["messages"] = add_messages(graph["messages"], segment)
        base = floor(segment)
        p_ns, p_paged = pure_call()
        m_ns, m_paged = graph_call()
        if i >= args.quiet_warmup:
            rows.append(
                {
                    "new_messages": len(segment),
                    "floor_us": base / 1e3,
                    "page_messages_us": p_ns / 1e3,
                    "middleware_us": m_ns / 1e3,
                    "page_messages_paged": p_paged,
                    "middleware_paged": m_paged,
                }
            )

    def ratios(path: str) -> list[float]:
        return [r[f"{path}_us"] / r["floor_us"] for r in rows if not r[f"{path}_paged"] and r["floor_us"] > 0]

    out: dict[str, Any] = {
        "max_tokens": MAX_TOKENS,
        "options": options,
        "calls": len(rows),
        "warmup": args.quiet_warmup,
        "floor_us": summary([r["floor_us"] for r in rows]),
    }
    for path, target in (("page_messages", 10), ("middleware", 15)):
        quiet = [r[f"{path}_us"] for r in rows if not r[f"{path}_paged"]]
        r = ratios(path)
        out[path] = {
            "quiet_us": summary(quiet),
            "paging_calls": sum(x[f"{path}_paged"] for x in rows),
            "ratio_to_floor": summary(r),
            "target": target,
            "met": None if not r else statistics.median(r) <= target,
        }
    out["raw"] = rows
    return out
