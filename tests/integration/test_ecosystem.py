"""What LangGraph users reach for: a typed interface, paging visible on the model's run, the node as
the prebuilt ReAct agent's `pre_model_hook`, and an import that does not pay for the middleware."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing
import warnings

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tracers.base import BaseTracer
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingConfig, PagingMessagesState, PagingMiddleware, PagingNode
from langmem_paging.config import PagingOptions
from langmem_paging.testing import ScriptedChatModel


def _fact(i: int) -> HumanMessage:
    return HumanMessage(
        f"Fact {i}: Zarko{i} keeps {i + 100} beehives near Lake Bled{i}. " + "The bees hum. " * 6
    )


# -- the typed interface -------------------------------------------------------------------------


def test_the_options_typed_dict_and_the_config_fields_name_the_same_options():
    assert set(PagingOptions.__annotations__) == set(PagingConfig.fields()) - {"max_tokens"}


def test_the_options_typed_dict_and_the_config_fields_give_each_option_the_same_type():
    """Every option has the TypedDict's type on the config's field too, except where the config keeps
    the value normalised (a counter callable, a tuple of hooks) and the embedder, typed `Any` there
    (`Embedder`'s module imports numpy)."""
    from langmem_paging.strategies.embeddings import Embedder

    hints = typing.get_type_hints(PagingOptions, localns={"Embedder": Embedder})
    fields = typing.get_type_hints(PagingConfig, include_extras=False)
    differ = {name for name in hints if hints[name] != fields[name]}
    assert differ == {"token_counter", "hooks", "search_embedder"}, {n: (hints[n], fields[n]) for n in differ}
    assert fields["search_embedder"] is typing.Any


def test_every_option_is_documented():
    missing = [name for name, doc in PagingConfig.fields().items() if not doc.strip()]
    assert not missing, f"options without a description: {missing}"


@pytest.mark.parametrize("cls", [PagingMiddleware, PagingNode])
def test_constructors_take_typed_keyword_only_options(cls):
    parameters = inspect.signature(cls.__init__).parameters
    assert parameters["max_tokens"].kind is inspect.Parameter.KEYWORD_ONLY
    options = parameters["options"]
    assert options.kind is inspect.Parameter.VAR_KEYWORD and "Unpack[PagingOptions]" in str(
        options.annotation
    )
    hints = typing.get_type_hints(cls.__init__, include_extras=True)
    assert typing.get_origin(hints["options"]) is typing.Unpack


def test_budgets_as_tokens_or_a_fraction_like_langchains_context_size():
    assert PagingConfig(max_tokens=("tokens", 4000)).max_tokens == 4000
    assert PagingConfig(max_tokens=("fraction", 0.5)).max_tokens == ("fraction", 0.5)
    assert PagingMiddleware(max_tokens=("tokens", 900)).config.max_tokens == 900
    for bad in [("tokens", 0), ("tokens", 2.5), ("percent", 50), ("fraction", 1.5)]:
        with pytest.raises(ValueError, match="max_tokens"):
            PagingConfig(max_tokens=bad)


# -- the model's run shows what paging did --------------------------------------------------------


class _Runs(BaseTracer):
    def __init__(self) -> None:
        super().__init__()
        self.runs: list = []

    def _persist_run(self, run) -> None:
        pass

    def _end_trace(self, run) -> None:  # every run, nested ones included
        self.runs.append(run)
        super()._end_trace(run)


def _all_runs(runs):
    out = {}
    for run in runs:
        out[run.id] = run
        out.update({r.id: r for r in _all_runs(run.child_runs)})
    return list(out.values())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tracer_finds_paging_metadata_and_tags_on_the_model_run(mode):
    import asyncio

    model = ScriptedChatModel(responses=["Noted."] * 30)
    agent = create_agent(
        model,
        middleware=[PagingMiddleware(max_tokens=400, boundary="fixed_2")],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    for i in range(8):
        agent.invoke({"messages": [_fact(i)]}, config)
    tracer = _Runs()
    traced = {**config, "callbacks": [tracer]}
    if mode == "sync":
        agent.invoke({"messages": [_fact(9)]}, traced)
    else:
        asyncio.run(agent.ainvoke({"messages": [_fact(9)]}, traced))
    llm_runs = [r for r in _all_runs(tracer.runs) if r.run_type == "llm"]
    assert len(llm_runs) == 1
    metadata, tags = llm_runs[0].extra.get("metadata", {}), llm_runs[0].tags
    assert (
        metadata["paging_max_tokens"] == 400 and metadata["paging_overhead"] > 0
    )  # the recall tool's schema
    assert metadata["paging_tokens"] <= metadata["paging_message_budget"] == 400 - metadata["paging_overhead"]
    assert metadata["paging_tokens_before"] >= metadata["paging_tokens"]
    assert {"paging_formed", "paging_evicted", "paging_folded", "paging_over_budget"} <= set(metadata)
    assert "langmem-paging" in tags
    # the model run and paging's own run (a step that pages) carry it; no other run does
    others = [r for r in _all_runs(tracer.runs) if r.run_type != "llm" and r.name != "paging"]
    assert not any("paging_tokens" in (r.extra or {}).get("metadata", {}) for r in others), (
        "only the model run"
    )


# -- the node as the prebuilt ReAct agent's pre_model_hook ---------------------------------------


def test_the_node_pages_inside_create_react_agent_with_the_librarys_state_schema():
    from langgraph.prebuilt import create_react_agent

    node = PagingNode(max_tokens=500, boundary="fixed_2", output_messages_key="llm_input_messages")
    model = ScriptedChatModel(responses=["Noted."] * 30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent moved to langchain.agents
        agent = create_react_agent(
            model,
            tools=[node.recall_tool],
            pre_model_hook=node,
            state_schema=PagingMessagesState,
            checkpointer=InMemorySaver(),
            store=InMemoryStore(),
        )
    config = {"configurable": {"thread_id": "t"}}
    for i in range(14):
        agent.invoke({"messages": [_fact(i)]}, config)
    state = agent.get_state(config).values
    assert len(state["messages"]) == 28, "the history stays whole in the state (view mode)"
    assert state["paging"]["shown"] or state["paging"]["clusters"], "pages were evicted"
    prompt = model.prompts[-1]
    assert prompt[-1].content == _fact(13).content and len(prompt) < 28
    assert model.bound_tools == ["recall"]


# -- imports --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_importing_the_node_does_not_import_the_middleware_or_numpy():
    code = (
        "import sys; from langmem_paging import PagingNode, page_messages; "
        "print('langchain.agents' in sys.modules, 'numpy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


# -- warnings -------------------------------------------------------------------------------------


def _big_tool():
    from langchain_core.tools import StructuredTool

    def lookup(query: str, region: str = "", language: str = "", fields: str = "", sort: str = "") -> str:
        return "nothing"

    description = (
        "Look a subject up in the archive. " + "The archive holds reports, letters and ledgers. " * 12
    )
    return StructuredTool.from_function(lookup, name="lookup", description=description)


def test_an_over_budget_turn_warns_once_at_the_users_line_naming_the_tool_schemas():
    import logging

    model = ScriptedChatModel(responses=["Noted."] * 10)
    agent = create_agent(
        model,
        tools=[_big_tool()],
        middleware=[PagingMiddleware(max_tokens=420)],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("langmem_paging").addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                agent.invoke(
                    {"messages": [HumanMessage("Please summarise. " + "Details follow. " * 40)]}, config
                )
    finally:
        logging.getLogger("langmem_paging").removeHandler(handler)
    ours = [w for w in caught if "langmem-paging" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]  # once per branch, one channel
    assert ours[0].filename == __file__, ours[0].filename  # the user's line, not LangGraph's
    assert "for the system prompt and tool schemas" in str(ours[0].message)
    assert "trim the tools" in str(ours[0].message)
    assert not [r for r in records if r.levelno >= logging.WARNING], "printed twice: a log line too"


def test_the_default_pages_do_not_warn_at_a_600_token_budget():
    model = ScriptedChatModel(responses=["Noted."] * 40)
    agent = create_agent(
        model,
        middleware=[PagingMiddleware(max_tokens=600)],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(40):
            agent.invoke({"messages": [_fact(i)]}, config)
    assert not [w for w in caught if "langmem-paging" in str(w.message)], [str(w.message) for w in caught]
