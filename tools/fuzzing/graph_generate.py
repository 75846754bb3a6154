"""Graph cases, generation: what the model plans each turn and what the user and the app send."""

from __future__ import annotations

import re

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langmem_paging.core.messages import library_mark, tool_call_ids
from langmem_paging.core.records import page_number

from .vocabulary import VOCAB


class GraphGeneration:
    """Draws a turn's inputs and the model's tool rounds from the case's seeded `rng` (`GraphCase`
    mixes this in)."""

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
        inputs, remove_all = self.app_removals(values.get("messages", []), words)
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

    def app_removals(self, messages: list, words) -> tuple[list, bool]:
        """What the app removes before its user's message (one message with its tool results, or
        everything behind a summary as `SummarizationMiddleware` does), and whether it removed all."""
        rng = self.rng
        if messages and rng.random() < 0.05:
            ours = [m for m in messages if not library_mark(m) and not isinstance(m, ToolMessage)]
            if not ours:
                return [], False
            victim = rng.choice(ours)
            # an app deleting a tool call deletes its results too
            calls = set(tool_call_ids(victim))
            return [RemoveMessage(id=victim.id)] + [
                RemoveMessage(id=m.id)
                for m in messages
                if isinstance(m, ToolMessage) and m.tool_call_id in calls
            ], False
        if messages and rng.random() < 0.03:
            keep = messages[-rng.randint(0, 4) :]
            while keep and isinstance(keep[0], ToolMessage):
                keep = keep[1:]
            return [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                HumanMessage(f"Summary: {words.text(10)}", id=f"sum-{words.marker('s')}"),
                *keep,
            ], True
        return [], False
