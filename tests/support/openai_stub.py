"""An OpenAI-compatible chat-completions server on 127.0.0.1 for the llm reader's tests.

It runs in a thread; a `respond(body)` function plays the model: it gets each request's
JSON body and returns the assistant message (``{"content": ...}`` or with ``tool_calls``),
or an int to answer with that HTTP error status. Every request body is kept.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count


class OpenAIStub:
    """``with OpenAIStub(respond) as stub:`` serves ``stub.base_url`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, respond: Callable[[dict], dict | int]) -> None:
        self.respond = respond
        self.requests: list[dict] = []
        self._ids = count(1)

    def __enter__(self) -> OpenAIStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                stub.requests.append(body)
                reply = stub.respond(body)
                if isinstance(reply, int):
                    return self._send(reply, {"error": {"message": "scripted error", "type": "invalid_request_error",
                                                        "code": "context_length_exceeded"}})
                self._send(200, stub.completion(body, reply))

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def completion(self, body: dict, reply: dict) -> dict:
        """A chat.completion object around the scripted message."""
        n = next(self._ids)
        message = {"role": "assistant", "content": reply.get("content")}
        calls = reply.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                for i, c in enumerate(calls)]
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def tool_call(name: str, **args) -> dict:
    """A scripted reply calling one tool."""
    return {"content": "", "tool_calls": [{"name": name, "args": args}]}
