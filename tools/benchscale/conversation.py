"""The synthetic conversation every part pages: Zipf-weighted words, topics, tool groups."""

from __future__ import annotations

import functools
import gzip
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


class Vocabulary:
    """Words drawn by their English frequency (the package's Zipf table), plus rarer topic words.

    Common words carry the bulk of the text, so BM25 postings and token counts look like prose;
    each exchange also names a topic (two words of middling rarity), which queries ask about.
    """

    def __init__(self, *, size: int = 20_000, topics: int = 3_000) -> None:
        rows: list[tuple[float, str]] = []
        raw = resources.files("langmem_paging").joinpath("data/en_zipf.txt.gz").read_bytes()
        for line in gzip.decompress(raw).decode("utf-8").splitlines():
            if line.startswith("#") or not line.strip():
                continue
            zipf, words = line.split("\t", 1)
            rows += [(float(zipf), w) for w in words.split() if w.isalpha()]
        rows.sort(key=lambda r: -r[0])
        common = rows[:size]
        self.words = [w for _, w in common]
        weights = [10**z for z, _ in common]
        total = 0.0
        self.cumulative = []
        for w in weights:
            total += w
            self.cumulative.append(total)
        middling = [w for z, w in rows if 2.8 <= z <= 3.8 and len(w) >= 5]
        self.topics = random.Random(7).sample(middling, min(topics, len(middling)))

    def sentence(self, rng: random.Random, n: int, topic: tuple[str, ...]) -> str:
        """`n` frequency-weighted words with the topic words mixed in."""
        picks = rng.choices(self.words, cum_weights=self.cumulative, k=n)
        for word in topic:
            picks.insert(rng.randrange(len(picks) + 1), word)
        text = " ".join(picks)
        return text[:1].upper() + text[1:]


@dataclass
class Chat:
    """A deterministic stream of user / assistant exchanges with tool groups.

    User and assistant messages take ~20-60 tokens; 30% of exchanges call a tool (one or two
    parallel calls, results of ~30-80 tokens). A topic lasts a few exchanges, as in real chats.
    """

    vocabulary: Vocabulary
    seed: int = 0
    tool_share: float = 0.3
    _rng: random.Random = field(init=False)
    _turn: int = field(default=0, init=False)
    _topic: tuple[str, ...] = field(default=(), init=False)
    _topic_left: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _next_topic(self) -> tuple[str, ...]:
        if self._topic_left <= 0:
            self._topic = tuple(self._rng.sample(self.vocabulary.topics, 2))
            self._topic_left = self._rng.randint(1, 5)
        self._topic_left -= 1
        return self._topic

    def exchange(self) -> list[list[BaseMessage]]:
        """One exchange as the segments an agent adds before each model call: the user message
        (a call), then optionally a tool call with its results (another call); the assistant's
        final answer opens the next exchange's first segment (the model wrote it)."""
        rng, vocab, k = self._rng, self.vocabulary, self._turn
        self._turn += 1
        topic = self._next_topic()
        segments = [[HumanMessage(vocab.sentence(rng, rng.randint(14, 44), topic) + "?", id=f"u{k}")]]
        if rng.random() < self.tool_share:
            calls = [
                {"name": "search_notes", "args": {"query": " ".join(topic), "limit": 5}, "id": f"call{k}_{j}"}
                for j in range(rng.choice([1, 1, 2]))
            ]
            group: list[BaseMessage] = [AIMessage("", tool_calls=calls, id=f"c{k}")]
            for j, call in enumerate(calls):
                group.append(
                    ToolMessage(
                        vocab.sentence(rng, rng.randint(22, 60), topic[j : j + 1]),
                        tool_call_id=call["id"],
                        name="search_notes",
                        id=f"r{k}_{j}",
                    )
                )
            segments.append(group)
        self._answer = AIMessage(vocab.sentence(rng, rng.randint(14, 44), topic[:1]), id=f"a{k}")
        return segments

    def segments(self) -> Iterator[list[BaseMessage]]:
        """Forever: what the graph adds before each model call (the first one has the system prompt)."""
        pending: list[BaseMessage] = [
            SystemMessage("You are a helpful assistant with a notes tool.", id="sys")
        ]
        while True:
            parts = self.exchange()
            parts[0] = pending + parts[0]
            yield from parts
            pending = [self._answer]

    def messages(self, n: int) -> list[BaseMessage]:
        """The next `n` messages of the stream, flat (for pages written directly)."""
        out: list[BaseMessage] = []
        while len(out) < n:
            for part in self.exchange():
                out += part
            out.append(self._answer)
        return out[:n]


@functools.cache
def shared_vocabulary() -> Vocabulary:
    """The vocabulary, read once per process."""
    return Vocabulary()
