"""The images and documents a conversation sends: their type read from their bytes, their size held
to what each provider documents, their bytes put inline on the wire, and what a captured request
keeps of them (their hash and size, not the bytes).

    sniff(data)            the media type the bytes' magic says (PNG, JPEG, GIF, WebP, PDF), or None
    LIMITS                 per provider: the largest image, document and request it takes
    Media / load_media     a part's bytes (from its file or its `data`), type and sha256
    without_media(body)    a request body with every inline file replaced by `sha256:… bytes:…`
    image_size(data)       an image's width and height, read from its header (no decoder)
    image_tokens(provider, size)   the input tokens an image costs, by the provider's documented rule

The magic numbers are the five the providers accept; a library that knows hundreds of formats
would add a dependency to tell these apart.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.calls.messages import DocumentPart, ImagePart

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types both providers take (OpenAI: PNG, JPEG, WebP, non-animated GIF; Anthropic the same four)."""
PDF = "application/pdf"
MB = 1024 * 1024


def sniff(data: bytes) -> str | None:
    """The media type of `data` by its leading bytes, or None when it is none of the five."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return PDF
    return None


@dataclass(frozen=True, slots=True)
class Limits:
    """What one provider takes, in bytes of the base64 text sent (what its API measures).

    Args:
        image: one image.
        document: one document.
        request: every inline file of one request together.
        document_urls: whether a document may be given by `url` (else inline bytes only).
    """

    image: int
    document: int
    request: int
    document_urls: bool


LIMITS: dict[str, Limits] = {
    # OpenAI's vision guide: images up to 20 MB each, 50 MB of them in one request.
    "openai": Limits(image=20 * MB, document=32 * MB, request=50 * MB, document_urls=False),
    # Anthropic's vision and PDF guides: 5 MB an image, a 32 MB request (PDFs included).
    "anthropic": Limits(image=5 * MB, document=32 * MB, request=32 * MB, document_urls=True),
}


@dataclass(frozen=True, slots=True)
class Media:
    """A file's bytes as sent.

    Args:
        data: the bytes.
        media_type: their type (declared, or sniffed).
        sha256: their hash (hex).
    """

    data: bytes
    media_type: str | None
    sha256: str

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @property
    def encoded_size(self) -> int:
        """The size of the base64 text (4 characters per 3 bytes, padded)."""
        return 4 * ((len(self.data) + 2) // 3)

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64}"


class MediaError(ValueError):
    """A part whose bytes cannot be read (a missing file, `data` that is not base64)."""


def load_media(part: ImagePart | DocumentPart) -> Media | None:
    """The bytes of a part given by `path` (already resolved: absolute) or `data`; None for a `url`.

    Raises:
        MediaError: the file cannot be read, or `data` is not base64.
    """
    declared = part.media_type
    if part.path is not None:
        try:
            data = Path(part.path).read_bytes()
        except OSError as exc:
            raise MediaError(f"cannot read {part.path}: {exc.strerror or exc}") from None
    elif part.data is not None:
        text = part.data
        if text.startswith("data:"):
            head, _, text = text.partition(",")
            if not head.endswith(";base64"):
                raise MediaError("a data URL in `data` must be base64 (`data:<type>;base64,…`)")
            declared = declared or head[5:].removesuffix(";base64") or None
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise MediaError("`data` is not base64 text") from None
    else:
        return None
    return Media(data, declared or sniff(data), hashlib.sha256(data).hexdigest())


def media_problem(part: ImagePart | DocumentPart, media: Media, provider: str) -> str | None:
    """Why a part's bytes cannot be sent to `provider` (type, size), or None."""
    found = sniff(media.data)
    kinds = IMAGE_TYPES if isinstance(part, ImagePart) else (PDF,)
    word = "an image" if isinstance(part, ImagePart) else "a document"
    if found is None:
        return f"{word} must be {' or '.join(k.split('/')[1].upper() for k in kinds)}: its bytes are none of these"
    if found not in kinds:
        return f"{word} must be {', '.join(kinds)}; its bytes are {found}"
    if media.media_type != found:
        return f"media_type {media.media_type!r} is not what its bytes are ({found})"
    limits = LIMITS[provider]
    most = limits.image if isinstance(part, ImagePart) else limits.document
    if media.encoded_size > most:
        return f"{word} of {media.encoded_size:,} bytes (base64) is over {provider}'s limit of {most:,}"
    return None


def _digest(encoded: str) -> str:
    """What a captured request keeps of inline bytes: their sha256 and size."""
    try:
        data = base64.b64decode(encoded)
    except (binascii.Error, ValueError):
        return f"sha256:{hashlib.sha256(encoded.encode()).hexdigest()} chars:{len(encoded)}"
    return f"sha256:{hashlib.sha256(data).hexdigest()} bytes:{len(data)}"


