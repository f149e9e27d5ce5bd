"""`messages:` on the chat targets (issue 26 §1, §2): a conversation from a dataset field and from
the spec's templated turns, images and PDFs inline, checked per row before the run, part of the
run's identity by their bytes, and kept out of captured requests (their hash and size only).

Whole `assay run`s against the scripted uvicorn server, which refuses any request body the
official SDKs' request types would not have sent (`check_request`)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.calls.capture import CaptureSettings, Recorder, Redactor
from assay.cli import main
from assay.run.checks import validate
from assay.run.identity import identity_of
from assay.store import Store
from assay.testing.scripted import ScriptedServer
from tests.conftest import REPO, write_jsonl, write_spec
from tests.helpers.wire_payloads import CLAUDE, OPENAI_MODEL, anthropic, openai, text
from tests.run.test_sessions import THREE_PROMPTS, write_policy

# A 1x1 PNG; the same picture with a byte after its end is another file of the same type.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF_BYTES = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PROVIDERS = ["openai", "anthropic"]


def target(provider: str, base_url: str, messages: Any, **options: Any) -> dict[str, Any]:
    common = {"base_url": base_url, "messages": messages, "max_retries": 0, **options}
    if provider == "openai":
        return {"kind": "openai", "model": OPENAI_MODEL, **common}
    return {"kind": "anthropic", "model": CLAUDE, "max_tokens": 64, **common}


def answer(provider: str, said: str) -> Any:
    return openai({"content": said}) if provider == "openai" else anthropic(text(said))


def spec_over(folder: Path, rows: list[dict[str, Any]], target_spec: dict[str, Any], **more: Any) -> Path:
    """A spec in `folder` over `rows`, written to `folder/data/rows.jsonl` (paths a row names are
    relative to that folder, not the spec's)."""
    (folder / "data").mkdir(exist_ok=True)
    write_jsonl(folder / "data" / "rows.jsonl", rows)
    return write_spec(
        folder,
        name="conversations",
        dataset={"path": "data/rows.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target=target_spec,
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=1,
        **more,
    )


def run(spec: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], Store]:
    store = spec.parent / "store"
    assert main(["run", str(spec), "--store", str(store), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out), Store(store)


def bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [body for _, body in server.requests]


FEW_SHOT = [
    {"role": "user", "content": "What is 1 + 1?"},
    {"role": "assistant", "content": "2"},
    {"role": "user", "content": "What is {not a template} 2 + 2?"},
]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_spec_turns_then_the_items_conversation_are_sent_as_turns(tmp_path, scripted, provider, capsys):
    rows = [{"id": "a", "question": "2 + 2", "answer": "4", "topic": "sums", "messages": FEW_SHOT}]
    messages = [
        {"role": "system", "content": "You answer questions on {topic}."},
        {"role": "user", "content": [{"type": "text", "text": "Example: 3 + 3"}]},
        {"role": "assistant", "content": "6"},
        {"field": "messages"},
    ]
    scripted.script(answer(provider, "4"))
    summary, _ = run(spec_over(tmp_path, rows, target(provider, scripted.base_url, messages)), capsys)

    assert summary["items"]["completed"] == 1 and summary["scorers"][0]["mean"] == 1.0
    (body,) = bodies(scripted)
    turns = [
        {"role": "user", "content": [{"type": "text", "text": "Example: 3 + 3"}]},
        {"role": "assistant", "content": "6"},
        # The item's own turns are sent as written: its braces are no template.
        *FEW_SHOT,
    ]
    if provider == "openai":
        assert body["messages"] == [{"role": "system", "content": "You answer questions on sums."}, *turns]
    else:  # the system turn is lifted into `system`
        assert body["system"] == "You answer questions on sums." and body["messages"] == turns


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_image_is_sent_inline_and_captured_as_its_hash_and_size(tmp_path, scripted, provider, capsys):
    (tmp_path / "data" / "images").mkdir(parents=True)
    (tmp_path / "data" / "images" / "dot.png").write_bytes(PNG)
    (tmp_path / "data" / "report.pdf").write_bytes(PDF_BYTES)
    rows = [{"id": "a", "question": "What colour is it?", "answer": "red", "image": "dot.png"}]
    parts: list[dict[str, Any]] = [
        {"type": "image", "path": "images/{image}"},
        {"type": "text", "text": "{question}"},
    ]
    if provider == "anthropic":
        parts.insert(1, {"type": "document", "path": "report.pdf"})
    messages = [{"role": "user", "content": parts}]
    scripted.script(answer(provider, "red"))
    spec = spec_over(tmp_path, rows, target(provider, scripted.base_url, messages), capture_requests=True)
    summary, store = run(spec, capsys)

    encoded = base64.b64encode(PNG).decode()
    (body,) = bodies(scripted)
    (turn,) = body["messages"]
    if provider == "openai":
        assert turn["content"] == [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},
            {"type": "text", "text": "What colour is it?"},
        ]
    else:
        assert turn["content"] == [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}},
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": base64.b64encode(PDF_BYTES).decode(),
                },
            },
            {"type": "text", "text": "What colour is it?"},
        ]
    captured = store.run_requests(summary["run_id"]).filter(phase="start")["request"][0]
    kept = f"sha256:{hashlib.sha256(PNG).hexdigest()} bytes:{len(PNG)}"
    assert encoded not in captured and kept in captured


