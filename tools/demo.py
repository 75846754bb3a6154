"""The main job: a long conversation through a real compiled agent with paging on SQLite.

Offline unless asked: a scripted model replays a seeded synthetic conversation, then answers a
question the way a cooperative model would. It answers only from a line that is about the
question's subject (every name in the question, and at least two of its words): from the context
if one is still there; else it recalls the bookmark that shares most words with the question (a
cluster bookmark lists its pages, then it picks one) and reads what comes back; when that does not
answer, it recalls the next bookmark, then searches (``recall(query=...)``). ``--model openai:gpt-4o-mini`` (any ``init_chat_model`` name; the
provider reads its own key, e.g. ``OPENAI_API_KEY``) lets a real model play the assistant: an API key
in the environment alone never does.

The synthetic dataset knows the answer: the demo checks the model's answer against it and prints
RIGHT or WRONG. Exit code 0 when the answer is right, the history rebuilds losslessly and no prompt
passed the budget; 1 otherwise (with a real model too: a wrong answer is the demo failing its job).

    python tools/demo.py [--turns 300] [--max-tokens 1500] [--boundary fixed_20] [--question 0]
                         [--db paging-demo.sqlite] [--model openai:gpt-4o-mini]
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run by path: evals/ and graphs/ (not installed) sit beside tools/

from evals.datasets.records import Conversation, Question  # noqa: E402
from evals.datasets.synthetic import generate  # noqa: E402
from graphs.agent import chat_model  # noqa: E402
from langmem_paging import TokenCounter, create_paging_agent, is_bookmark, reconstruct_history  # noqa: E402
from langmem_paging.core.text import search_terms  # noqa: E402
from langmem_paging.testing import ScriptedChatModel  # noqa: E402

_MARK = re.compile(r"\[([pc]\d+):([^\]|]*)")
_USER_LINE = re.compile(
    r"^user(?: \[[^\]\n]*\])?: (.*(?:\n  .*)*)", re.MULTILINE
)  # a user's message, recalled
_NAME = re.compile(r"(?<!^)\b[A-Z][a-z]+")
MAX_RECALLS = 4
"""Recall calls the scripted assistant makes for one question before it gives up."""


def _marks(question: str, texts: list[str], skip: set[str]) -> list[str]:
    """Page and cluster ids whose keywords share (stemmed) words with the question, best first
    (more shared words, then pages before clusters, then newer); ids in `skip` left out."""
    wanted = set(search_terms(question))
    scored = []
    for text in texts:
        for ident, keywords in _MARK.findall(text):
            overlap = len(wanted & set(search_terms(keywords.replace(",", " "))))
            if overlap and ident not in skip:
                scored.append((overlap, ident.startswith("p"), int(ident[1:]), ident))
    return [ident for *_, ident in sorted(set(scored), reverse=True)]


def answering_line(question: str, lines: list[str]) -> str | None:
    """The line (what the user said) that answers the question, or None.

    A line answers when it names every name the question names and shares at least two of its
    words (one for a one-word question); of those, the one sharing most words, the latest on a tie
    (an update overrides what it updates).
    """
    wanted = set(search_terms(question))
    names = {t for name in _NAME.findall(question.strip()) for t in search_terms(name)}
    best: tuple[int, int, str] | None = None
    for k, line in enumerate(lines):
        terms = set(search_terms(line))
        overlap = len(wanted & terms)
        if names <= terms and overlap >= min(2, len(wanted)) and (best is None or overlap >= best[0]):
            best = (overlap, k, line)
    return best[2] if best else None


def _call(**args) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": args, "id": f"call_{uuid.uuid4().hex[:8]}"}])


def scripted_assistant(replies: list[str]):
    """Replies with the dataset's other speaker; for a question, recalls and answers as described above."""
    state = {"turn": 0}

    def respond(messages):
        last = messages[-1]
        asked = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and not is_bookmark(m))
        question = str(messages[asked].content)
        if not isinstance(last, ToolMessage) and not (
            question.endswith("?") and state["turn"] >= len(replies)
        ):
            reply = replies[state["turn"]] if state["turn"] < len(replies) else "OK."
            state["turn"] += 1
            return AIMessage(reply)
        if not isinstance(last, ToolMessage):  # still in the context: no recall needed
            said = [
                str(m.content) for m in messages[:asked] if isinstance(m, HumanMessage) and not is_bookmark(m)
            ]
            if line := answering_line(question, said):
                return AIMessage(f"From our conversation: {line}")
        since = messages[asked + 1 :]
        calls = [c["args"] for m in since if isinstance(m, AIMessage) for c in m.tool_calls]
        tried = {str(i) for args in calls for i in args.get("page_ids") or []}
        if isinstance(last, ToolMessage):
            line = answering_line(question, _USER_LINE.findall(str(last.content)))
            if line:
                return AIMessage(f"From the recalled page: {line}")
        if len(calls) >= MAX_RECALLS:
            return AIMessage("I could not find it.")
        if isinstance(last, ToolMessage) and re.search(r"^=== c\d+ · ", str(last.content), re.MULTILINE):
            # a cluster's listing: pick one of its pages
            pages = [i for i in _marks(question, [str(last.content)], tried) if i.startswith("p")]
            if pages:
                return _call(page_ids=[pages[0]])
        marks = _marks(question, [str(m.content) for m in messages if is_bookmark(m)], tried)
        if marks:
            return _call(page_ids=[marks[0]])
        if not any("query" in args for args in calls):
            return _call(query=question)
        return AIMessage("I could not find it.")

    return respond


