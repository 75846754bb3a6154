"""Ecosystem v4 (issue 22): what a LangGraph user meets first, through the user's own path
(create_agent + PagingMiddleware with a scripted model, PagingNode in a StateGraph, the CLI)."""

from __future__ import annotations

import sqlite3
import uuid
import warnings
from collections import Counter

import httpx
import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware, PagingNode, PagingWarning, reconstruct_history
from langmem_paging.cli import main
from langmem_paging.core.tokens import shared_counter
from langmem_paging.index.sqlite import SqliteSearchIndex
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import ScriptedChatModel

FACTS = [
    f"Note {i}: my neighbour Zarko{i} keeps {i + 3} beehives near Lake Bled{i} and sells the honey on "
    f"Saturdays at the market in Radovljica, stall number {40 + i}."
    for i in range(16)
]


def config_for(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def rebuilt(agent, store, thread_id: str) -> list:
    """The thread's whole history, from its state and its pages."""
    values = agent.get_state(config_for(thread_id)).values
    page_store = PageStore(store)
    return reconstruct_history(
        values["messages"],
        lambda p: page_store.get(thread_id, p),
        clusters=lambda c: page_store.get_cluster(thread_id, c),
        state=values.get("paging"),
    )


async def drive(agent, texts, thread_id: str, use_async: bool):
    for text in texts:
        if use_async:
            await agent.ainvoke({"messages": [text]}, config_for(thread_id))
        else:
            agent.invoke({"messages": [text]}, config_for(thread_id))
    return agent.get_state(config_for(thread_id)).values


# -- 2. verify without checkpoints cannot verify (exit 2), with them it is lossless ----------------------


def test_verify_where_the_checkpoints_are_elsewhere_says_it_cannot_verify(tmp_path, capsys):
    pytest.importorskip("langgraph.store.sqlite", reason="pip install 'langmem-paging[sqlite]'")
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    pages, checkpoints = tmp_path / "pages.sqlite", tmp_path / "checkpoints.sqlite"
    store = SqliteStore(sqlite3.connect(pages, check_same_thread=False, isolation_level=None))
    store.setup()
    saver = SqliteSaver(sqlite3.connect(checkpoints, check_same_thread=False))
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 20),
        middleware=[PagingMiddleware(max_tokens=600)],
        store=store,
        checkpointer=saver,
    )
    for fact in FACTS[:10]:
        agent.invoke({"messages": [fact]}, config_for("user-42"))
    assert PageStore(store).list_pages("user-42"), "no page was formed"

    code = main(["verify", "user-42", "--store", f"sqlite:///{pages}"])
    out, err = capsys.readouterr()
    assert code == 2 and not out
    assert "cannot verify: no checkpoints in this store; pass --checkpoints PATH" in err

    code = main(
        ["verify", "user-42", "--store", f"sqlite:///{pages}", "--checkpoints", f"sqlite:///{checkpoints}"]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and "LOSSLESS" in out and "NOT" not in out


# -- 3. tool_name, and a clash refused where the agent is built ------------------------------------------


def test_tool_name_renames_the_recall_tool_the_model_calls():
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_2", tool_name="memory_recall")

    def reply(messages):
        if isinstance(messages[-1], HumanMessage) and "How many beehives" in messages[-1].content:
            return AIMessage(
                "", tool_calls=[{"name": "memory_recall", "args": {"page_ids": ["p1"]}, "id": "c1"}]
            )
        return AIMessage("Noted.")

    model = ScriptedChatModel(responses=[reply] * 30)
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    for fact in [*FACTS[:8], "How many beehives does Zarko0 keep?"]:
        state = agent.invoke({"messages": [fact]}, config_for("t"))

    assert model.bound_tools == ["memory_recall"]
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert result.name == "memory_recall" and FACTS[0] in result.content
    assert PagingNode(max_tokens=500, tool_name="memory_recall").recall_tool.name == "memory_recall"


@tool
def recall(query: str) -> str:
    """The agent's own recall (a search over its documents)."""
    return f"documents about {query}"


def test_a_user_tool_named_recall_is_refused_when_the_agent_is_built():
    with pytest.raises(
        ValueError,
        match=r"Two tools are named 'recall': the agent's tool .*recall and "
        r"PagingMiddleware's recall tool.*tool_name='memory_recall'",
    ):
        create_agent(
            ScriptedChatModel(responses=[]), tools=[recall], middleware=[PagingMiddleware(max_tokens=800)]
        )

    # renamed: both tools are there, each under its own name
    agent = create_agent(
        ScriptedChatModel(responses=[]),
        tools=[recall],
        middleware=[PagingMiddleware(max_tokens=800, tool_name="memory_recall")],
    )
    assert sorted(agent.nodes["tools"].bound.tools_by_name) == ["memory_recall", "recall"]


def test_a_tool_named_recall_added_by_another_middleware_at_run_time_is_refused_before_the_model_call():
    class AddsRecall(AgentMiddleware):
        def wrap_model_call(self, request, handler):
            return handler(request.override(tools=[*request.tools, recall]))

    model = ScriptedChatModel(responses=["never"])
    agent = create_agent(
        model,
        middleware=[AddsRecall(), PagingMiddleware(max_tokens=800)],
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )
    with pytest.raises(ValueError, match="Two tools are named 'recall'"):
        agent.invoke({"messages": ["hi"]}, config_for("t"))
    assert model.prompts == []


# -- 4. counting as LangChain users count ------------------------------------------------------------------


def test_approximate_counter_pages_by_langchains_count():
    paging = PagingMiddleware(max_tokens=576, token_counter="approximate", boundary="fixed_2")
    assert paging.config.token_counter is count_tokens_approximately
    model = ScriptedChatModel(responses=["Noted."] * 20)
    agent = create_agent(model, middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver())
    for fact in FACTS[:12]:
        agent.invoke({"messages": [fact]}, config_for("t"))
    overhead = shared_counter("cl100k_base").count_tools([paging.recall_tool])
    # p1 shows as its bookmark or inside a cluster bookmark's span (bookmarks that show more words
    # fold sooner under a character-based count)
    assert any("[p1:" in str(m.content) or "p1-p" in str(m.content) for m in model.prompts[-1])
    assert max(count_tokens_approximately(p) for p in model.prompts) <= 576 - overhead


class CountingModel(ScriptedChatModel):
    """A chat model whose provider tokenizer says 25 tokens a message."""

    counted: list[tuple] = []

    def get_num_tokens_from_messages(self, messages, tools=None) -> int:
        self.counted += [(m.id, str(m.content)) for m in messages]
        return 25 * len(messages)


def test_a_chat_model_counts_with_its_own_tokenizer():
    model = CountingModel(responses=["Noted."] * 20, counted=[])
    paging = PagingMiddleware(max_tokens=500, token_counter=model, boundary="fixed_2")
    agent = create_agent(model, middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver())
    for fact in FACTS[:12]:
        agent.invoke({"messages": [fact]}, config_for("t"))
    overhead = shared_counter("cl100k_base").count_tools([paging.recall_tool])
    assert model.counted, "the model's get_num_tokens_from_messages was not used"
    # a message is counted once, not on every turn it stays (twice when its id alternates between the
    # message and the bookmark that took its id: one cache entry per id)
    assert max(Counter(c for c in model.counted if c[0] is not None).values()) <= 2
    assert max(25 * len(p) for p in model.prompts) <= 500 - overhead  # its rule, not tiktoken's
    assert str(model.prompts[-1][0].content).startswith(("[p1:", "[c"))  # paged out behind a bookmark


def provider_reply(overhead: int, ratio: float):
    """A model whose provider counts `ratio` times tiktoken (a Claude-like tokenizer) and says so in
    usage_metadata, as LangChain integrations do."""
    counter = shared_counter("cl100k_base")

    def reply(messages):
        provider = round(ratio * (counter(messages) + overhead))
        return AIMessage(
            "Noted.",
            usage_metadata={"input_tokens": provider, "output_tokens": 2, "total_tokens": provider + 2},
        )

    return reply


@pytest.mark.parametrize("calibrate", [False, True])
def test_usage_metadata_calibration_moves_the_count_to_the_providers(calibrate):
    max_tokens, ratio = 900, 1.4
    paging = PagingMiddleware(max_tokens=max_tokens, boundary="fixed_2", calibrate=calibrate)
    overhead = shared_counter("cl100k_base").count_tools([paging.recall_tool])
    model = ScriptedChatModel(responses=[provider_reply(overhead, ratio)] * 30)
    agent = create_agent(model, middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver())
    provider_counts = []
    counter = shared_counter("cl100k_base")
    for fact in FACTS:
        state = agent.invoke({"messages": [fact]}, config_for("t"))
        provider_counts.append(round(ratio * (counter(model.prompts[-1]) + overhead)))

    if not calibrate:
        assert "paging_calibration" not in state
        assert max(provider_counts) > max_tokens  # tiktoken's count kept under budget; the provider's was not
    else:
        assert state["paging_calibration"]["ratio"] == pytest.approx(ratio, abs=0.02)
        assert max(provider_counts[1:]) <= max_tokens  # from the second call on, the provider's count fits


def test_counting_claude_with_tiktoken_warns_once():
    class Claude(ScriptedChatModel):
        model_name: str = f"claude-sonnet-4-{uuid.uuid4().hex[:6]}"

    agent = create_agent(
        Claude(responses=["Noted."] * 3),
        middleware=[PagingMiddleware(max_tokens=2000)],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for text in ["one", "two", "three"]:
            agent.invoke({"messages": [text]}, config_for("t"))
    messages = [str(w.message) for w in caught if "tokenizes differently" in str(w.message)]
    assert len(messages) == 1 and "claude-sonnet-4" in messages[0] and "token_counter=" in messages[0]
    assert "calibrate=True" in messages[0]


# -- 5. bad options fail at construction, naming the option ------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_tokens": 4000, "search_embedder": "nope"},
            "Invalid paging option `search_embedder`: Unknown embedder 'nope'",
        ),
        (
            {"max_tokens": 4000, "ttl": -1},
            "Invalid paging option `ttl`: must be a positive number of minutes",
        ),
        ({"max_tokens": True}, "Invalid paging option `max_tokens`: must be an int number of tokens"),
        ({"max_tokens": "4000"}, "Invalid paging option `max_tokens`: must be an int number of tokens"),
        ({"max_tokens": 4000, "index": "sqlite"}, "Invalid paging option `index`: must be a SearchIndex"),
        (
            {"max_tokens": 1000, "low_water_tokens": 2000},
            "Invalid paging option `low_water_tokens`: 2000 is above",
        ),
        ({"max_tokens": 1000, "tool_name": "memory recall"}, "Invalid paging option `tool_name`"),
        (
            {"max_tokens": 1000, "token_counter": "exact"},
            "Unknown token counter 'exact'. Available: 'approximate'",
        ),
    ],
)
@pytest.mark.parametrize("cls", [PagingMiddleware, PagingNode])
def test_bad_options_fail_at_construction_naming_the_option(cls, options, message):
    with pytest.raises((ValueError, TypeError)) as error:
        cls(**options)
    assert message in str(error.value)