def test_media_bytes_are_kept_in_a_captured_request_when_the_capture_asks():
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "plain"},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
            },
        ],
    }
    record = {"request": body}
    stripped = Recorder(CaptureSettings(), Redactor([], [])).admit(dict(record))
    kept = Recorder(CaptureSettings(media_bytes=True), Redactor([], [])).admit(dict(record))
    url = stripped["request"]["messages"][1]["content"][0]["image_url"]["url"]
    zeros = hashlib.sha256(bytes(3)).hexdigest()  # "AAAA" is three zero bytes
    assert url == f"data:image/png;base64,sha256:{zeros} bytes:3"
    assert kept["request"] == body
    assert body["messages"][1]["content"][0]["image_url"]["url"].endswith("AAAA"), (
        "the request sent is untouched"
    )


def test_an_image_changed_under_a_run_changes_its_identity(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dot.png").write_bytes(PNG)
    rows = [{"id": "a", "question": "q", "answer": "x"}]
    messages = [
        {"role": "user", "content": [{"type": "image", "path": "dot.png"}, {"type": "text", "text": "q"}]}
    ]
    spec_path = spec_over(tmp_path, rows, target("openai", "http://127.0.0.1:9/v1", messages))

    def digest() -> str:
        spec, items = validate(spec_path)
        return identity_of(spec, items, spec_path.parent).digest

    first = digest()
    (tmp_path / "data" / "dot.png").write_bytes(PNG + b"\0")
    assert digest() != first
    (tmp_path / "data" / "dot.png").write_bytes(PNG)
    assert digest() == first


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_rows_exit_2_naming_their_line_and_what_is_wrong(tmp_path, provider, capsys):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "fake.png").write_bytes(b"not a picture at all")
    (tmp_path / "data" / "dot.png").write_bytes(PNG)
    user = {"role": "user", "content": "hi"}
    rows = [
        {"messages": [user]},
        {"messages": [{"role": "tool", "content": "42"}]},
        {"messages": [{"role": "user", "content": "  "}]},
        {"messages": [user, {"role": "user", "content": "again"}]},
        {"messages": [{"role": "user", "content": [{"type": "image", "path": "missing.png"}]}]},
        {"messages": [{"role": "user", "content": [{"type": "image", "path": "fake.png"}]}]},
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image", "path": "dot.png", "media_type": "image/jpeg"}],
                }
            ]
        },
        {"messages": [{"role": "assistant", "content": [{"type": "image", "path": "dot.png"}]}, user]},
        {"messages": "just text"},
        {"question": "no conversation"},
    ]
    for n, row in enumerate(rows):
        row.update(id=f"r{n}", question=row.get("question", "q"), answer="x")
    spec = spec_over(tmp_path, rows, target(provider, "http://127.0.0.1:9/v1", {"field": "messages"}))
    store = tmp_path / "store"
    assert main(["run", str(spec), "--store", str(store)]) == 2
    said = capsys.readouterr().err
    expected = [
        "line 2: field 'messages' (target.messages): turn 1.role: a `tool` turn is not accepted",
        "line 3: field 'messages' turn 1: the user turn's content is empty",
        "line 5: field 'messages' turn 1.content[0] (image): cannot read",
        "line 6: field 'messages' turn 1.content[0] (image): an image must be PNG or JPEG or GIF or WEBP",
        "line 7: field 'messages' turn 1.content[0] (image): media_type 'image/jpeg' is not what its bytes are (image/png)",
        "line 8: field 'messages' turn 1.content[0] (image): an image can only be in a user turn",
        "line 9: field 'messages' (target.messages) holds text that is not a JSON list of turns",
        "line 10: field 'messages' (target.messages) is missing",
    ]
    if provider == "anthropic":
        expected += [
            "line 4: field 'messages' turn 2: two user turns in a row",
            "line 8: field 'messages' turn 1: the first turn after the system turns must be a user turn",
        ]
    for line in expected:
        assert line in said, line
    assert "line 1:" not in said
    assert ("line 4:" in said) is (provider == "anthropic"), "OpenAI takes two user turns in a row"
    assert not store.exists(), "nothing is written"


