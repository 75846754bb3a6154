"""An OpenAI-compatible chat-completions server on 127.0.0.1 for the llm reader's tests.

It runs in a thread; a `respond(body)` function plays the model: it gets each request's
JSON body and returns the assistant message (``{"content": ...}`` or with ``tool_calls``),
or an int to answer with that HTTP error status. Every request body is kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from email.message import Message
from itertools import count

from tests.support.local_server import LocalJSONServer


class OpenAIStub(LocalJSONServer):
    """``with OpenAIStub(respond) as stub:`` serves ``stub.base_url`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, respond: Callable[[dict], dict | int]) -> None:
        self.respond = respond
        self.requests: list[dict] = []
        self._ids = count(1)

    def answer(self, path: str, body: dict, headers: Message) -> tuple[int, dict]:
        if not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}
        self.requests.append(body)
        reply = self.respond(body)
        if isinstance(reply, int):
            return reply, {
                "error": {
                    "message": "scripted error",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            }
        return 200, self.completion(body, reply)

    def completion(self, body: dict, reply: dict) -> dict:
        """A chat.completion object around the scripted message."""
        n = next(self._ids)
        message = {"role": "assistant", "content": reply.get("content")}
        calls = reply.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
                }
                for i, c in enumerate(calls)
            ]
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


def tool_call(name: str, **args) -> dict:
    """A scripted reply calling one tool."""
    return {"content": "", "tool_calls": [{"name": name, "args": args}]}
