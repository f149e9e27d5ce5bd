"""What the item browser shows of issue 26's model I/O: an item's conversation as turns, the tool
calls that were its answer, and its reasoning.

The conversation (a chat target's `messages:`) is not stored with the items: it is made again
from the run's stored spec and its dataset file, as the run made it (`TargetKind.conversation`),
when the file is still there; else the browser shows the item's input as for any run. No bytes
of an image are stored either: a part shows its path, size and sha256 as read now, and a
thumbnail (the file itself as a data URL) only when the file is readable and small.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assay.calls.media import IMAGE_TYPES, MediaError, image_size, load_media, sniff
from assay.calls.messages import DocumentPart, ImagePart, TextPart, Turn
from assay.errors import InputError
from assay.report.data import cut
from assay.spec import DatasetSpec, EvalSpec
from assay.spec.dataset import load_items
from assay.targets import kind_of

THUMBNAIL_BYTES = 96 * 1024
"""The largest image embedded as a thumbnail: a report of many images stays a few MB."""


def conversations(record: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each item's turns (by item id) for the browser; empty when the run's target wrote no
    conversation, or its spec or dataset cannot be read now."""
    target = json.loads(record.get("spec_json") or "{}").get("target") or {}
    if not target.get("messages") or not record.get("spec_path"):
        return {}
    try:
        spec = EvalSpec.model_validate_json(record["spec_json"])
        # The stored spec names every field, its defaults too: read back as given, the default
        # `expected` field would be required of every row. A default is no choice: dropped.
        stored = spec.dataset.model_dump()
        fields = DatasetSpec.model_fields
        dataset = DatasetSpec.model_validate({k: v for k, v in stored.items() if v != fields[k].default})
        items = load_items(dataset, Path(record["spec_path"]).parent)
    except (InputError, OSError, ValueError):
        return {}
    kind = kind_of(spec.target)
    shown: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        try:
            turns = kind.conversation(spec.target, item)
        except ValueError:
            continue
        if turns is not None:
            shown[item.item_id] = [_turn(turn) for turn in turns]
    return shown


def _turn(turn: Turn) -> dict[str, Any]:
    parts = [{"type": "text", "text": cut(turn.content)}] if isinstance(turn.content, str) else []
    for part in [] if isinstance(turn.content, str) else turn.content:
        parts.append({"type": "text", "text": cut(part.text)} if isinstance(part, TextPart) else _media(part))
    return {"role": turn.role, "parts": parts}


def _media(part: ImagePart | DocumentPart) -> dict[str, Any]:
    """A file's part as the browser names it: where it is, and what its bytes are now."""
    if part.url is not None:
        return {"type": part.type, "url": part.url}
    shown: dict[str, Any] = {
        "type": part.type,
        "path": part.path if part.path is not None else "(inline data)",
    }
    try:
        media = load_media(part)
    except MediaError as exc:
        return shown | {"missing": str(exc)}
    assert media is not None  # a path or data
    shown |= {"bytes": len(media.data), "sha256": media.sha256}
    found = sniff(media.data)
    if isinstance(part, ImagePart) and found in IMAGE_TYPES:
        size = image_size(media.data)
        if size is not None:
            shown["size"] = f"{size[0]}×{size[1]}"
        # The type is the bytes' own (never a declared one), and the browser sets it as `src`.
        if len(media.data) <= THUMBNAIL_BYTES:
            shown["thumbnail"] = f"data:{found};base64,{media.base64}"
    return shown
