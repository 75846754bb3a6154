"""The README's Quickstart runs verbatim: its code block is read from README.md and executed as it
stands, with a scripted chat model standing in for ``"openai:gpt-4o-mini"`` (create_agent's
`init_chat_model` is patched; the snippet itself is not edited), in a scratch directory for its
SQLite files. The README and this test cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging.testing import ScriptedChatModel

README = Path(__file__).resolve().parents[2] / "README.md"


def quickstart() -> str:
    """The first Python block under the README's ``## Quickstart`` heading."""
    text = README.read_text()
    section = text[text.index("## Quickstart") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def _replies(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and "Which dog" in str(last.content):
        return AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1"]}, "id": "call-p1"}])
    return AIMessage("Noted.")


@pytest.fixture
def scripted_openai(monkeypatch, tmp_path):
    """``"openai:gpt-4o-mini"`` resolves to a scripted model; the snippet's files go to tmp_path."""
    pytest.importorskip("langgraph.store.sqlite", reason="pip install 'langmem-paging[sqlite]'")
    from langchain.agents import factory

    model = ScriptedChatModel(responses=[_replies] * 200)
    asked = []

    def init_chat_model(name, *args, **kwargs):
        asked.append(name)
        return model

    monkeypatch.setattr(factory, "init_chat_model", init_chat_model)
    monkeypatch.chdir(tmp_path)
    return model, asked


def test_readme_quickstart_runs_verbatim_and_its_last_line_reads_a_page(scripted_openai, tmp_path):
    model, asked = scripted_openai
    code = quickstart()
    namespace: dict = {}

    exec(compile(code, "README.md (Quickstart)", "exec"), namespace)  # noqa: S102 - the README's own code

    assert asked == ["openai:gpt-4o-mini"]  # the snippet's model string reached create_agent
    assert model.prompts and list(tmp_path.iterdir())  # the scripted model answered; files went to tmp_path
    # "hundreds of turns later": the same agent, thread and middleware, driven until p3 is paged out
    agent, config = namespace["agent"], namespace["config"]
    for turn in range(40):
        agent.invoke(
            {
                "messages": [
                    f"Turn {turn}: my cousin Farid walked his greyhound Zephyr{turn} along the "
                    f"canal for {turn + 2} kilometres, past the old mill and the ferry dock. " * 4
                ]
            },
            config,
        )
    state = agent.invoke({"messages": ["Which dog did Farid adopt?"]}, config)
    recalled = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert recalled and "Farid adopted a greyhound" in recalled[-1].content  # the model's recall(p1)

    last_line = [line for line in code.strip().splitlines() if line.strip()][-1]
    page = eval(
        compile(ast.parse(last_line.split("#")[0].strip(), mode="eval"), "README.md", "eval"),  # noqa: S307
        namespace,
    )
    assert page is not None and page.id == "p3" and page.messages and page.bookmark.startswith("[p3:")
    assert page.keywords
