"""Open a LangGraph store or checkpointer from a URI, for the operator tools.

``sqlite:///pages.sqlite`` (a path relative to the working directory), ``sqlite:////abs/pages.sqlite``
(absolute), ``postgresql://user@host:port/db`` (also ``postgres://``). A `SqliteStore` and a
`SqliteSaver` can share one file, and a `PostgresStore` and a `PostgresSaver` one database, so the
checkpoints URI defaults to the store's.

Opening never creates what is not there, unless asked (``create=True``, for imports): a missing
SQLite file, a file that is not a SQLite database, or a database without the store's (or the
checkpointer's) tables, is a `BackendError` saying so, not a new empty database.

Example:
    >>> sqlite_path("sqlite:///pages.sqlite"), sqlite_path("sqlite:////var/lib/app/pages.sqlite")
    ('pages.sqlite', '/var/lib/app/pages.sqlite')
    >>> scheme_of("mysql://db")
    Traceback (most recent call last):
    ...
    langmem_paging.storage.backends.BackendError: Unknown URI scheme 'mysql' in 'mysql://db'. Available: 'postgres', 'postgresql', 'sqlite'.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

Saver: TypeAlias = BaseCheckpointSaver[str]
"""A LangGraph checkpointer (SQLite's and Postgres's version channels with strings)."""

if TYPE_CHECKING:  # optional dependencies (the `postgres` extra): imported for their types only
    from psycopg import Connection
    from psycopg.rows import DictRow

__all__ = ["SCHEMES", "BackendError", "open_checkpointer", "open_store", "scheme_of", "sqlite_path"]

_EXTRAS = {"sqlite": "sqlite", "postgres": "postgres", "postgresql": "postgres"}


class BackendError(Exception):
    """A store or checkpointer cannot be opened; the message says what to do."""


def scheme_of(uri: str) -> str:
    """The URI's scheme, checked against `SCHEMES`."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    if scheme not in SCHEMES:
        raise BackendError(
            f"Unknown URI scheme {scheme!r} in {uri!r}. Available: {', '.join(repr(s) for s in sorted(SCHEMES))}."
        )
    return scheme


def sqlite_path(uri: str) -> str:
    """The file path of a ``sqlite:///`` URI (three slashes, then the path: a fourth means absolute)."""
    prefix = "sqlite:///"
    if not uri.lower().startswith(prefix) or len(uri) == len(prefix):
        raise BackendError(
            f"A SQLite URI is sqlite:///relative/path.sqlite or sqlite:////absolute/path.sqlite; got {uri!r}."
        )
    return uri[len(prefix) :]


def _missing_extra(scheme: str, error: ImportError) -> BackendError:
    extra = _EXTRAS[scheme]
    return BackendError(
        f"{scheme}:// needs the {extra!r} extra ({error.name or error} is not installed): "
        f'pip install "langmem-paging[{extra}]"'
    )


# -- SQLite ---------------------------------------------------------------------------------------


def _sqlite_connect(uri: str, *, create: bool, autocommit: bool) -> sqlite3.Connection:
    path = sqlite_path(uri)
    if not create and not Path(path).is_file():
        raise BackendError(f"No SQLite file at {str(Path(path).resolve())!r} (from {uri!r}).")
    conn = (
        sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        if autocommit
        else sqlite3.connect(path, check_same_thread=False)
    )
    try:  # sqlite3 opens any file lazily: read its schema now, so a file that is not one fails here
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as error:
        conn.close()
        raise BackendError(
            f"{str(Path(path).resolve())!r} (from {uri!r}) is not a SQLite database ({error}); "
            "pass --store the file the agent's SqliteStore writes."
        ) from None
    return conn


