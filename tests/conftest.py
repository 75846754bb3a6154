import sqlite3
import sys
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).parent))


def _sqlite_store():
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    return store


STORE_FACTORIES = {"memory": InMemoryStore, "sqlite": _sqlite_store}


@pytest.fixture(params=sorted(STORE_FACTORIES))
def base_store(request):
    """Every LangGraph store backend the conformance suites run against."""
    return STORE_FACTORIES[request.param]()