class ToolResultsSeen(BaseCallbackHandler):
    """Tool results as the model received them (the state may keep a recall result as a short
    reference once it has been read)."""

    def __init__(self) -> None:
        self.by_call: dict[str, str] = {}

    def on_chat_model_start(self, serialized, messages, **kwargs) -> None:
        for message in messages[0]:
            if isinstance(message, ToolMessage):
                self.by_call.setdefault(message.tool_call_id, str(message.content))


def is_right(answer: str, gold: str) -> bool:
    """The scripted truth: the answer names the gold value (case and spacing aside)."""

    def norm(text: str) -> str:
        return " ".join(re.findall(r"\w+", text.lower()))

    return f" {norm(gold)} " in f" {norm(answer)} "


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=300, help="utterances in the conversation (default 300)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=1500,
        help="the token budget of what the model receives (default 1500)",
    )
    parser.add_argument(
        "--boundary", default="fixed_20", help="how messages are cut into pages (default fixed_20)"
    )
    parser.add_argument("--policy", default="lfu", help="eviction policy (default lfu)")
    parser.add_argument(
        "--question",
        type=int,
        default=0,
        help="which of the dataset's questions to ask at the end (default 0, the first)",
    )
    parser.add_argument("--db", default="paging-demo.sqlite", help="SQLite file for pages and checkpoints")
    parser.add_argument(
        "--model",
        default=None,
        help="a real chat model by init_chat_model name, e.g. openai:gpt-4o-mini (needs the "
        "openai extra and OPENAI_API_KEY); default: the offline scripted assistant",
    )
    return parser


@dataclass
class Demo:
    """The run's agent and what the checks read."""

    args: argparse.Namespace
    conversation: Conversation
    user_turns: list[str]
    agent: Any
    thread_id: str
    counter: TokenCounter
    tool_tokens: int
    """Tokens of the recall tool's schema: counted in every prompt."""

    @property
    def config(self) -> dict:
        return {"configurable": {"thread_id": self.thread_id}}


