"""Fixtures of the index conformance files: a fresh Postgres database per module, and every
`SearchIndex` implementation (`tests.support.indexes.INDEXES`) on it."""

from __future__ import annotations

import pytest

from tests.support.indexes import INDEXES, make_index
from tests.support.postgres_server import fresh_database


@pytest.fixture(scope="module")
def index_database(postgres_uri, request):
    """This module's own database, created empty."""
    return fresh_database(postgres_uri, f"langmem_{request.module.__name__.rsplit('.', 1)[-1]}")


@pytest.fixture(params=INDEXES)
def index(request, tmp_path):
    """Every SearchIndex implementation."""
    return make_index(request, tmp_path, "index_database")
