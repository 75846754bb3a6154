"""Typed requests and the drivers that answer them: how a flow does I/O without doing it.

The paging step, the step engine and the recall service are generators: they yield a request,
a driver answers it and sends the answer back (or throws the error the answer raised into the
flow, which may handle it). A request's answer type is part of its type (`Request[R, IO]`): it
calls its own handler on the I/O object (`answer` for the sync driver, `aanswer` for the async
one), and the I/O protocol names every handler with its answer type, both sides, so mypy proves
both drivers answer every request alike. A flow asks with ``yield from ask(request)`` and gets
an `R` back (a bare ``yield`` gets `object`: the checker refuses to use it as anything).

`IO`, the protocol a request is answered on, is contravariant: the pure step's requests need a
`langmem_paging.step.io.StepIO` (`LocalIO`, no store), the engine's and recall's a
`langmem_paging.runtime.thread_io.PagingIO`, which extends it, so a step flow runs inside theirs
and mypy refuses to drive a flow on an I/O object that lacks a handler it needs.

`drive` and `adrive` run the simpler generators of plain reads (the store's operations, the
Postgres index's statements, the cluster-forest walks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar, cast

__all__ = ["Request", "adrive", "arun", "ask", "drive", "run"]

T = TypeVar("T")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
IO = TypeVar("IO")
IO_contra = TypeVar("IO_contra", contravariant=True)
Q = TypeVar("Q")
A = TypeVar("A")


class Request(ABC, Generic[R_co, IO_contra]):
    """Something a flow asks for, answered by an `R_co` from its handler on an `IO_contra`.

    Each request class calls its own handler (no lookup by name), so a request whose handler
    is missing from the protocol, or returns another type, fails the type check."""

    @abstractmethod
    def answer(self, io: IO_contra) -> R_co:
        """The answer, from the sync handler."""

    @abstractmethod
    def aanswer(self, io: IO_contra) -> Awaitable[R_co]:
        """The answer, from the async handler."""


def ask(request: Request[R, IO]) -> Generator[Request[R, IO], object, R]:
    """Yield `request` and return its answer, typed: ``numbers = yield from ask(Reserve(...))``.

    The one place an answer is cast: the drivers send what ``request.answer`` returned."""
    answer = yield request
    return cast(R, answer)


def run(flow: Generator[Request[Any, IO], object, T], io: IO) -> T:
    """Drive a flow synchronously: each request is answered by its handler on `io`."""
    answer: object = None
    error: Exception | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(answer)
        except StopIteration as stop:
            return cast(T, stop.value)
        try:
            answer, error = request.answer(io), None
        except Exception as exc:  # noqa: BLE001 - handed to the flow, which re-raises what it does not handle
            answer, error = None, exc


async def arun(flow: Generator[Request[Any, IO], object, T], io: IO) -> T:
    """Drive a flow asynchronously: each request is answered by its awaited async handler on `io`."""
    answer: object = None
    error: Exception | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(answer)
        except StopIteration as stop:
            return cast(T, stop.value)
        try:
            answer, error = await request.aanswer(io), None
        except Exception as exc:  # noqa: BLE001 - handed to the flow, as in `run`
            answer, error = None, exc


def drive(reads: Generator[Q, A, T], read: Callable[[Q], A]) -> T:
    """Run a generator of plain reads (no `Request`s): each yielded `Q` is answered by `read`
    with an `A`. The store's operations, the Postgres index's statements and the cluster-forest
    walks are such generators."""
    try:
        request = next(reads)
        while True:
            request = reads.send(read(request))
    except StopIteration as stop:
        return cast(T, stop.value)


async def adrive(reads: Generator[Q, A, T], read: Callable[[Q], Awaitable[A]]) -> T:
    """`drive`, awaiting each read."""
    try:
        request = next(reads)
        while True:
            request = reads.send(await read(request))
    except StopIteration as stop:
        return cast(T, stop.value)
