"""The `llm` reader: a real chat model answers each question.

For `paging` it runs as a `create_agent` agent with `PagingMiddleware`, so the model sees
the resident messages and bookmarks and decides itself whether and what to `recall`; for
`search_tool` the agent has a `search` tool over the turns outside its window; for the
other methods the model answers from the method's context in one call.

Every prompt the model receives is recorded (a callback), so the context a question was
answered from is measured exactly as for the lexical reader: the last model call's messages.
At most `max_model_calls` calls per question; the last one is made with
``tool_choice="none"`` so the model has to answer.

`LLMReader.from_env` drives any OpenAI-compatible endpoint with the `openai` package
(through `langchain_openai.ChatOpenAI`): ``OPENAI_API_KEY`` and optional ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from evals.judge import LLMJudge

__all__ = ["ANSWER_PROMPT", "PAGING_HINT", "SEARCH_HINT", "Answer", "LLMReader"]

READER_VERSION = "llm-1"

ANSWER_PROMPT = (
    "The messages are a conversation between two people; the first turn of each session starts "
    "with the session's date in parentheses. The last message is a question about the conversation. "
    "Answer it with a short phrase (a few words; a date when asked when), from what the conversation "
    "says. If the conversation does not say, answer exactly: Not mentioned in the conversation."
)
PAGING_HINT = (
    " Older parts of the conversation were moved out of the context; each one is marked, where it "
    "was, by a bookmark like [p3:keyword keyword]. If a bookmark may hold the answer, call `recall` "
    "with its page ids to read it before answering."
)
SEARCH_HINT = (
    " Only the recent part of the conversation is shown. To find older turns, call `search` "
    "with a query before answering."
)


@dataclass
class Answer:
    """What the model answered and what it did on the way."""

    text: str | None
    """The final answer (None if the model never answered)."""
    prompts: list[list[BaseMessage]] = field(default_factory=list)
    """The messages of every model call, system prompt left out, in order."""
    tool_calls: list[dict] = field(default_factory=list)
    """``{"name", "args", "id"}`` of every tool call, in order."""
    tool_results: list[ToolMessage] = field(default_factory=list)
    """Every tool result, in order."""
    state: list[BaseMessage] = field(default_factory=list)
    """The agent's messages after the run (its state; paged in replace mode)."""
    error: str | None = None
    """Why there is no answer, when the endpoint refused the request."""
    paging: dict | None = None
    """The paging state after the run (the agent's ``paging`` key), when it has one."""

    @property
    def final_prompt(self) -> list[BaseMessage]:
        """The context the answer came from: the last model call's messages."""
        return self.prompts[-1] if self.prompts else []

    @property
    def model_calls(self) -> int:
        return len(self.prompts)


class _Recorder(BaseCallbackHandler):
    """Keeps the messages of every chat model call and the last reply."""

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []
        self.last_reply: BaseMessage | None = None

    def on_chat_model_start(self, serialized, messages, **kwargs: Any) -> None:
        self.prompts.append([m for m in messages[0] if not isinstance(m, SystemMessage)])

    def on_llm_end(self, response, **kwargs: Any) -> None:
        generation = response.generations[0][0] if response.generations and response.generations[0] else None
        self.last_reply = getattr(generation, "message", None)


class _AnswerOnLastCall(AgentMiddleware):
    """The `max_calls`-th model call gets ``tool_choice="none"``: the model must answer."""

    def __init__(self, max_calls: int) -> None:
        super().__init__()
        self.max_calls = max_calls
        self.calls = 0

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]):
        self.calls += 1
        if self.calls >= self.max_calls and request.tools:
            request = request.override(tool_choice="none")
        return handler(request)


def _text(message: BaseMessage | None) -> str | None:
    if not isinstance(message, AIMessage) or message.tool_calls:
        return None
    return message.text.strip() or None


