"""A scripted chat model for tests and offline demos (no API key, no network)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

__all__ = ["ScriptedChatModel"]

Response = str | AIMessage | Callable[[list[BaseMessage]], "str | AIMessage"]


class ScriptedChatModel(BaseChatModel):
    """Answers with the next scripted response; records every prompt it receives.

    A response is a string, an `AIMessage` (e.g. with ``tool_calls``), or a function
    of the prompt messages returning either. `bind_tools` is accepted so the model
    works inside `create_agent`.

    Example:
        >>> model = ScriptedChatModel(responses=["hi", lambda msgs: f"{len(msgs)} messages"])
        >>> model.invoke("hello").content, model.invoke("again").content
        ('hi', '1 messages')
    """

    responses: list[Any] = Field(default_factory=list, repr=False)
    """The script, consumed in order (left out of the model's repr, which LangChain's tracing renders
    at the first call: a long script made that call slow)."""
    prompts: list[list[BaseMessage]] = Field(default_factory=list, repr=False)
    """Every message list the model was called with, in order."""
    bound_tools: list[str] = Field(default_factory=list)
    """Names of the tools last bound."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self.bound_tools = [getattr(t, "name", None) or t.get("name", "") for t in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        if len(self.prompts) > len(self.responses):
            raise IndexError(
                f"ScriptedChatModel has {len(self.responses)} responses but was called "
                f"{len(self.prompts)} times; add responses to the script."
            )
        response = self.responses[len(self.prompts) - 1]
        if callable(response) and not isinstance(response, AIMessage):
            response = response(list(messages))
        message = response if isinstance(response, AIMessage) else AIMessage(content=str(response))
        return ChatResult(generations=[ChatGeneration(message=message)])
