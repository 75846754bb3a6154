"""Bounded concurrent clients: one client on each of ``threads`` threads of its own and two clients
on one shared thread, ``turns`` turns each, every turn retried (same message id) until it is done.

Turn texts carry their thread's label (``ZarkoL3x7``) so a page of one thread holding another's
words is found; turn 1 of each client holds a secret (``KestrelL0c0``) that the forget check removes;
some turns ask the scripted model for a recall (``SEARCH``: by query; ``RECALL p1``: by id).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

ATTEMPT_TIMEOUT = 60.0
TURN_DEADLINE = 150.0


class Target(Protocol):
    """Where turns go: a LangGraph server (through the SDK) or the plain app (one POST a turn)."""

    async def run(self, graph: str, thread: str, key: str, text: str, retry: bool = False) -> None: ...


class ServerTarget:
    """A LangGraph server: ``runs.wait`` with ``multitask_strategy="enqueue"`` (the server runs one
    thread's runs one after another) creating the thread on its first run."""

    def __init__(self, url: str) -> None:
        from langgraph_sdk import get_client

        self.client = get_client(url=url, api_key=None)

    async def run(self, graph: str, thread: str, key: str, text: str, retry: bool = False) -> None:
        message = {"type": "human", "content": text, "id": key}
        result = await self.client.runs.wait(
            thread, graph, input={"messages": [message]}, multitask_strategy="enqueue", if_not_exists="create"
        )
        if isinstance(result, dict) and "__error__" in result:
            raise RuntimeError(f"run failed: {result['__error__']}")

    async def state(self, thread: str) -> dict[str, Any]:
        return await self.client.threads.get_state(thread)

    async def paging(self, method: str, path: str, **kwargs: Any) -> Any:
        """A request to the server app's ``/paging`` routes (langmem_paging.server): the response."""
        return await self.client.http.client.request(method, f"/paging{path}", **kwargs)


class AppTarget:
    """The plain multi-process app (tools/deploy/app.py)."""

    def __init__(self, url: str) -> None:
        import httpx

        self.client = httpx.AsyncClient(base_url=url, timeout=ATTEMPT_TIMEOUT, trust_env=False)
        self.last_pid: int | None = None
        """The worker that answered last (kept-alive connections stay with it: it has turns in flight)."""

    async def run(self, graph: str, thread: str, key: str, text: str, retry: bool = False) -> None:
        """One turn; a `retry` is not sent again where its first attempt landed (tools/deploy/app.py)."""
        response = await self.client.post(
            "/turn", json={"graph": graph, "thread": thread, "id": key, "text": text, "retry": retry}
        )
        response.raise_for_status()
        self.last_pid = response.json()["pid"]


@dataclass
class Sent:
    """One turn a client sent, once it was answered."""

    label: str
    thread: str
    key: str
    text: str
    seconds: float
    tries: int


@dataclass
class Load:
    """What one load run sent and how long it took."""

    graph: str
    threads: dict[str, str]
    """Thread label -> thread id."""
    round: int = 0
    """Which load on these threads (message ids differ between rounds)."""
    planned: int = 0
    """Turns the clients will send."""
    sent: list[Sent] = field(default_factory=list)
    seconds: float = 0.0
    failures: int = 0
    """Attempts that failed and were retried (a killed worker, a dropped connection)."""

    @property
    def throughput(self) -> float:
        """Turns answered per second of wall time."""
        return len(self.sent) / self.seconds if self.seconds else 0.0

    @property
    def p95(self) -> float:
        """95th percentile of a turn's latency (seconds, retries included)."""
        times = sorted(s.seconds for s in self.sent)
        return statistics.quantiles(times, n=20, method="inclusive")[-1] if len(times) > 1 else sum(times)

    def keys(self, label: str) -> list[str]:
        return [s.key for s in self.sent if s.label == label]


def secret(label: str, client: str) -> str:
    return f"Kestrel{label}{client}"


def turn_text(label: str, client: str, i: int, round: int = 0) -> str:
    if i == 12:
        return "RECALL p1"
    if i % 9 == 4:
        return f"SEARCH Zarko{label}x{i - 3} beehives"
    extra = f" My locker code is {secret(label, client)}." if i == 1 and round == 0 else ""
    return f"{client} turn {i}: Zarko{label}x{i} keeps {100 + i} beehives near Bled{label}.{extra}"


async def _turn(target: Target, load: Load, label: str, client: str, i: int) -> None:
    thread, key, text = (
        load.threads[label],
        f"{label}-{client}-{load.round}-{i}",
        turn_text(label, client, i, load.round),
    )
    started, tries = time.perf_counter(), 0
    while True:
        tries += 1
        try:
            await asyncio.wait_for(
                target.run(load.graph, thread, key, text, retry=tries > 1), ATTEMPT_TIMEOUT
            )
            break
        except Exception:  # a killed worker, a dropped connection: the client retries the same turn
            load.failures += 1
            if time.perf_counter() - started > TURN_DEADLINE:
                raise
            await asyncio.sleep(0.5)
    load.sent.append(Sent(label, thread, key, text, time.perf_counter() - started, tries))


async def _client(
    target: Target, load: Load, label: str, client: str, turns: int, done: asyncio.Event
) -> None:
    for i in range(turns):
        await _turn(target, load, label, client, i)
    done.set()


async def run_load(
    target: Target,
    graph: str,
    *,
    threads: int,
    turns: int,
    during: Callable[[Load, asyncio.Event], Awaitable[None]] | None = None,
    again: Load | None = None,
) -> Load:
    """Run the clients to the end; `during` (the chaos: a worker killed, a forget) runs beside them,
    given the load and an event set when thread ``L0`` (half the turns) is done. `again`: go on with
    that load's threads (after a server restart)."""
    labels = [f"L{n}" for n in range(threads)]
    if again is not None:
        load = Load(graph, again.threads, round=again.round + 1)
    else:
        load = Load(graph, {label: str(uuid.uuid4()) for label in [*labels, "LS"]})
    events = {label: asyncio.Event() for label in load.threads}
    clients = [
        _client(target, load, label, "c0", turns // 2 if label == "L0" else turns, events[label])
        for label in labels
    ]
    clients += [_client(target, load, "LS", name, turns, asyncio.Event()) for name in ("c0", "c1")]
    load.planned = turns * (threads + 2) - (turns - turns // 2)
    started = time.perf_counter()
    side = asyncio.ensure_future(during(load, events["L0"])) if during else None
    try:
        await asyncio.gather(*clients)
    finally:
        load.seconds = time.perf_counter() - started
        if side is not None:
            if side.done():
                side.result()
            else:
                await side
    return load


async def close(target: Target) -> None:
    with contextlib.suppress(Exception):
        client = target.client  # type: ignore[attr-defined]
        await (client.aclose() if hasattr(client, "aclose") else client.http.client.aclose())
