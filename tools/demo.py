"""The main job: a long conversation through a real compiled agent with paging on SQLite.

Offline by default: a scripted model replays a seeded synthetic conversation, then answers
a question the way a cooperative model would: it picks the bookmark that shares most words
with the question (a cluster bookmark first lists its pages, then it picks one), or searches
when none does, and calls `recall`. With OPENAI_API_KEY set (OPENAI_BASE_URL, OPENAI_MODEL
optional), a real model plays the assistant.

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
from graphs.agent import chat_model_from_env, create_paging_agent  # noqa: E402
from langmem_paging import TokenCounter, is_bookmark, reconstruct_history  # noqa: E402
from langmem_paging.testing import ScriptedChatModel  # noqa: E402
from langmem_paging.text import search_terms  # noqa: E402

_MARK = re.compile(r"\[([pc]\d+):([^\]|]*)")


def _best_mark(question: str, texts: list[str]) -> str | None:
    """The page or cluster id whose keywords share most (stemmed) words with the question."""
    wanted = set(search_terms(question))
    scored = []
    for text in texts:
        for ident, keywords in _MARK.findall(text):
            overlap = len(wanted & set(search_terms(keywords.replace(",", " "))))
            if overlap:
                scored.append((overlap, ident.startswith("p"), ident))
    return max(scored)[2] if scored else None


def _call(**args) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": args, "id": f"call_{uuid.uuid4().hex[:8]}"}])


def scripted_assistant(replies: list[str]):
    """Replies with the dataset's other speaker; for a question, recalls as described above."""
    state = {"turn": 0}

    def respond(messages):
        last = messages[-1]
        question = next(m for m in reversed(messages) if isinstance(m, HumanMessage) and not is_bookmark(m))
        if isinstance(last, ToolMessage):
            if "<cluster" in last.content:  # a cluster listing: pick one of its pages
                page = _best_mark(question.content, [last.content])
                if page:
                    return _call(page_ids=[page])
            wanted = set(search_terms(question.content))
            lines = re.findall(r'<message from="user"[^>]*>(.*?)</message>', last.content)
            best = max(lines, key=lambda ln: len(wanted & set(search_terms(ln))), default="")
            return AIMessage(f"From the recalled page: {best}" if best else "I could not find it.")
        if str(last.content).endswith("?") and state["turn"] >= len(replies):
            mark = _best_mark(last.content, [str(m.content) for m in messages if is_bookmark(m)])
            return _call(page_ids=[mark]) if mark else _call(query=last.content)
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
    model = real_model or ScriptedChatModel(responses=[scripted_assistant(replies)] * (len(user_turns) + 4))
    conn = sqlite3.connect(args.db, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    saver = SqliteSaver(sqlite3.connect(args.db, check_same_thread=False))
    agent = create_paging_agent(model, max_tokens=args.max_tokens, boundary=args.boundary,
                                policy=args.policy, store=store, checkpointer=saver)
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": thread_id}}
    counter = TokenCounter(model=real_model)
    tools = counter.count_tools(agent.paging.tools)

    print(f"model: {'OpenAI ' + getattr(model, 'model_name', '') if real_model else 'scripted (offline)'}; "
          f"budget {args.max_tokens} tokens (the recall tool's schema takes {tools}); boundary {args.boundary}; "
          f"policy {args.policy}; store SQLite {args.db}; thread {thread_id}")
    print(f"{'turn':>4} {'state msgs':>10} {'model received':>15} {'pages stored':>13}")
    most = 0
    for i, text in enumerate(user_turns, 1):
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
        received = counter(state["messages"][:-1]) + tools  # the prompt the model got this turn
        most = max(most, received)
        pages = len(agent.paging.page_store.list_pages(thread_id)) if i % 25 == 0 or i == len(user_turns) else ""
        if i % 25 == 0 or i == len(user_turns) or i <= 3:
            print(f"{i:>4} {len(state['messages']):>10} {received:>15} {pages!s:>13}")
    print(f"most the model received in one turn: {most} tokens (budget {args.max_tokens})")

    bookmarks = [m.content for m in state["messages"] if is_bookmark(m)]
    print(f"\nbookmarks in context ({len(bookmarks)}):")
    for b in bookmarks:
        print(f"  {b}  ({counter.count_text(b)} tokens)")

    print(f"\nquestion: {probe.question}   (gold: {probe.answer}, evidence {probe.evidence[0]})")
    state = agent.invoke({"messages": [HumanMessage(probe.question)]}, config)
    asked = next(i for i, m in enumerate(state["messages"]) if m.content == probe.question)
    for message in state["messages"][asked + 1 :]:
        if isinstance(message, AIMessage) and message.tool_calls:
            print(f"model calls: recall({message.tool_calls[0]['args']})")
        elif isinstance(message, ToolMessage):
            print("recall returned:\n  " + "\n  ".join(message.content.splitlines()[:8]))
        else:
            print(f"model answers: {message.content}")

    store_pages = agent.paging.page_store
    history = reconstruct_history(state["messages"], lambda p: store_pages.get(thread_id, p), counter,
                                  clusters=lambda c: store_pages.get_cluster(thread_id, c), state=state["paging"])
    said = [m.content for m in history if isinstance(m, HumanMessage)]
    lossless = said == user_turns + [probe.question]
    print(f"\nlossless: {lossless} ({len(history)} messages rebuilt from {len(state['messages'])} resident "
          f"+ {len(store_pages.list_pages(thread_id))} stored pages, in order)")
    print(f"inspect it: langmem-paging inspect {thread_id} --store sqlite:///{args.db}")
    return 0 if lossless and most <= args.max_tokens else 1


if __name__ == "__main__":
    sys.exit(main())
