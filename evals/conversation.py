"""Dataset turns as LangChain messages: the first speaker is the user, the other the assistant.

The first turn of each session opens with the session's date, ``(1:56 pm on 8 May, 2023) ...``,
so a model can answer temporal questions from the text it sees (and a recalled page
carries its date along).
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from evals.datasets.records import Conversation, Turn


def turn_message(turn: Turn, user: str, *, dated: bool = False) -> BaseMessage:
    """One turn; its id is its ``dia_id`` so evidence can be found in any context.
    `dated` prefixes the session date (first turn of a session)."""
    cls = HumanMessage if turn.speaker == user else AIMessage
    text = f"({turn.date}) {turn.text}" if dated and turn.date else turn.text
    return cls(
        text,
        id=turn.dia_id,
        name=turn.speaker,
        additional_kwargs={"session_id": str(turn.session), "timestamp_text": turn.date},
    )


def to_messages(conversation: Conversation) -> list[BaseMessage]:
    """All turns as messages, each session's first turn dated."""
    user = conversation.speakers[0] if conversation.speakers else conversation.turns[0].speaker
    out, previous = [], None
    for turn in conversation.turns:
        out.append(turn_message(turn, user, dated=turn.session != previous))
        previous = turn.session
    return out
