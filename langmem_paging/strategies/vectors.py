"""Page vectors for embedding policies: embedded once when a page forms, stored compactly.

A policy that compares pages by meaning (`SemanticPolicy`, `STAEPolicy`) embeds each
page once, in its `features` hook, and gets the vector back on every `Candidate`.
Features are checkpointed with the page while it is resident, so the vector is kept as
base64 of its float16 components (L2-normalized first): 256 dimensions take 684
characters, 384 take 1,024.

A vector is tagged with the embedder's `name` and the unit it was built from. A
candidate without a vector under the policy's tag (a recall copy, or a page formed
while another policy or embedder was in use) is embedded from its text when a victim
is chosen, in one batch, and remembered (bounded LRU by text digest), so each such
text is embedded once per process, not once per turn. That late embedding is a
synchronous call inside `victim`: instant for `HashingEmbedder`, a model forward pass
for MiniLM, a blocking request for a remote embedder.

Example:
    >>> import numpy as np
    >>> text = encode_vector(np.array([3.0, 4.0]))
    >>> text
    'zThmOg=='
    >>> [round(x, 3) for x in decode_vector(text).tolist()]
    [0.6, 0.8]
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.messages import BaseMessage

from langmem_paging.core.lru import LRU
from langmem_paging.core.messages import is_user_turn
from langmem_paging.core.tokens import message_text
from langmem_paging.strategies.embeddings import Embedder, get_embedder, normalize_rows

__all__ = [
    "VECTOR_KEY",
    "VECTOR_TAG_KEY",
    "PageVectors",
    "TextVectors",
    "decode_vector",
    "encode_vector",
    "exchanges",
]

VECTOR_KEY = "vector"
"""Feature key of the encoded vector."""
VECTOR_TAG_KEY = "vector_by"
"""Feature key of ``"<embedder name>/<unit>"``: vectors compare only under one tag."""

Unit = Literal["page", "exchange"]


def encode_vector(vector: Any) -> str:
    """A vector as ASCII: its L2-normalized float16 components (little-endian), base64.

    Args:
        vector: A 1-D array-like of numbers; an all-zero vector stays zero.

    Returns:
        The base64 text (``ceil(2 * dim / 3) * 4`` characters).

    Raises:
        ValueError: If `vector` is not one-dimensional or not finite.
    """
    array = np.asarray(vector, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"`vector` must be one-dimensional, got shape {array.shape}.")
    if not np.isfinite(array).all():
        raise ValueError("`vector` must be finite.")
    norm = float(np.linalg.norm(array))
    if norm > 0:
        array = array / norm
    return base64.b64encode(array.astype("<f2").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    """The float32 vector `encode_vector` stored, re-normalized after float16 rounding.

    Args:
        text: What `encode_vector` returned.

    Returns:
        A unit-length float32 vector (zero if zero was stored).

    Raises:
        ValueError: If `text` is not base64 of an even number of bytes.
    """
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 2:
        raise ValueError("`text` must encode float16 components (an even number of bytes).")
    array = np.frombuffer(raw, dtype="<f2").astype(np.float64)
    norm = float(np.linalg.norm(array))
    if norm > 0:
        array = array / norm
    return array.astype(np.float32)


def exchanges(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """`messages` cut into user-assistant exchanges: each user turn with what follows it.

    Messages before the first user turn (a page may begin mid-exchange, with the reply
    or tool results of an earlier question) form an exchange of their own.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> msgs = [AIMessage("a0"), HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
        >>> [[m.content for m in e] for e in exchanges(msgs)]
        [['a0'], ['q1', 'a1'], ['q2']]
    """
    out: list[list[BaseMessage]] = []
    for message in messages:
        if not out or is_user_turn(message):
            out.append([])
        out[-1].append(message)
    return out


def _text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(message_text(m) for m in messages)


class PageVectors:
    """One vector per page: embedded at formation (batched), decoded or late-embedded at selection.

    With ``unit="page"`` a page's vector is the embedding of its whole text; with
    ``unit="exchange"`` it is the mean of its exchanges' vectors (see `exchanges`),
    re-normalized, so every exchange counts alike however long it is.

    Args:
        embedder: An `Embedder`, or a spec for `get_embedder` (None: `HashingEmbedder`).
        unit: ``"page"`` or ``"exchange"``.
        cache_size: Late-embedded texts remembered (recall copies, pages without a vector).

    Raises:
        ValueError: If `unit` is unknown or `cache_size` is negative.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> vectors = PageVectors()
        >>> [features] = vectors.features([[HumanMessage("Bees in Bled?"), AIMessage("Twelve hives.")]])
        >>> sorted(features), features["vector_by"]
        (['vector', 'vector_by'], 'hashing:v1-seed0:256/page')
    """

    def __init__(
        self, *, embedder: str | Embedder | None = None, unit: Unit = "page", cache_size: int = 1024
    ) -> None:
        if unit not in ("page", "exchange"):
            raise ValueError(f"`unit` must be 'page' or 'exchange', got {unit!r}.")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"`cache_size` must be a non-negative integer, got {cache_size!r}.")
        self.embedder = get_embedder(embedder)
        self.unit = unit
        self.cache_size = cache_size
        self._cache: LRU[bytes, np.ndarray] = LRU(cache_size)

    @property
    def tag(self) -> str:
        """``"<embedder name>/<unit>"``, stored beside each vector."""
        return f"{self.embedder.name}/{self.unit}"

    # Sync and async differ only in the embed call: plan texts, embed, reduce per page.

    def _plan(self, pages: Sequence[Sequence[BaseMessage]]) -> tuple[list[str], list[int]]:
        """Texts to embed and, for each, the index of the page it belongs to."""
        texts, owners = [], []
        for index, messages in enumerate(pages):
            parts = exchanges(messages) if self.unit == "exchange" else [list(messages)]
            for part in parts or [[]]:
                texts.append(_text(part))
                owners.append(index)
        return texts, owners

    def _reduce(self, rows: np.ndarray, owners: list[int], n: int) -> np.ndarray:
        """One unit-length row per page: the mean of its rows, re-normalized."""
        out = np.zeros((n, rows.shape[1] if rows.ndim == 2 else self.embedder.dim), dtype=np.float64)
        if len(owners):
            np.add.at(out, np.asarray(owners), rows.astype(np.float64))
        return normalize_rows(out)

    def _features(self, rows: np.ndarray) -> list[dict[str, Any]]:
        tag = self.tag
        return [{VECTOR_KEY: encode_vector(row), VECTOR_TAG_KEY: tag} for row in rows]

    def features(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Features of newly formed pages: ``{"vector": ..., "vector_by": tag}`` each, one embed call."""
        texts, owners = self._plan(pages)
        return self._features(self._reduce(self.embedder.embed(texts), owners, len(pages)))

    async def afeatures(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Async `features`: awaits the embedder's `aembed`."""
        texts, owners = self._plan(pages)
        return self._features(self._reduce(await self.embedder.aembed(texts), owners, len(pages)))

    def stored(self, features: Mapping[str, Any]) -> str | None:
        """The encoded vector in `features` if it was made under this tag, else None."""
        vector = features.get(VECTOR_KEY)
        return vector if features.get(VECTOR_TAG_KEY) == self.tag and isinstance(vector, str) else None

    def matrix(
        self, units: Sequence[Sequence[BaseMessage]], features: Sequence[Mapping[str, Any]]
    ) -> np.ndarray:
        """Vectors of `units` (rows, float32): decoded from `features`, else embedded from text.

        Args:
            units: Each unit's messages (a candidate's `messages`).
            features: Each unit's features (a candidate's `features`; ``{}`` for a copy).

        Returns:
            Shape ``(len(units), dim)``; the texts without a stored vector are embedded in
            one batch and remembered.
        """
        rows: list[np.ndarray | None] = []
        missing: dict[bytes, list[int]] = {}
        plans: dict[bytes, Sequence[BaseMessage]] = {}
        for index, (messages, feats) in enumerate(zip(units, features, strict=True)):
            encoded = self.stored(feats)
            if encoded is not None:
                rows.append(decode_vector(encoded))
                continue
            key = self._digest(messages)
            cached = self._cache.get(key)
            rows.append(cached)
            if cached is None:
                missing.setdefault(key, []).append(index)
                plans[key] = messages
        if missing:
            keys = list(missing)
            texts, owners = self._plan([plans[k] for k in keys])
            vectors = self._reduce(self.embedder.embed(texts), owners, len(keys))
            for key, vector in zip(keys, vectors, strict=True):
                self._cache.put(key, vector)
                for index in missing[key]:
                    rows[index] = vector
        if not rows:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack(rows).astype(np.float32)  # type: ignore[arg-type]

    def embed_text(self, text: str) -> np.ndarray:
        """One text's unit vector (remembered like late-embedded units)."""
        key = b"t" + hashlib.blake2b(text.encode(), digest_size=16).digest()
        cached = self._cache.get(key)
        if cached is None:
            cached = self.embedder.embed([text])[0].astype(np.float32)
            self._cache.put(key, cached)
        return cached

    def _digest(self, messages: Sequence[BaseMessage]) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for message in messages:
            h.update(message_text(message).encode())
            h.update(b"\x00" + str(is_user_turn(message)).encode() + b"\x00")
        return b"u" + h.digest()


def _text_key(kind: bytes, text: str) -> bytes:
    return kind + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class TextVectors:
    """An embedder's vectors by text, each text embedded once: search's passages, resident turns, queries.

    A bounded LRU (by a digest of the text) in front of the embedder. Keyed by content, not by
    message id, so an edited message is embedded again and two copies of a text (a page and its
    recall copy, a resident turn that later leaves in a page, a page indexed again after its
    thread was dropped) share one vector. Misses are embedded in one batch. Vectors are kept as
    float16 (768 bytes at 384 dimensions; the default 20,000 take 15 MB). Queries have their own
    keys: a model may embed a query differently from a document (`Embedder.embed_query`).

    Args:
        embedder: An `Embedder`, a spec for `get_embedder` (a name, a LangChain ``Embeddings``), or
            any object with ``embed(texts)``.
        max_vectors: Vectors remembered; 0 remembers none.

    Raises:
        ValueError: If `max_vectors` is negative.

    Example:
        >>> vectors = TextVectors("hashing")
        >>> vectors.rows(["bees in Bled", "bees in Bled"]).shape, len(vectors)
        ((2, 256), 1)
    """

    def __init__(self, embedder: Any, *, max_vectors: int = 20_000) -> None:
        if isinstance(max_vectors, bool) or not isinstance(max_vectors, int) or max_vectors < 0:
            raise ValueError(f"`max_vectors` must be a non-negative integer, got {max_vectors!r}.")
        from langchain_core.embeddings import Embeddings

        if embedder is None or isinstance(embedder, (str, Embeddings)):
            embedder = get_embedder(embedder)
        self.embedder = embedder
        self.max_vectors = max_vectors
        self._cache: LRU[bytes, np.ndarray] = LRU(max_vectors)

    def __len__(self) -> int:
        return len(self._cache)

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of `texts` (float32 rows); texts not remembered are embedded in one call."""
        keys = [_text_key(b"d", text) for text in texts]
        found = self._cache.get_many(keys)
        missing = {key: text for key, text, row in zip(keys, texts, found, strict=True) if row is None}
        if missing:
            # stored as float16: a vector reads the same whether it was just embedded or remembered
            embedded = np.asarray(self.embedder.embed(list(missing.values())), dtype=np.float16)
            fresh = dict(zip(missing, embedded, strict=True))
            self._cache.put_many(fresh)
            found = [fresh[key] if row is None else row for key, row in zip(keys, found, strict=True)]
        rows = [row for row in found if row is not None]
        if not rows:
            return np.zeros((0, int(getattr(self.embedder, "dim", 0))), dtype=np.float32)
        return np.stack(rows).astype(np.float32)

    def query(self, text: str) -> np.ndarray:
        """A search query's vector (float32), embedded once per distinct query."""
        key = _text_key(b"q", text)
        row = self._cache.get(key)
        if row is None:
            embed_query = getattr(self.embedder, "embed_query", None)
            raw = embed_query(text) if embed_query is not None else self.embedder.embed([text])[0]
            row = np.asarray(raw, dtype=np.float16)
            self._cache.put(key, row)
        return row.astype(np.float32)