def test_anthropic_refuses_a_system_turn_inside_the_conversation(tmp_path, capsys):
    rows = [{"id": "a", "question": "q", "answer": "x"}]
    messages = [
        {"role": "user", "content": "{question}"},
        {"role": "system", "content": "Now be terse."},
        {"role": "assistant", "content": "ok"},
    ]
    spec = spec_over(tmp_path, rows, target("anthropic", "http://127.0.0.1:9/v1", messages))
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert "line 1: target.messages.1: a system turn after the conversation began" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        (
            [{"role": "user", "content": "{question"}],
            "target: messages.0: bad template",
        ),
        (
            [{"role": "user", "content": [{"type": "image", "path": "a.png", "url": "https://x/a.png"}]}],
            "exactly one of path, url or data",
        ),
        ([{"role": "user", "content": [{"type": "video", "path": "a.mp4"}]}], "video"),
        ([], "messages is empty"),
    ],
)
def test_a_bad_messages_spec_is_refused_at_load(tmp_path, messages, said, capsys):
    spec = spec_over(
        tmp_path,
        [{"id": "a", "question": "q", "answer": "x"}],
        target("openai", "http://127.0.0.1:9/v1", messages),
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert said in capsys.readouterr().err


def test_prompt_and_messages_together_are_refused(tmp_path, capsys):
    spec_target = target("openai", "http://127.0.0.1:9/v1", {"field": "messages"}, prompt="{question}")
    spec = spec_over(tmp_path, [{"id": "a", "question": "q", "answer": "x"}], spec_target)
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert "give `prompt` or `messages`, not both" in capsys.readouterr().err


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_session_continues_the_items_conversation(tmp_path, scripted, provider, capsys):
    rows = [{"id": "a", "question": "2 + 2", "answer": "4", "messages": FEW_SHOT}]
    scripted.script(answer(provider, "4"), answer(provider, "yes"), answer(provider, "4"))
    spec = spec_over(
        tmp_path,
        rows,
        target(provider, scripted.base_url, {"field": "messages"}),
        policy=write_policy(tmp_path, THREE_PROMPTS),
    )
    summary, _ = run(spec, capsys)
    assert summary["items"]["completed"] == 1
    sent = [body["messages"] for body in bodies(scripted)]
    # The first prompt is the conversation's last user turn: the first request is the conversation.
    assert sent[0] == FEW_SHOT
    assert sent[1] == [
        *FEW_SHOT,
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "Are you sure?"},
    ]
    assert sent[2][-1] == {"role": "user", "content": "Final answer?"} and len(sent[2]) == 7


def test_the_conversations_example_runs_against_the_mock_server(tmp_path, mock, capsys):
    example = tmp_path / "example"
    shutil.copytree(REPO / "examples" / "conversations", example)
    spec = yaml.safe_load((example / "spec.yaml").read_text())
    spec["target"]["base_url"] = mock.base_url  # the example names port 8000
    (example / "spec.yaml").write_text(yaml.safe_dump(spec))
    summary, store = run(example / "spec.yaml", capsys)
    assert summary["items"]["completed"] == 3
    sent = mock.stats()["bodies"][-3:]
    for body in sent:
        system, *shots, asked = body["messages"]
        assert system["role"] == "system" and len(shots) == 2
        assert asked["content"][0]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    captured = store.run_requests(summary["run_id"]).filter(phase="start")["request"].to_list()
    assert all("bytes:74" in request and "iVBOR" not in request for request in captured)