class LLMReader:
    """A chat model that answers questions, alone or as an agent with tools.

    Args:
        model: Any LangChain chat model that binds tools.
        judge: Scores answers (`LLMJudge`); None to skip judging.
        max_model_calls: Model calls per question at most (the last one must answer).
        name: Model name recorded in results.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        judge: LLMJudge | None = None,
        max_model_calls: int = 4,
        name: str | None = None,
    ) -> None:
        if max_model_calls < 1:
            raise ValueError("`max_model_calls` must be at least 1.")
        self.model = model
        self.judge = judge
        self.max_model_calls = max_model_calls
        self.name = name or getattr(model, "model_name", None) or type(model).__name__

    @classmethod
    def from_env(
        cls,
        model: str | None = None,
        *,
        judge_model: str | None = None,
        max_model_calls: int = 4,
        timeout: float = 120.0,
    ) -> LLMReader:
        """An OpenAI-compatible model from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``; the judge
        uses the same `openai` client (`judge_model`, default the same model)."""
        if not os.environ.get("OPENAI_API_KEY"):
            raise ValueError(
                "The llm reader needs an OpenAI-compatible endpoint: set OPENAI_API_KEY "
                "(and OPENAI_BASE_URL for a server other than OpenAI's), or use --reader lexical."
            )
        from langchain_openai import ChatOpenAI

        name = model or os.environ.get("OPENAI_MODEL") or "gpt-4o-mini"
        chat = ChatOpenAI(model=name, temperature=0, timeout=timeout, max_retries=3)
        return cls(
            chat,
            judge=LLMJudge(chat.root_client, judge_model or name),
            max_model_calls=max_model_calls,
            name=name,
        )

    @property
    def version(self) -> dict:
        """What identifies this reader in a results header."""
        return {
            "reader": READER_VERSION,
            "model": self.name,
            "judge_model": getattr(self.judge, "model", None),
            "max_model_calls": self.max_model_calls,
        }

    def answer(self, messages: Sequence[BaseMessage]) -> Answer:
        """One call, no tools: the answer to the last message from `messages` alone."""
        recorder = _Recorder()
        try:
            reply = self.model.invoke(
                [SystemMessage(ANSWER_PROMPT), *messages], config={"callbacks": [recorder]}
            )
        except Exception as exc:  # noqa: BLE001 - only the endpoint refusing the request is recorded
            return Answer(None, recorder.prompts, error=_refusal(exc))
        return Answer(_text(reply), recorder.prompts)

    def run_agent(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[BaseTool] = (),
        middleware: Sequence[AgentMiddleware] = (),
        store: Any = None,
        hint: str = "",
        thread_id: str | None = None,
        state: dict | None = None,
    ) -> Answer:
        """Run a `create_agent` agent on `messages` (appending `hint` to the system prompt) in
        thread `thread_id`, with more initial `state` (e.g. the paging state); record its
        prompts, tool calls and answer."""
        agent = create_agent(
            self.model,
            tools=list(tools),
            system_prompt=ANSWER_PROMPT + hint,
            middleware=[*middleware, _AnswerOnLastCall(self.max_model_calls)],
            store=store,
        )
        recorder = _Recorder()
        config = {
            "configurable": {"thread_id": thread_id or f"eval-{uuid.uuid4().hex[:8]}"},
            "callbacks": [recorder],
            "recursion_limit": 4 * self.max_model_calls + 4,
        }
        try:
            final = agent.invoke({**(state or {}), "messages": list(messages)}, config)
        except Exception as exc:  # noqa: BLE001
            return Answer(None, recorder.prompts, error=_refusal(exc))
        state = final["messages"]
        calls = [
            {"name": c["name"], "args": c["args"], "id": c["id"]}
            for m in state
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        ]
        results = [m for m in state if isinstance(m, ToolMessage)]
        return Answer(
            _text(recorder.last_reply), recorder.prompts, calls, results, state, paging=final.get("paging")
        )


def _refusal(exc: Exception) -> str:
    """The error text when the endpoint rejected a request (bad request, context too long);
    anything else (network, auth, a bug) propagates and stops the run, which resumes later."""
    if isinstance(exc, openai.BadRequestError):
        return f"{type(exc).__name__}: {exc}"[:500]
    raise exc