def _sqlite_has_table(conn: sqlite3.Connection, table: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return row is not None


@contextlib.contextmanager
def _sqlite_store(uri: str, create: bool) -> Iterator[BaseStore]:
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError as error:
        raise _missing_extra("sqlite", error) from error
    with contextlib.closing(_sqlite_connect(uri, create=create, autocommit=True)) as conn:
        if not create and not _sqlite_has_table(conn, "store"):
            raise BackendError(f"{uri!r} holds no LangGraph store (no `store` table).")
        store = SqliteStore(conn)
        store.setup()
        yield store


@contextlib.contextmanager
def _sqlite_saver(uri: str) -> Iterator[Saver | None]:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as error:
        raise _missing_extra("sqlite", error) from error
    with contextlib.closing(_sqlite_connect(uri, create=False, autocommit=False)) as conn:
        # SqliteSaver creates its tables on first use: look before, so a store-only file stays one.
        yield SqliteSaver(conn) if _sqlite_has_table(conn, "checkpoints") else None


# -- PostgreSQL -----------------------------------------------------------------------------------


def _pg_connect(uri: str, scheme: str) -> Connection[DictRow]:
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError as error:
        raise _missing_extra(scheme, error) from error
    try:
        # The settings LangGraph's Postgres store and saver require.
        return psycopg.connect(uri, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    except psycopg.Error as error:
        raise BackendError(f"Cannot connect to {uri!r}: {error}") from error


def _pg_has_table(conn: Connection[DictRow], table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) AS t", (table,)).fetchone()
    return row is not None and row["t"] is not None


def _pg_connection(uri: str) -> contextlib.closing[Connection[DictRow]]:
    """An open connection to `uri`, closed on exit."""
    return contextlib.closing(_pg_connect(uri, scheme_of(uri)))


@contextlib.contextmanager
def _pg_store(uri: str, create: bool) -> Iterator[BaseStore]:
    try:
        from langgraph.store.postgres import PostgresStore
    except ImportError as error:
        raise _missing_extra(scheme_of(uri), error) from error
    with _pg_connection(uri) as conn:
        store = PostgresStore(conn)
        if create:
            store.setup()
        elif not _pg_has_table(conn, "store"):
            raise BackendError(f"{uri!r} holds no LangGraph store (no `store` table).")
        yield store


@contextlib.contextmanager
def _pg_saver(uri: str) -> Iterator[Saver | None]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError as error:
        raise _missing_extra(scheme_of(uri), error) from error
    with _pg_connection(uri) as conn:
        yield PostgresSaver(conn) if _pg_has_table(conn, "checkpoints") else None


StoreOpener: TypeAlias = Callable[[str, bool], AbstractContextManager[BaseStore]]
"""Opens the store at a URI (`create`: make it if missing), closing it on exit."""
SaverOpener: TypeAlias = Callable[[str], AbstractContextManager["Saver | None"]]
"""Opens the checkpointer at a URI (None: the database holds no checkpoints), closing it on exit."""

SCHEMES: dict[str, tuple[StoreOpener, SaverOpener]] = {
    "sqlite": (_sqlite_store, _sqlite_saver),
    "postgresql": (_pg_store, _pg_saver),
    "postgres": (_pg_store, _pg_saver),
}
"""URI scheme -> (store opener, checkpointer opener)."""


@contextlib.contextmanager
def open_store(uri: str, *, create: bool = False) -> Iterator[BaseStore]:
    """The LangGraph store at `uri`, closed on exit.

    Args:
        uri: ``sqlite:///...`` or ``postgresql://...``.
        create: Create the file or the store's tables if missing (imports); otherwise a
            missing store is an error.

    Raises:
        BackendError: Unknown scheme, missing extra (named), missing file or tables, no connection.
    """
    with SCHEMES[scheme_of(uri)][0](uri, create) as store:
        yield store


@contextlib.contextmanager
def open_checkpointer(uri: str, *, required: bool = True) -> Iterator[Saver | None]:
    """The LangGraph checkpointer at `uri`, closed on exit; None if it holds no checkpoints table
    and `required` is False.

    Raises:
        BackendError: As `open_store`, and for a missing checkpoints table when `required`.
    """
    with SCHEMES[scheme_of(uri)][1](uri) as saver:
        if saver is None and required:
            raise BackendError(f"{uri!r} holds no LangGraph checkpoints (no `checkpoints` table).")
        yield saver
