"""The main job: a long conversation through a real compiled agent with paging on SQLite.

Offline by default: a scripted model replays a seeded synthetic conversation and,
at the end, answers a question by picking a bookmark (BM25 over bookmark keywords)
and calling `recall`. With OPENAI_API_KEY set, a real model plays the assistant.

    python tools/demo.py [--turns 300] [--max-tokens 1500] [--db paging-demo.sqlite]
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import uuid
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evals.datasets.synthetic import generate  # noqa: E402
from evals.readers.lexical import rank_bookmarks, visible_bookmarks  # noqa: E402
from graphs.agent import chat_model_from_env, create_paging_agent  # noqa: E402
from langmem_paging import TokenCounter, is_bookmark, reconstruct_history  # noqa: E402
from langmem_paging.testing import ScriptedChatModel  # noqa: E402
from langmem_paging.text import content_terms  # noqa: E402


def scripted_assistant(replies: list[str]):
    """Replies with the dataset's other speaker; for a question, recalls the best bookmark."""
    state = {"turn": 0}

    def respond(messages):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            question = next(m for m in reversed(messages) if isinstance(m, HumanMessage)).content
            q = set(content_terms(question))
            lines = re.findall(r'<message from="user"[^>]*>(.*?)</message>', last.content)
            best = max(lines, key=lambda ln: len(q & set(content_terms(ln))), default="")
            return AIMessage(f"From the recalled page: {best}")
        if str(last.content).endswith("?") and state["turn"] >= len(replies):
            ranked = rank_bookmarks(last.content, visible_bookmarks(messages))
            if ranked:
                call = {"name": "recall", "args": {"page_ids": ranked[:1]}, "id": f"call_{uuid.uuid4().hex[:8]}"}
                return AIMessage("", tool_calls=[call])
            return AIMessage("I don't see that in our conversation.")
        reply = replies[state["turn"]] if state["turn"] < len(replies) else "OK."
        state["turn"] += 1
        return AIMessage(reply)

    return respond


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300, help="utterances in the conversation")
    parser.add_argument("--max-tokens", type=int, default=1500)
    parser.add_argument("--boundary", default="fixed_20")
    parser.add_argument("--policy", default="lfu")
    parser.add_argument("--db", default="paging-demo.sqlite", help="SQLite file for pages and checkpoints")
    args = parser.parse_args(argv)

    conversation = generate(n_turns=args.turns, n_facts=max(1, args.turns // 40), seed=0)
    user_turns = [t.text for t in conversation.turns if t.speaker == "User"]
    replies = [t.text for t in conversation.turns if t.speaker == "Friend"]
    probe = conversation.questions[0]

    real_model = chat_model_from_env()
    model = real_model or ScriptedChatModel(responses=[scripted_assistant(replies)] * (len(user_turns) + 3))
    conn = sqlite3.connect(args.db, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    saver = SqliteSaver(sqlite3.connect(args.db, check_same_thread=False))
    agent = create_paging_agent(model, max_tokens=args.max_tokens, boundary=args.boundary,
                                policy=args.policy, store=store, checkpointer=saver)
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": thread_id}}
    counter = TokenCounter()

    print(f"model: {'OpenAI ' + getattr(model, 'model_name', '') if real_model else 'scripted (offline)'}; "
          f"budget {args.max_tokens} tokens; boundary {args.boundary}; policy {args.policy}; "
          f"store SQLite {args.db}; thread {thread_id}")
    print(f"{'turn':>4} {'state msgs':>10} {'context tokens':>15} {'pages stored':>13}")
    for i, text in enumerate(user_turns, 1):
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
        context = counter(state["messages"][:-1])  # what the model received this turn
        pages = len(agent.paging.page_store.list(thread_id)) if i % 10 == 0 or i == len(user_turns) else ""
        print(f"{i:>4} {len(state['messages']):>10} {context:>15} {pages!s:>13}")

    bookmarks = [m.content for m in state["messages"] if is_bookmark(m)]
    print(f"\nbookmarks in context ({len(bookmarks)}):")
    for b in bookmarks:
        print(f"  {b}  ({counter.count_text(b)} tokens)")

    print(f"\nquestion: {probe.question}   (gold: {probe.answer}, evidence {probe.evidence[0]})")
    state = agent.invoke({"messages": [HumanMessage(probe.question)]}, config)
    for message in state["messages"][-3:]:
        if isinstance(message, AIMessage) and message.tool_calls:
            print(f"model calls: recall({message.tool_calls[0]['args']})")
        elif isinstance(message, ToolMessage):
            print("recall returned:\n  " + "\n  ".join(message.content.splitlines()[:12]))
        else:
            print(f"model answers: {message.content}")

    pages = {p.id: p for p in agent.paging.page_store.list(thread_id)}
    clusters = {c.id: c for c in agent.paging.page_store.list_clusters(thread_id)}
    history = reconstruct_history(state["messages"], pages, counter, clusters=clusters, state=state["paging"])
    said = [m.content for m in history if isinstance(m, HumanMessage)]
    lossless = said == user_turns + [probe.question]
    print(f"\nlossless: {lossless} ({len(history)} messages rebuilt from {len(state['messages'])} "
          f"resident + {len(pages)} stored pages)")
    return 0 if lossless else 1


if __name__ == "__main__":
    sys.exit(main())
