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
from email.message import Message

import numpy as np

from tests.support.local_server import LocalJSONServer


class OpenAIEmbeddingsStub(LocalJSONServer):
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

    def answer(self, path: str, body: dict, headers: Message) -> tuple[int, dict]:
        if not path.endswith("/embeddings"):
            return 404, {"error": {"message": f"no route {path}"}}
        self.requests.append(body)
        if headers.get("Authorization", "") in ("", "Bearer "):
            return 401, {"error": {"message": "missing api key", "type": "invalid_request_error"}}
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not inputs or any(not isinstance(t, str) or t == "" for t in inputs):
            return 400, {"error": {"message": "'$.input' is invalid.", "type": "invalid_request_error"}}
        return 200, self.response(body, inputs)

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
