"""Every Python snippet of the README runs: the Quickstart verbatim in `test_quickstart.py`, the
PostgreSQL example on a real server (the tests' own) with a scripted model in place of the OpenAI one
and a small budget so that pages form and a search recalls one, the offline ones here as they stand
(what they print is checked against the output the README shows). A snippet no test runs fails
`test_every_readme_snippet_is_run`."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging.testing import ScriptedChatModel

README = Path(__file__).resolve().parents[2] / "README.md"
FACTS = [f"Note {i}: my neighbour Zarko{i} keeps {i + 3} beehives near Lake Bled{i}." for i in range(12)]
QUESTION = "How many beehives does Zarko2 keep?"


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def snippet_after(marker: str) -> str:
    """The first Python block after `marker` in the README."""
    text = README.read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(marker) :], re.DOTALL).group(1)


def postgres_example() -> str:
    return snippet_after("**On PostgreSQL**")


# Each marker names the README text a snippet follows; the test that runs it is beside it.
OFFLINE = "No key at hand?"
STATE_GRAPH = "**A hand-built `StateGraph`**"
PURE = "**The pure function**"
LEGACY = "**Legacy: `create_react_agent`'s `pre_model_hook`**"
IMPORTS = "Every public class imports from the top level:"
FORGET = "## Forget and delete"
RUN_BY = {
    "## Quickstart": "test_quickstart.py",
    "**On PostgreSQL**": "postgres",
    OFFLINE: "offline",
    STATE_GRAPH: "state_graph",
    PURE: "pure",
    LEGACY: "legacy",
    IMPORTS: "imports",
    FORGET: "forget",
}


def test_every_readme_snippet_is_run():
    """A new README snippet needs a marker here and a test; a moved one is caught too."""
    covered = {snippet_after(marker) for marker in RUN_BY}
    assert [s.splitlines()[0] for s in snippets() if s not in covered] == []


def _run(code: str, name: str, namespace: dict | None = None) -> tuple[dict, str]:
    """Execute a snippet as it stands (in `namespace`, for one that continues an agent); its printed
    lines are returned."""
    import contextlib
    import io

    namespace = {} if namespace is None else namespace
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md ({name})", "exec"), namespace)  # noqa: S102 - the README's own code
    return namespace, out.getvalue()


def _shown(code: str) -> str:
    """The output a snippet's trailing comment shows (``# [...]`` lines after its last print)."""
    tail = code.rstrip().splitlines()
    shown = []
    while tail and tail[-1].startswith("#"):
        shown.insert(0, tail.pop()[1:].strip())
    return " ".join(shown)


def test_readme_offline_agent_prints_the_bookmarks_it_shows():
    code = snippet_after(OFFLINE)
    namespace, printed = _run(code, "offline agent")
    assert printed.strip() == _shown(code)
    assert (
        namespace["paging"].page_store.get("t1", "p1").messages[0].content
        == "I will fly to Lisbon on Friday."
    )


@pytest.mark.parametrize("fake", ["GenericFakeChatModel", "FakeListChatModel"])
def test_readme_says_langchain_fakes_cannot_bind_paging_tool_and_scripted_model_can(fake):
    """What the README says after the offline snippet holds: langchain_core's fakes fail once paging
    adds its tool, and `ScriptedChatModel` with the same replies runs the agent."""
    from langchain.agents import create_agent
    from langchain_core.language_models import fake_chat_models
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from langmem_paging import PagingMiddleware

    readme = " ".join(README.read_text().split())
    assert f"`{fake}`" in readme and "raise `NotImplementedError` from `bind_tools`" in readme
    models = {
        "GenericFakeChatModel": lambda: fake_chat_models.GenericFakeChatModel(messages=iter(["Noted."])),
        "FakeListChatModel": lambda: fake_chat_models.FakeListChatModel(responses=["Noted."]),
    }
    config = {"configurable": {"thread_id": "t1"}}

    def turn(model):
        agent = create_agent(
            model, middleware=[PagingMiddleware(300)], checkpointer=InMemorySaver(), store=InMemoryStore()
        )
        return agent.invoke({"messages": ["I will fly to Lisbon on Friday."]}, config)

    with pytest.raises(NotImplementedError):
        turn(models[fake]())
    assert turn(ScriptedChatModel(responses=["Noted."]))["messages"][-1].content == "Noted."


def test_readme_state_graph_pages_and_routes_recall_to_a_tool_node():
    namespace, printed = _run(snippet_after(STATE_GRAPH), "StateGraph")
    assert re.fullmatch(r"\[[pc]\d+:.*\]", printed.strip())  # a bookmark where the first turns were
    graph, config = namespace["graph"], namespace["config"]
    assert "tools" in graph.get_graph().nodes and graph.get_state(config).values["paging"]


