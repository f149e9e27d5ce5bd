"""`assay estimate` counts what issue 26's requests send beyond text: images by their provider's
documented rule (sizes read from the files' headers), the tools' definitions and a reply's schema,
and says which field bounds a reasoning model's output."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from assay.analysis.estimate import count_tokens
from assay.calls.media import image_size, image_tokens
from assay.cli import main
from tests.conftest import write_jsonl, write_spec

BASE = "http://127.0.0.1:9/v1"


def png(width: int, height: int) -> bytes:
    """A real (grey, zero-filled) PNG of that size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def jpeg(width: int, height: int) -> bytes:
    """A JPEG's header up to its frame: SOI, an APP0 segment, then SOF0 with the size."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def webp(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_image_sizes_are_read_from_each_formats_header():
    assert image_size(png(640, 480)) == (640, 480)
    assert image_size(jpeg(1920, 1080)) == (1920, 1080)
    assert image_size(b"GIF89a" + struct.pack("<HH", 300, 200) + b"\x00" * 8) == (300, 200)
    lossy = b"\x00" * 3 + b"\x9d\x01\x2a" + struct.pack("<HH", 800, 600)
    assert image_size(webp(b"VP8 ", lossy)) == (800, 600)
    bits = (400 - 1) | ((250 - 1) << 14)
    assert image_size(webp(b"VP8L", b"\x2f" + bits.to_bytes(4, "little"))) == (400, 250)
    canvas = b"\x00" * 4 + (1000 - 1).to_bytes(3, "little") + (700 - 1).to_bytes(3, "little")
    assert image_size(webp(b"VP8X", canvas)) == (1000, 700)
    assert image_size(b"%PDF-1.7") is None and image_size(b"\x89PNG\r\n\x1a\n") is None


def test_image_tokens_follow_the_providers_documented_examples():
    # OpenAI's vision guide: 1024 x 1024 at high detail is 765 tokens, 2048 x 4096 is 1105.
    assert image_tokens("openai", (1024, 1024)) == 765
    assert image_tokens("openai", (2048, 4096)) == 1105
    assert image_tokens("openai", (200, 200)) == 85 + 170
    # Anthropic's vision guide: 1000 x 1000 is about 1334 tokens; a large image about 1600.
    assert image_tokens("anthropic", (1000, 1000)) == 1334
    assert image_tokens("anthropic", (4000, 3000)) == 1600
    # An image of unknown size (a url) counts the most an image can.
    assert image_tokens("openai", None) == 85 + 170 * 8 and image_tokens("anthropic", None) == 1600


def estimate(capsys, spec: Path, tmp_path: Path) -> dict:
    assert main(["estimate", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)["lines"]
    return line


def conversation_spec(
    folder: Path,
    kind: str,
    *,
    image: bool,
    max_tokens: int | None = 64,
    document: bool = False,
    **target: object,
) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "square.png").write_bytes(png(1000, 1000))
    write_jsonl(
        folder / "rows.jsonl", [{"id": f"r{i}", "question": f"Which colour is {i}?"} for i in range(3)]
    )
    parts: list[dict] = [{"type": "text", "text": "{question}"}]
    if image:
        parts.insert(0, {"type": "image", "path": "square.png"})
    if document:
        (folder / "paper.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n")
        parts.insert(0, {"type": "document", "path": "paper.pdf"})
    model = {"openai": "mock-1", "anthropic": "claude-sonnet-4-5-20250929"}[kind]
    return write_spec(
        folder,
        name="images",
        dataset={"path": "rows.jsonl", "id": "id", "input": "question"},
        target={
            "kind": kind,
            "base_url": BASE,
            "model": model,
            **({} if max_tokens is None else {"max_tokens": max_tokens}),
            "messages": [{"role": "user", "content": parts}],
            **target,
        },
        scorers=[{"kind": "regex", "pattern": "."}],
    )


@pytest.mark.parametrize(("kind", "per_image"), [("openai", 765), ("anthropic", 1334)])
def test_an_image_counts_its_providers_tokens(tmp_path, capsys, kind, per_image):
    plain = estimate(capsys, conversation_spec(tmp_path / "plain", kind, image=False), tmp_path)
    seen = estimate(capsys, conversation_spec(tmp_path / "seen", kind, image=True), tmp_path)
    assert seen["input_tokens"] - plain["input_tokens"] == 3 * per_image


WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.mark.parametrize(("kind", "tool_prompt"), [("openai", 0), ("anthropic", 346)])
def test_the_tools_definitions_are_counted(tmp_path, capsys, kind, tool_prompt):
    plain = estimate(capsys, conversation_spec(tmp_path / "plain", kind, image=False), tmp_path)
    tooled = estimate(
        capsys, conversation_spec(tmp_path / "tools", kind, image=False, tools=[WEATHER]), tmp_path
    )
    definitions = count_tokens(json.dumps([WEATHER]))
    assert tooled["input_tokens"] - plain["input_tokens"] == 3 * (definitions + tool_prompt)


def test_a_replys_json_schema_is_counted(tmp_path, capsys):
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    plain = estimate(capsys, conversation_spec(tmp_path / "plain", "openai", image=False), tmp_path)
    shaped = estimate(
        capsys,
        conversation_spec(
            tmp_path / "shaped",
            "openai",
            image=False,
            response_format={"type": "json_schema", "json_schema": {"name": "colour", "schema": schema}},
        ),
        tmp_path,
    )
    sent = count_tokens(json.dumps({"name": "colour", "schema": schema}))
    assert shaped["input_tokens"] - plain["input_tokens"] == 3 * sent


def test_a_reasoning_models_output_is_bounded_by_max_completion_tokens(tmp_path, capsys):
    spec = conversation_spec(
        tmp_path / "o3", "openai", image=False, max_tokens=None, model="o3", max_completion_tokens=4000
    )
    line = estimate(capsys, spec, tmp_path)
    assert line["output_tokens_max"] == 3 * 4000
    assert "bounded by max_completion_tokens (its reasoning tokens included)" in line["note"]


def test_anthropic_thinking_is_bounded_by_max_tokens_and_said_so(tmp_path, capsys):
    spec = conversation_spec(
        tmp_path / "think", "anthropic", image=False, max_tokens=3000, thinking={"budget_tokens": 2048}
    )
    line = estimate(capsys, spec, tmp_path)
    assert line["output_tokens_max"] == 3 * 3000
    assert "max_tokens (thinking's budget_tokens 2048 included)" in line["note"]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_documents_are_said_to_be_left_out_not_counted_as_nothing(tmp_path, capsys, kind):
    # Neither provider documents a rule for a PDF's tokens (Anthropic gives a range a page).
    spec = conversation_spec(tmp_path / "pdf", kind, image=False, document=True)
    line = estimate(capsys, spec, tmp_path)
    assert line["documents_uncounted"] == 3
    assert "3 documents (PDF) not counted in input tokens" in line["note"]
    assert line["bounded"] is False, "an input not counted bounds no maximum"
    plain = estimate(capsys, conversation_spec(tmp_path / "plain", kind, image=False), tmp_path)
    assert "documents_uncounted" not in plain and "documents" not in plain["note"]
