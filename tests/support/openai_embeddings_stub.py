"""An OpenAI-compatible embeddings server on 127.0.0.1 for the embedder's tests.

It runs in a thread and answers ``POST /v1/embeddings`` the way the API does: one vector
per input, ``dimensions`` honoured, ``float`` or ``base64`` encoding, 400 for an empty
string. Vectors are deterministic per text and deliberately not unit length, and the
items come back in reverse order (each with its ``index``), so a client must sort and
normalize. Every request body is kept in ``stub.requests``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

import numpy as np


class OpenAIEmbeddingsStub:
    """``with OpenAIEmbeddingsStub(dim=16) as stub:`` serves ``stub.base_url`` (``http://127.0.0.1:PORT/v1``).

    Args:
        dim: Vector size when a request gives no ``dimensions``.
        ignore_dimensions: Answer with `dim` even when ``dimensions`` is requested (a server that
            does not support it).
    """

    def __init__(self, *, dim: int = 16, ignore_dimensions: bool = False) -> None:
        self.dim = dim
        self.ignore_dimensions = ignore_dimensions
        self.requests: list[dict] = []

    @staticmethod
    def vector(text: str, dim: int) -> np.ndarray:
        """The raw (unnormalized) vector the server returns for `text`."""
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        return np.random.default_rng(seed).standard_normal(dim) * (1.0 + len(text) % 7)

    def __enter__(self) -> Self:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self.path.endswith("/embeddings"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                stub.requests.append(body)
                if self.headers.get("Authorization", "") in ("", "Bearer "):
                    return self._send(
                        401, {"error": {"message": "missing api key", "type": "invalid_request_error"}}
                    )
                inputs = body.get("input")
                inputs = [inputs] if isinstance(inputs, str) else inputs
                if not inputs or any(not isinstance(t, str) or t == "" for t in inputs):
                    return self._send(
                        400, {"error": {"message": "'$.input' is invalid.", "type": "invalid_request_error"}}
                    )
                self._send(200, stub.response(body, inputs))

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

    def response(self, body: dict, inputs: list[str]) -> dict:
        """A create-embedding response for `inputs`, items in reverse order."""
        dim = self.dim if self.ignore_dimensions else body.get("dimensions") or self.dim
        data = []
        for index, text in enumerate(inputs):
            vector = self.vector(text, dim)
            if body.get("encoding_format") == "base64":
                embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                embedding = vector.tolist()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(len(text.split()) for text in inputs)
        return {
            "object": "list",
            "data": data[::-1],
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