def test_calibrate_on_a_node_is_refused():
    with pytest.raises(ValueError, match="`calibrate`: it learns from the model's responses"):
        PagingNode(max_tokens=1000, calibrate=True)


def test_the_tiny_budget_warning_reports_the_real_overhead():
    paging = PagingMiddleware(max_tokens=100)
    agent = create_agent(
        ScriptedChatModel(responses=["ok"]),
        middleware=[paging],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
        system_prompt="You are a helpful assistant.",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent.invoke({"messages": ["hello there " * 30]}, config_for("t"))
    counter = shared_counter("cl100k_base")
    overhead = counter.count_tools([paging.recall_tool]) + counter.count_message(
        agent.get_state(config_for("t"))
        .values["messages"][0]
        .model_copy(update={"content": "You are a helpful assistant."})
    )
    (message,) = [str(w.message) for w in caught if "needs" in str(w.message)]
    assert f"max_tokens=100 minus {overhead} for the system prompt and tool schemas" in message


def test_sqlite_search_index_refuses_a_positional_connection(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    with pytest.raises(TypeError, match=r"SqliteSearchIndex\(conn=conn, lock=lock\)"):
        SqliteSearchIndex(conn)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.sqlite"]  # no file named after the connection


def test_report_into_a_missing_directory_is_a_clear_error(tmp_path, capsys):
    code = main(
        [
            "report",
            "t",
            "--store",
            f"sqlite:///{tmp_path / 'none.sqlite'}",
            "--out",
            str(tmp_path / "missing" / "x.html"),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2 and "does not exist" in err and "Traceback" not in err


def test_a_thread_id_with_nul_fails_at_once_with_a_clear_error():
    store = InMemoryStore()
    model = ScriptedChatModel(responses=["never"])
    agent = create_agent(
        model, middleware=[PagingMiddleware(max_tokens=1000)], store=store, checkpointer=InMemorySaver()
    )
    with pytest.raises(ValueError, match="contains a NUL character"):
        agent.invoke({"messages": ["hi"]}, config_for("user\x0042"))
    assert model.prompts == [] and not list(store.search(("langmem_paging",)))


# -- 6. a context-length error pages to 80% and retries once --------------------------------------------


def openai_overflow() -> Exception:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    return openai.BadRequestError(
        "Error code: 400 - This model's maximum context length is 128000 tokens.",
        response=httpx.Response(400, request=request),
        body={
            "message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        },
    )


class BadRequestError(Exception):
    """Stands in for `anthropic.BadRequestError` (not a test dependency): its status and its text."""

    status_code = 400


def anthropic_overflow() -> Exception:
    return BadRequestError(
        "Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', "
        "'message': 'prompt is too long: 208010 tokens > 200000 maximum'}}"
    )


def refusing_over(error: Exception, limit: int, refusals: list):
    """A provider whose real window is `limit` tiktoken tokens of messages, below what paging budgets:
    it refuses a longer prompt (the count was wrong), as the provider's SDK raises."""
    counter = shared_counter("cl100k_base")

    def reply(messages):
        if counter(messages) > limit:
            refusals.append(counter(messages))
            raise error
        return AIMessage("Noted.")

    return reply


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("make_error", [openai_overflow, anthropic_overflow])
async def test_a_context_length_error_pages_smaller_and_retries_once(make_error, use_async):
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=900, boundary="fixed_2")
    counter = shared_counter("cl100k_base")
    budget = 900 - counter.count_tools([paging.recall_tool])  # the messages' share of max_tokens
    refusals: list[int] = []
    model = ScriptedChatModel(responses=[refusing_over(make_error(), int(0.9 * budget), refusals)] * 60)
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())

    with pytest.warns(PagingWarning, match="refused a prompt within max_tokens=900"):
        values = await drive(agent, FACTS, "t", use_async)

    assert len(refusals) == 1, "exactly one call was refused (then every prompt fit)"
    at = next(i for i, p in enumerate(model.prompts) if counter(p) == refusals[0])
    refused, retried = model.prompts[at], model.prompts[at + 1]
    assert counter(retried) < counter(refused) and counter(retried) <= 0.8 * budget
    assert retried[-1].content == refused[-1].content  # the same turn, paged smaller
    calibration = values["paging_calibration"]  # later turns keep the smaller budget: 80% of what was refused
    assert calibration["ratio"] == 1.0 and 0 < calibration["scale"] <= 0.8
    assert max(counter(p) for p in model.prompts[at + 1 :]) <= 0.8 * budget
    assert values["messages"][-1].content == "Noted."
    history = rebuilt(agent, store, "t")  # lossless afterwards
    assert [m.content for m in history if isinstance(m, HumanMessage)] == FACTS
    assert [m.type for m in history] == ["human", "ai"] * len(FACTS)


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_second_context_length_error_is_the_providers(use_async):
    def always(messages):
        raise openai_overflow()

    model = ScriptedChatModel(responses=[always] * 4)
    agent = create_agent(
        model,
        middleware=[PagingMiddleware(max_tokens=900)],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    with (
        pytest.raises(openai.BadRequestError, match="maximum context length"),
        pytest.warns(PagingWarning, match="budget is 1 "),  # the retry pages to 80% of the refused prompt
        pytest.warns(PagingWarning, match="max_tokens is above the model's context window"),
    ):
        await drive(agent, ["hello"], "t", use_async)
    assert len(model.prompts) == 2  # one retry, no more


def test_other_model_errors_are_not_retried():
    def broken(messages):
        raise RuntimeError("rate limited")

    model = ScriptedChatModel(responses=[broken] * 4)
    agent = create_agent(
        model,
        middleware=[PagingMiddleware(max_tokens=900)],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    with pytest.raises(RuntimeError, match="rate limited"):
        agent.invoke({"messages": ["hello"]}, config_for("t"))
    assert len(model.prompts) == 1


# -- 1. page_store of a middleware built without store= ----------------------------------------------------


def test_page_store_without_store_is_the_graphs_and_refuses_to_guess_between_two():
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_2")
    with pytest.raises(ValueError, match="has not run yet"):
        paging.page_store  # noqa: B018
    first, second = InMemoryStore(), InMemoryStore()
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 20),
        middleware=[paging],
        store=first,
        checkpointer=InMemorySaver(),
    )
    for fact in FACTS[:8]:
        agent.invoke({"messages": [fact]}, config_for("t"))
    assert (
        paging.page_store.store is first and paging.page_store.get("t", "p1").messages[0].content == FACTS[0]
    )

    other = create_agent(
        ScriptedChatModel(responses=["Noted."]),
        middleware=[paging],
        store=second,
        checkpointer=InMemorySaver(),
    )
    other.invoke({"messages": ["hello"]}, config_for("u"))
    with pytest.raises(ValueError, match=r"paged into 2 graph stores .* `PageStore\(store\)`"):
        paging.page_store  # noqa: B018


def test_a_node_paging_for_gemini_with_tiktoken_warns_at_construction():
    name = f"google_genai:gemini-2.5-flash-{uuid.uuid4().hex[:6]}"
    with pytest.warns(RuntimeWarning, match="tokenizes differently"):
        PagingNode(max_tokens=2000, model=name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PagingNode(max_tokens=2000, model=name)  # once
        PagingNode(
            max_tokens=2000, model=name.replace("gemini", "gpt-4o")
        )  # OpenAI's own tokenizer: no warning
