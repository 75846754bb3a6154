"""The README's PostgreSQL example runs as written, on a real server (the tests' own), with a scripted
model in place of the OpenAI one and a small budget so that pages form and a search recalls one."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging.testing import ScriptedChatModel
from tests.support.postgres_server import postgres_uri_fixture  # noqa: F401  (registers the postgres_uri fixture)

README = Path(__file__).resolve().parents[2] / "README.md"
FACTS = [f"Note {i}: my neighbour Zarko{i} keeps {i + 3} beehives near Lake Bled{i}." for i in range(12)]
QUESTION = "How many beehives does Zarko2 keep?"


def postgres_example() -> str:
    text = README.read_text()
    start = text.index("**On PostgreSQL**")
    return re.search(r"```python\n(.*?)```", text[start:], re.DOTALL).group(1)


def _respond(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and last.content == QUESTION:
        return AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "Zarko2"},
                                          "id": f"call-{uuid.uuid4().hex[:8]}"}])
    return AIMessage("Noted.")


def test_readme_postgres_example_pages_into_postgres_and_searches_there(postgres_uri):
    pytest.importorskip("langgraph.store.postgres", reason="pip install 'langmem-paging[postgres]'")
    from langgraph.store.postgres import PostgresStore

    from tests.support.postgres_server import fresh_database

    db = fresh_database(postgres_uri, "readme_example")
    code = postgres_example()
    invoke = ('    agent.invoke({"messages": ["My cousin Farid adopted a greyhound."]}, '
              '{"configurable": {"thread_id": "user-42"}})\n')
    for old in ['DB = "postgresql://app@localhost:5432/agent"', '"openai:gpt-4o-mini"', "max_tokens=4000", invoke]:
        assert code.count(old) == 1, f"the README example changed: {old!r} not found once"
    code = (code.replace('DB = "postgresql://app@localhost:5432/agent"', f"DB = {db!r}")
            .replace('"openai:gpt-4o-mini"', "model")
            .replace("max_tokens=4000", "max_tokens=500")
            .replace(invoke, invoke + '    for text in TEXTS:\n'
                                      '        agent.invoke({"messages": [text]}, {"configurable": {"thread_id": "user-42"}})\n'))
    model = ScriptedChatModel(responses=[_respond] * 40)
    namespace = {"model": model, "TEXTS": [*FACTS, QUESTION]}
    exec(compile(code, "README.md (PostgreSQL example)", "exec"), namespace)  # noqa: S102 - the README's own code

    with PostgresStore.from_conn_string(db) as store:
        pages = store.search(("langmem_paging", "user-42", "pages"), limit=100)
        assert pages, "no page was stored in PostgreSQL"
    import psycopg

    with psycopg.connect(db) as conn:
        (passages,) = conn.execute("SELECT count(*) FROM langmem_paging_passages WHERE thread_id = 'user-42'").fetchone()
    assert passages > 0  # the shared search index holds the paged-out messages
    recalled = [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert recalled and FACTS[2] in recalled[-1].content  # found by the Postgres full-text search