def _build(args: argparse.Namespace, conversation: Conversation) -> Demo:
    """The agent on SQLite: a real model when ``--model`` names one, else the scripted assistant."""
    user_turns = [t.text for t in conversation.turns if t.speaker == "User"]
    replies = [t.text for t in conversation.turns if t.speaker == "Friend"]
    real_model = chat_model(args.model)
    model = real_model or ScriptedChatModel(
        responses=[scripted_assistant(replies)] * (len(user_turns) + 2 * MAX_RECALLS + 2)
    )
    conn = sqlite3.connect(args.db, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    saver = SqliteSaver(sqlite3.connect(args.db, check_same_thread=False))
    agent = create_paging_agent(
        model,
        max_tokens=args.max_tokens,
        boundary=args.boundary,
        policy=args.policy,
        store=store,
        checkpointer=saver,
    )
    counter = TokenCounter(model=real_model)
    demo = Demo(
        args,
        conversation,
        user_turns,
        agent,
        f"demo-{uuid.uuid4().hex[:8]}",
        counter,
        counter.count_tools(agent.paging.tools),
    )
    print(
        f"model: {args.model if real_model else 'scripted (offline; --model NAME for a real one)'}; "
        f"budget {args.max_tokens} tokens (the recall tool's schema takes {demo.tool_tokens}); boundary "
        f"{args.boundary}; policy {args.policy}; store SQLite {args.db}; thread {demo.thread_id}"
    )
    return demo


def _replay(demo: Demo) -> tuple[dict, int]:
    """Every user turn through the agent; the last state and the largest prompt the model got."""
    print(f"{'turn':>4} {'state msgs':>10} {'model received':>15} {'pages stored':>13}")
    most, state, last = 0, {}, len(demo.user_turns)
    for i, text in enumerate(demo.user_turns, 1):
        state = demo.agent.invoke({"messages": [HumanMessage(text)]}, demo.config)
        received = demo.counter(state["messages"][:-1]) + demo.tool_tokens  # the prompt of this turn
        most = max(most, received)
        if i % 25 == 0 or i == last or i <= 3:
            pages = (
                len(demo.agent.paging.page_store.list_pages(demo.thread_id))
                if i % 25 == 0 or i == last
                else ""
            )
            print(f"{i:>4} {len(state['messages']):>10} {received:>15} {pages!s:>13}")
    print(f"most the model received in one turn: {most} tokens (budget {demo.args.max_tokens})")
    bookmarks = [m.content for m in state["messages"] if is_bookmark(m)]
    print(f"\nbookmarks in context ({len(bookmarks)}):")
    for b in bookmarks:
        print(f"  {b}  ({demo.counter.count_text(b)} tokens)")
    return state, most


def _ask(demo: Demo, probe: Question) -> tuple[dict, bool]:
    """Ask the probe question; print what the model recalled and answered; the state and RIGHT/WRONG."""
    print(f"\nquestion: {probe.question}   (gold: {probe.answer}, evidence {probe.evidence[0]})")
    seen = ToolResultsSeen()
    state = demo.agent.invoke(
        {"messages": [HumanMessage(probe.question)]}, {**demo.config, "callbacks": [seen]}
    )
    asked = next(i for i, m in enumerate(state["messages"]) if m.content == probe.question)
    answer = ""
    for message in state["messages"][asked + 1 :]:
        if isinstance(message, AIMessage) and message.tool_calls:
            print(f"model calls: recall({message.tool_calls[0]['args']})")
        elif isinstance(message, ToolMessage):
            text = seen.by_call.get(message.tool_call_id, str(message.content))
            print("recall returned:\n  " + "\n  ".join(text.splitlines()[:8]))
        else:
            answer = str(message.content)
            print(f"model answers: {answer}")
    right = is_right(answer, probe.answer)
    evidence = next(t.text for t in demo.conversation.turns if t.dia_id == probe.evidence[0])
    print(
        f"answer check: {'RIGHT' if right else 'WRONG'}: the answer {'names' if right else 'does not name'} "
        f"the gold value {probe.answer!r} (evidence {probe.evidence[0]}: {evidence!r})"
    )
    return state, right


def _lossless(demo: Demo, state: dict, probe: Question) -> bool:
    """Does the history rebuilt from the state and the store hold every user turn, in order?"""
    store_pages = demo.agent.paging.page_store
    history = reconstruct_history(
        state["messages"],
        lambda p: store_pages.get(demo.thread_id, p),
        demo.counter,
        clusters=lambda c: store_pages.get_cluster(demo.thread_id, c),
        state=state["paging"],
    )
    said = [m.content for m in history if isinstance(m, HumanMessage)]
    lossless = said == demo.user_turns + [probe.question]
    print(
        f"\nlossless: {lossless} ({len(history)} messages rebuilt from {len(state['messages'])} resident "
        f"+ {len(store_pages.list_pages(demo.thread_id))} stored pages, in order)"
    )
    print(f"inspect it: langmem-paging inspect {demo.thread_id} --store sqlite:///{demo.args.db}")
    return lossless


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    conversation = generate(n_turns=args.turns, n_facts=max(1, args.turns // 40), seed=0)
    if not 0 <= args.question < len(conversation.questions):
        parser.error(f"--question must be in 0..{len(conversation.questions) - 1} for {args.turns} turns")
    probe = conversation.questions[args.question]
    demo = _build(args, conversation)
    _, most = _replay(demo)
    state, right = _ask(demo, probe)
    lossless = _lossless(demo, state, probe)
    checks = [
        ("the answer is wrong", right),
        ("the history is not lossless", lossless),
        (f"a prompt passed the {args.max_tokens}-token budget", most <= args.max_tokens),
    ]
    failed = [what for what, ok in checks if not ok]
    print(
        f"demo: {'FAILED: ' + '; '.join(failed) if failed else 'OK (right answer, lossless, within budget)'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
