"""Dataset turns as LangChain messages: the first speaker is the user, the other the assistant."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from evals.datasets.records import Conversation, Turn


def turn_message(turn: Turn, user: str) -> BaseMessage:
    """One turn; its id is its ``dia_id`` so evidence can be found in any context."""
    cls = HumanMessage if turn.speaker == user else AIMessage
    return cls(turn.text, id=turn.dia_id, name=turn.speaker,
               additional_kwargs={"session_id": str(turn.session), "timestamp_text": turn.date})


def to_messages(conversation: Conversation) -> list[BaseMessage]:
    """All turns as messages."""
    user = conversation.speakers[0] if conversation.speakers else conversation.turns[0].speaker
    return [turn_message(t, user) for t in conversation.turns]