def test_readme_pure_function_prints_what_it_shows():
    code = snippet_after(PURE)
    _, printed = _run(code, "page_messages")
    assert printed.strip() == _shown(code)


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_readme_legacy_pre_model_hook_leaves_the_history_whole():
    namespace, _ = _run(snippet_after(LEGACY), "pre_model_hook")
    agent = namespace["agent"]
    config = {"configurable": {"thread_id": "legacy"}}
    for city in ["Lisbon", "Kyoto", "Quito", "Oslo", "Rome"]:
        state = agent.invoke({"messages": [("user", f"I will fly to {city}.")]}, config)
    assert [m.content for m in state["messages"] if m.type == "human"][0] == "I will fly to Lisbon."
    assert state["paging"]  # paging ran and kept its state; the view went to the model only


def test_readme_forget_and_delete_run_on_an_agent():
    from tests.support.scenario_helpers import scripted_agent

    agent, paging, _ = scripted_agent(500)
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("My card is 4929 1234.", id="card")]}, config)
    for fact in FACTS:
        agent.invoke({"messages": [fact]}, config)
    assert any(m.id == "card" for p in paging.page_store.list_pages("t") for m in p.messages)
    _run(
        snippet_after(FORGET), "forget and delete", {"paging": paging, "thread_id": "t", "message_id": "card"}
    )
    assert paging.page_store.store.search(("langmem_paging",), limit=5) == []


def test_readme_import_paths_import():
    namespace, _ = _run(snippet_after(IMPORTS), "import paths")
    assert type(namespace["paging"].config.tiers).__name__ == "UtilityScoring"


def _respond(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and last.content == QUESTION:
        return AIMessage(
            "",
            tool_calls=[
                {"name": "recall", "args": {"query": "Zarko2"}, "id": f"call-{uuid.uuid4().hex[:8]}"}
            ],
        )
    return AIMessage("Noted.")


def test_readme_postgres_example_pages_into_postgres_and_searches_there(postgres_uri):
    pytest.importorskip("langgraph.store.postgres", reason="pip install 'langmem-paging[postgres]'")
    from langgraph.store.postgres import PostgresStore

    from tests.support.postgres_server import fresh_database

    db = fresh_database(postgres_uri, "readme_example")
    code = postgres_example()
    invoke = (
        '    agent.invoke({"messages": ["My cousin Farid adopted a greyhound."]}, '
        '{"configurable": {"thread_id": "user-42"}})\n'
    )
    for old in [
        'DB = "postgresql://app@localhost:5432/agent"',
        '"openai:gpt-4o-mini"',
        "max_tokens=4000",
        invoke,
    ]:
        assert code.count(old) == 1, f"the README example changed: {old!r} not found once"
    code = (
        code.replace('DB = "postgresql://app@localhost:5432/agent"', f"DB = {db!r}")
        .replace('"openai:gpt-4o-mini"', "model")
        .replace("max_tokens=4000", "max_tokens=500")
        .replace(
            invoke,
            invoke + "    for text in TEXTS:\n"
            '        agent.invoke({"messages": [text]}, {"configurable": {"thread_id": "user-42"}})\n',
        )
    )
    model = ScriptedChatModel(responses=[_respond] * 40)
    namespace = {"model": model, "TEXTS": [*FACTS, QUESTION]}
    exec(compile(code, "README.md (PostgreSQL example)", "exec"), namespace)  # noqa: S102 - the README's own code

    with PostgresStore.from_conn_string(db) as store:
        pages = store.search(("langmem_paging", "user-42", "pages"), limit=100)
        assert pages, "no page was stored in PostgreSQL"
    import psycopg

    with psycopg.connect(db) as conn:
        (passages,) = conn.execute(
            "SELECT count(*) FROM langmem_paging_passages WHERE thread_id = 'user-42'"
        ).fetchone()
    assert passages > 0  # the shared search index holds the paged-out messages
    recalled = [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert recalled and FACTS[2] in recalled[-1].content  # found by the Postgres full-text search


def test_choosing_migration_snippet_builds_the_agent_it_shows(monkeypatch):
    """docs/choosing.md's migration from SummarizationMiddleware runs as it stands (a scripted model
    for the model string) and keeps the trigger/keep numbers it claims."""
    from langchain.agents import factory

    model = ScriptedChatModel(responses=["Noted."] * 4)
    monkeypatch.setattr(factory, "init_chat_model", lambda name, *a, **k: model)
    text = (README.parent / "docs" / "choosing.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    namespace, _ = _run(code, "docs/choosing.md migration")
    paging = namespace["paging"]
    assert (paging.config.max_tokens, paging.config.low_water_tokens) == (4000, 3000)
    state = namespace["agent"].invoke({"messages": ["hello"]}, {"configurable": {"thread_id": "m"}})
    assert state["messages"][-1].content == "Noted." and "paging" in state
