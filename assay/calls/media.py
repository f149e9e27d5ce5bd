"""The images and documents a conversation sends: their type read from their bytes, their size held
to what each provider documents, their bytes put inline on the wire, and what a captured request
keeps of them (their hash and size, not the bytes).

    sniff(data)            the media type the bytes' magic says (PNG, JPEG, GIF, WebP, PDF), or None
    LIMITS                 per provider: the largest image, document and request it takes
    Media / load_media     a part's bytes (from its file or its `data`), type and sha256
    without_media(body)    a request body with every inline file replaced by `sha256:… bytes:…`

The magic numbers are the five the providers accept; a library that knows hundreds of formats
would add a dependency to tell these apart.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
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
    """

    image: int
    document: int
    request: int


LIMITS: dict[str, Limits] = {
    # OpenAI's vision guide: images up to 20 MB each, 50 MB of them in one request.
    "openai": Limits(image=20 * MB, document=32 * MB, request=50 * MB),
    # Anthropic's vision and PDF guides: 5 MB an image, a 32 MB request (PDFs included).
    "anthropic": Limits(image=5 * MB, document=32 * MB, request=32 * MB),
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
