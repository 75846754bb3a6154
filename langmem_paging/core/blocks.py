"""Images, files and audio in message content: what they cost, and how they read as text.

A chat API does not read an image's base64 as text: OpenAI bills an image by its size and
``detail`` (85 tokens at low detail; at high detail, fitted within 2048 x 2048, the shortest side
brought down to 768, 170 per 512-pixel tile plus 85), a file by the text the provider extracts. So
a media block counts by that rule (`block_tokens`), and wherever the library reads a message as
text (token counts, bookmarks, search, recalled text) the block reads as a short placeholder
naming it by its alt text, title or filename (`block_text`: ``[image: photo of harbour]``), never
its data. Stored pages keep the blocks whole; a recall returns them as blocks.

Block forms understood: LangChain's standard blocks (``{"type": "image", "base64": ..., "mime_type":
..., "extras": {"alt": ...}}``, ``url``/``file_id`` sources, and the older ``source_type`` /
``data`` form), OpenAI's ``image_url``, ``input_audio`` and ``file`` blocks, Anthropic's ``image`` /
``document`` blocks with a ``source``.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

__all__ = [
    "Block",
    "FILE_TOKENS",
    "IMAGE_TOKENS_UNKNOWN_SIZE",
    "MEDIA_TYPES",
    "block_label",
    "block_text",
    "block_tokens",
    "for_model",
    "image_size",
    "is_media",
    "media_blocks",
    "media_tokens",
    "openai_image_tokens",
    "text_only",
    "unread_kinds",
]

MEDIA_TYPES = frozenset({"image", "image_url", "file", "audio", "input_audio", "video", "document"})
"""Block types that carry media rather than text (``text-plain`` carries text: it is read as text)."""

IMAGE_TOKENS_UNKNOWN_SIZE = 765
"""An image whose size cannot be read here (a URL, a file id, an unknown format): OpenAI's high-detail
cost of a 1024 x 1024 image (4 tiles), the size most images are sent at."""

FILE_TOKENS = 1000
"""A file or audio clip with no text to count: a fixed estimate (the provider's count depends on
pages or seconds this library does not read). Not measured against a provider."""

Block: TypeAlias = dict[str, Any]
"""A content block as LangChain carries it in a message's list content: a JSON object keyed by
``type`` (its other keys depend on the type and the provider, hence the open values)."""

_LABEL_KEYS = ("alt", "alt_text", "caption", "title", "description", "filename", "name")
_DATA_URL = re.compile(r"^data:([^;,]*)(?:;[^,]*)?,", re.IGNORECASE)


def is_media(block: Any) -> bool:
    """True for a content block that carries an image, a file, audio or video."""
    return isinstance(block, dict) and block.get("type") in MEDIA_TYPES


def media_blocks(content: Any) -> list[Block]:
    """The media blocks of a message's content, in order."""
    return [b for b in content if is_media(b)] if isinstance(content, list) else []


def _kind(block: Mapping[str, Any]) -> str:
    kind = str(block.get("type"))
    return {"image_url": "image", "input_audio": "audio", "document": "file"}.get(kind, kind)


def block_label(block: Mapping[str, Any]) -> str:
    """What the block is called: its alt text, caption, title or filename (also under ``extras``,
    ``metadata``, OpenAI's ``file`` and Anthropic's ``source``), else its MIME type, else ''."""
    places = [
        block,
        block.get("extras"),
        block.get("metadata"),
        block.get("file"),
        block.get("source"),
        block.get("image_url"),
    ]
    for place in places:
        if isinstance(place, Mapping):
            for key in _LABEL_KEYS:
                value = place.get(key)
                if isinstance(value, str) and value.strip():
                    return " ".join(value.split())[:200]
    mime = _mime(block)
    return mime or ""


def block_text(block: Mapping[str, Any]) -> str:
    """The placeholder a media block reads as: ``[image: photo of harbour]``, ``[file: report.pdf]``."""
    label = block_label(block)
    return f"[{_kind(block)}: {label}]" if label else f"[{_kind(block)}]"


def _found(places: Iterable[Any], keys: Iterable[str]) -> str | None:
    """The first string under one of `keys` in the first of `places` (the mappings) holding one."""
    for place in places:
        if isinstance(place, Mapping):
            for key in keys:
                if isinstance(place.get(key), str):
                    return str(place[key])
    return None


def _mime(block: Mapping[str, Any]) -> str | None:
    mime = _found((block, block.get("source"), block.get("file")), ("mime_type", "media_type"))
    url = _url(block) if mime is None else None
    match = _DATA_URL.match(url) if url else None
    return match.group(1) or None if match else mime