def _data_url_digest(url: str) -> str:
    head, _, encoded = url.partition(",")
    return f"{head},{_digest(encoded)}"


def _part_without_media(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "image_url" and str((part.get("image_url") or {}).get("url", "")).startswith("data:"):
        return {**part, "image_url": {**part["image_url"], "url": _data_url_digest(part["image_url"]["url"])}}
    # The Responses API's parts: the data URL is the field itself.
    if kind == "input_image" and str(part.get("image_url") or "").startswith("data:"):
        return {**part, "image_url": _data_url_digest(part["image_url"])}
    if kind == "input_file" and str(part.get("file_data") or "").startswith("data:"):
        return {**part, "file_data": _data_url_digest(part["file_data"])}
    if kind == "file" and str((part.get("file") or {}).get("file_data", "")).startswith("data:"):
        return {**part, "file": {**part["file"], "file_data": _data_url_digest(part["file"]["file_data"])}}
    source = part.get("source")
    if kind in ("image", "document") and isinstance(source, dict) and source.get("type") == "base64":
        return {**part, "source": {**source, "data": _digest(str(source.get("data", "")))}}
    return part


def without_media(body: Any) -> Any:
    """`body` with the inline bytes of its messages' images and documents replaced by their
    sha256 and size (a Responses request's `input` items' too); the body itself when it holds
    none (a plain prompt is not copied)."""
    if not isinstance(body, dict):
        return body
    turns = "messages" if "messages" in body else "input"
    if not isinstance(body.get(turns), list):
        return body
    messages = body[turns]
    changed = False
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            parts = [_part_without_media(part) for part in content]
            if any(new is not old for new, old in zip(parts, content, strict=True)):
                message = {**message, "content": parts}
                changed = True
        out.append(message)
    return {**body, turns: out} if changed else body


# -- what an image costs in input tokens (`assay estimate`) --------------------------------------

# JPEG's start-of-frame markers (SOF0–SOF15 but DHT, JPG and DAC), which hold the frame's size.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
        elif marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        elif marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            at += 2
        else:
            at += 2 + struct.unpack(">H", data[at + 2 : at + 4])[0]
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:  # lossy: the key frame's 14-bit sizes
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:  # lossless: 14 bits each, minus one
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:  # extended: the canvas, 24 bits each, minus one
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """An image's (width, height) in pixels from its header (PNG's IHDR, JPEG's frame, GIF's
    screen, WebP's frame or canvas), or None when the bytes are none of these or cut short."""
    kind = sniff(data)
    if kind == "image/png" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if kind == "image/gif" and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if kind == "image/jpeg":
        return _jpeg_size(data)
    if kind == "image/webp":
        return _webp_size(data)
    return None


# OpenAI's vision guide, `detail: high` (what `auto` may pick, so the bound): fitted into
# 2048 x 2048, its shorter side brought down to 768, then 170 tokens a 512-pixel tile plus 85.
# The largest such image (768 x 2048, 8 tiles) is what an image of unknown size (a `url`) counts.
_OPENAI_TILE, _OPENAI_BASE = 170, 85
# Anthropic's vision guide: width * height / 750 tokens, after an image whose long edge is over
# 1568 pixels is scaled down; about 1,600 tokens at most, which an image of unknown size counts.
_ANTHROPIC_EDGE, _ANTHROPIC_MOST = 1568, 1600


def _openai_image_tokens(width: int, height: int) -> int:
    fitted = min(1.0, 2048 / max(width, height))
    wide, high = width * fitted, height * fitted
    scale = min(1.0, 768 / min(wide, high))
    tiles = math.ceil(wide * scale / 512) * math.ceil(high * scale / 512)
    return _OPENAI_BASE + _OPENAI_TILE * tiles


def _anthropic_image_tokens(width: int, height: int) -> int:
    scale = min(1.0, _ANTHROPIC_EDGE / max(width, height))
    return min(_ANTHROPIC_MOST, math.ceil(width * scale * height * scale / 750))


# Each provider's rule: (tokens of an image of known size, tokens of one of unknown size).
_IMAGE_RULES = {
    "openai": (_openai_image_tokens, _OPENAI_BASE + _OPENAI_TILE * 8),
    "anthropic": (_anthropic_image_tokens, _ANTHROPIC_MOST),
}


def image_tokens(provider: str, size: tuple[int, int] | None) -> int:
    """The input tokens one image costs on `provider` (`openai`, `anthropic`) by the rule its
    vision guide documents; an image of unknown size (given by `url`, or a header not read)
    counts the most an image can.
    """
    rule, most = _IMAGE_RULES[provider]
    return most if not size or min(size) < 1 else rule(*size)
