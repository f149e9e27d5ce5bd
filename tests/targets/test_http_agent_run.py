"""`assay run` of an http_agent spec: capabilities snapshotted once on the run, inputs validated
before anything is written, items the agent cannot take dropped and listed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from assay.cli import main
from assay.store import Store
from assay.testing.harness import DEFAULT_CAPABILITIES, HarnessServer
from tests.conftest import write_jsonl, write_spec


@pytest.fixture
def harness() -> Iterator[HarnessServer]:
    with HarnessServer() as server:
        yield server


def agent_spec(tmp_path, base_url, rows):
    write_jsonl(tmp_path / "d.jsonl", rows)
    return write_spec(
        tmp_path,
        name="agent",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": base_url, "poll_interval": 0.01},
        scorers=[{"kind": "includes", "name": "echo", "value": "task"}],
    )


def test_capabilities_are_snapshotted_and_a_resume_reuses_them(tmp_path, harness, capsys):
    files = json.dumps([{"path": "a.txt", "url": "http://127.0.0.1:1/a.txt"}])
    rows = [{"id": f"t{i}", "input": f"task {i}"} for i in range(4)] + [
        {"id": "f", "input": "task f", "files": files}
    ]
    harness.configure(
        capabilities={**DEFAULT_CAPABILITIES, "accepts": {"file_input": False, "file_urls": False}}
    )
    spec = agent_spec(tmp_path, harness.base_url, rows)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert "skipped 1 items the agent cannot take: f" in captured.err
    record = Store(tmp_path / "s").read_run(summary["run_id"])
    snapshot = json.loads(record["target_snapshot"])
    assert snapshot["dropped_items"][0]["item_id"] == "f" and record["n_planned"] == 4
    assert summary["items"]["completed"] == 4 and harness.stats()["requests"]["capabilities"] == 1
    bodies = harness.stats()["bodies"]
    assert {b["metadata"]["run_id"] for b in bodies} == {summary["run_id"]}

    harness.reset()
    assert main(["resume", summary["run_id"], "--store", str(tmp_path / "s"), "--json"]) == 0
    capsys.readouterr()
    assert harness.stats()["requests"].get("capabilities", 0) == 0, "the resume used the stored snapshot"


def test_inputs_failing_the_agents_schema_are_all_listed_and_nothing_is_written(tmp_path, harness, capsys):
    schema = {"type": "object", "required": ["task"], "properties": {"task": {"type": "string"}}}
    harness.configure(capabilities={**DEFAULT_CAPABILITIES, "input_schema": schema})
    rows = [
        {"id": "ok", "input": {"task": "x"}},
        {"id": "bad1", "input": {"nope": 1}},
        {"id": "bad2", "input": "text"},
    ]
    spec = agent_spec(tmp_path, harness.base_url, rows)
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "bad1" in err and "bad2" in err and "ok'" not in err
    assert not (tmp_path / "s").exists()
