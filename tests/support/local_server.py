"""A JSON-over-HTTP server on 127.0.0.1, run in a thread: what the OpenAI-compatible stubs share.

A subclass answers each ``POST`` in `answer` with a status and a JSON payload; the server keeps
nothing else and logs nothing.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LocalJSONServer(ABC):
    """``with Server(...) as server:`` serves ``server.base_url`` (``http://127.0.0.1:PORT/v1``) until the
    block ends."""

    base_url: str

    @abstractmethod
    def answer(self, path: str, body: dict, headers: Message) -> tuple[int, dict]:
        """The status and JSON payload answering a ``POST`` to `path` with the JSON `body`."""

    def __enter__(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, payload = owner.answer(self.path, body, self.headers)
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