def _url(block: Mapping[str, Any]) -> str | None:
    image_url = block.get("image_url")
    if isinstance(image_url, str):
        return image_url
    if isinstance(image_url, Mapping) and isinstance(image_url.get("url"), str):
        return str(image_url["url"])
    file = block.get("file")
    if isinstance(file, Mapping) and isinstance(file.get("file_data"), str):
        return str(file["file_data"])
    return str(block["url"]) if isinstance(block.get("url"), str) else None


def _data(block: Mapping[str, Any]) -> str | None:
    """The block's inline base64, if any."""
    data = _found((block, block.get("source"), block.get("input_audio")), ("base64", "data"))
    url = _url(block) if data is None else None
    return url.split(",", 1)[1] if url and url.startswith("data:") and "," in url else data


def _detail(block: Mapping[str, Any]) -> str:
    detail = _found((block, block.get("image_url"), block.get("extras")), ("detail",))
    return "auto" if detail is None else detail.lower()


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF, JPEG or WebP image from its bytes, or None.

    Example:
        >>> image_size(bytes.fromhex("89504e470d0a1a0a0000000d49484452") + struct.pack(">II", 640, 480))
        (640, 480)
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        i += 2 + length
    return None


def openai_image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """OpenAI's image cost (GPT-4o family): 85 at low detail; else 170 per 512-pixel tile of the
    image fitted within 2048 x 2048 with its shortest side at most 768, plus 85.

    Example:
        >>> openai_image_tokens(1024, 1024), openai_image_tokens(2048, 4096), openai_image_tokens(4000, 3000, "low")
        (765, 1105, 85)
    """
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return 170 * math.ceil(w / 512) * math.ceil(h / 512) + 85


def _decoded(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return b""


def block_tokens(block: Mapping[str, Any], count_text: Any = None) -> int:
    """Tokens a provider counts for one media block: an image by OpenAI's rule from its size (read
    from its bytes; `IMAGE_TOKENS_UNKNOWN_SIZE` when they are not inline), a file by its text when it
    carries some (`count_text` counts it), else `FILE_TOKENS`."""
    kind = _kind(block)
    if kind == "image":
        data = _data(block)
        size = image_size(_decoded(data)) if data else None
        if size is None:
            return 85 if _detail(block) == "low" else IMAGE_TOKENS_UNKNOWN_SIZE
        return openai_image_tokens(*size, _detail(block))
    text = block.get("text")
    if isinstance(text, str) and text and count_text is not None:
        return int(count_text(text))
    return FILE_TOKENS


def media_tokens(content: Any, count_text: Any = None) -> int:
    """Tokens of every media block of a message's content (0 for text content)."""
    return sum(block_tokens(b, count_text) for b in media_blocks(content))


def text_only(
    content: Any, note: str = "not shown: this model reads text only", kinds: Iterable[str] | None = None
) -> Any:
    """Content for a model that takes no images or files: each media block (of `kinds`, default
    all) becomes a text block, its placeholder and `note` (``[image: photo of harbour] (not shown:
    ...)``); text stays as is."""
    wanted = None if kinds is None else frozenset(kinds)
    blocks = [b for b in media_blocks(content) if wanted is None or _kind(b) in wanted]
    if not blocks:
        return content
    return [
        {"type": "text", "text": f"{block_text(b)} ({note})"} if any(b is m for m in blocks) else b
        for b in content
    ]


_PROFILE_FLAGS = {
    "image": "image_inputs",
    "file": "pdf_inputs",
    "audio": "audio_inputs",
    "video": "video_inputs",
}
"""Which flag of a LangChain model profile says the model reads a kind of block."""


def unread_kinds(model: Any) -> frozenset[str]:
    """The kinds of media block `model`'s profile says it cannot read (``image_inputs: False``, ...);
    none when it has no profile or does not say."""
    profile = getattr(model, "profile", None)
    if not isinstance(profile, Mapping):
        return frozenset()
    return frozenset(kind for kind, flag in _PROFILE_FLAGS.items() if profile.get(flag) is False)


def for_model(messages: list[Any], model: Any) -> list[Any]:
    """The messages as `model` can read them: media blocks its profile says it cannot read become
    placeholders (`text_only`); the list itself when there is nothing to change."""
    kinds = unread_kinds(model)
    if not kinds or not any(media_blocks(m.content) for m in messages):
        return messages
    note = "not shown: this model does not read this kind of content"
    return [
        m.model_copy(update={"content": text_only(m.content, note, kinds)}) if media_blocks(m.content) else m
        for m in messages
    ]


def blocks_in(content: str, candidates: Iterable[Block]) -> list[Block]:
    """The candidates whose placeholder appears in `content`, in order, each once."""
    out: list[Block] = []
    for block in candidates:
        if block_text(block) in content and not any(b is block for b in out):
            out.append(block)
    return out
