"""ATIF trajectories: the contract a document is validated against (evalkit's statuses), an
http_agent harness that serves ATIF (validated, stored, its steps what scorers see), partial or
unavailable trajectories fetched again before scoring, and `assay trajectories export RUN`."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.cli import main
from assay.store import Store
from assay.targets.atif import Agent, read_atif, to_atif
from assay.testing.harness import HarnessServer
from tests.conftest import write_jsonl, write_spec
from tests.helpers.cli import assay_json, assay_out

ATIF: dict[str, Any] = {
    "schema_version": "ATIF-v1.4",
    "session_id": "025B810F",
    "agent": {"name": "harbor-agent", "version": "1.0.0", "model_name": "gemini-2.5-flash"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "What is GOOGL trading at?"},
        {
            "step_id": 2,
            "timestamp": "2025-10-11T10:30:02Z",
            "source": "agent",
            "message": "Searching.",
            "reasoning_content": "I need the price.",
            "tool_calls": [
                {"tool_call_id": "call_1", "function_name": "search", "arguments": {"q": "GOOGL"}}
            ],
            "observation": {"results": [{"source_call_id": "call_1", "content": "185.35"}]},
            "metrics": {
                "prompt_tokens": 520,
                "completion_tokens": 80,
                "cached_tokens": 200,
                "cost_usd": 0.0045,
            },
        },
        {
            "step_id": 3,
            "source": "agent",
            "message": "It trades at $185.35.",
            "metrics": {"cost_usd": 0.0033},
        },
    ],
}


def _with(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(ATIF)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value
    return doc


def test_the_atif_contract() -> None:
    trajectory, status, problem = read_atif(ATIF)
    assert status == "valid" and problem is None and trajectory is not None
    partial = _with(extra={"trajectory_status": "partial"})
    assert read_atif(partial)[1] == "partial"
    refused = {
        "step ids out of order": _with(steps__2__step_id=7),
        "an unknown field": _with(steps__0__mood="happy"),
        "tool calls on a user step": _with(
            steps__0__tool_calls=[{"tool_call_id": "c", "function_name": "f", "arguments": {}}]
        ),
        "a result naming no call of its step": _with(
            steps__1__observation={"results": [{"source_call_id": "call_9", "content": "x"}]}
        ),
        "an unknown source": _with(steps__0__source="tool"),
        "not ATIF's version": _with(schema_version="ATIF-2"),
        "no agent version": _with(agent={"name": "x"}),
        "a negative token count": _with(steps__1__metrics={"prompt_tokens": -1}),
    }
    for why, doc in refused.items():
        trajectory, status, problem = read_atif(doc)
        assert (trajectory, status) == (None, "invalid"), why
        assert problem and problem.startswith("not ATIF: "), why


def test_assay_steps_become_a_valid_atif_trajectory() -> None:
    steps = [
        {"role": "user", "content": "fix it"},
        {"role": "reasoning", "content": "look first"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t1", "name": "bash", "arguments": {"c": "ls"}}],
        },
        {"role": "tool", "content": "a.py", "tool_call_id": "t1", "is_error": False},
        {"role": "assistant", "content": "done", "tokens": {"input": 10, "output": 5}, "cost_usd": 0.01},
        {"role": "tool", "content": "orphan output", "tool_call_id": "t9"},
    ]
    trajectory = to_atif(steps, session_id="s", agent=Agent(name="codex", version="0.1"))
    doc = trajectory.document()
    assert read_atif(doc)[1] == "valid"
    assert [s["step_id"] for s in doc["steps"]] == [1, 2, 3]
    call_step, answer = doc["steps"][1], doc["steps"][2]
    assert call_step["reasoning_content"] == "look first"
    assert call_step["observation"] == {"results": [{"source_call_id": "t1", "content": "a.py"}]}
    assert answer["metrics"] == {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.01}
    assert answer["observation"] == {"results": [{"content": "orphan output"}]}


@pytest.fixture
def harness() -> Iterator[HarnessServer]:
    with HarnessServer() as server:
        yield server


def _spec(tmp_path: Path, base_url: str) -> Path:
    write_jsonl(tmp_path / "d.jsonl", [{"id": "t1", "input": "task 1"}, {"id": "t2", "input": "task 2"}])
    # A module name of its own: modules are cached per process, and other tests have a `graders`.
    (tmp_path / "atif_graders.py").write_text(
        "def steps(trajectory):\n"
        "    return {'score': 1.0, 'metadata': {'roles': [s['role'] for s in trajectory or []]}}\n"
    )
    return write_spec(
        tmp_path,
        name="atif",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": base_url, "poll_interval": 0.01},
        scorers=[{"kind": "user_code", "name": "steps", "function": "atif_graders:steps"}],
        fail_on_item_error_rate=1,
    )


def _run(spec: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> str:
    return assay_json(capsys, "run", spec, "--store", store)["run_id"]


def _export(run_id: str, store: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    printed = assay_out(capsys, "trajectories", "export", run_id, "--store", store)
    return [json.loads(line) for line in printed.out.splitlines()]


def test_an_atif_trajectory_is_validated_stored_scored_and_exported(tmp_path, harness, capsys) -> None:
    harness.configure(behaviors={"*": {"trajectory": ATIF}})
    run_id = _run(_spec(tmp_path, harness.base_url), tmp_path / "s", capsys)
    store = Store(tmp_path / "s")
    items = store.run_items(run_id).sort("item_id").to_dicts()
    meta = json.loads(items[0]["caller_metadata"])
    assert meta["trajectory_status"] == "valid" and meta["trajectory_format"] == "ATIF-v1.4"
    assert meta["steps"] == 5 and meta["tool_calls"] == 1
    assert items[0]["caller_cost_usd"] == pytest.approx(0.0078)
    # Scorers see ATIF's steps in Assay's shape: the user, the reasoning, the call, its result.
    scores = store.run_scores(run_id).filter(scorer="steps").sort("item_id").to_dicts()
    assert json.loads(scores[0]["metadata"])["roles"] == [
        "user",
        "reasoning",
        "assistant",
        "tool",
        "assistant",
    ]
    # The document itself is stored as validated, beside the steps.
    stored = [a for a in items[0]["artifacts"] if a.endswith("/atif.json")]
    assert len(stored) == 1
    assert json.loads((store.artifacts_root / stored[0]).read_text()) == ATIF
    exported = _export(run_id, tmp_path / "s", capsys)
    assert len(exported) == 2
    first = exported[0]
    assert first["extra"]["assay"] == {"run_id": run_id, "item_id": "t1", "trial": 0, "retry": 0}
    assert {k: v for k, v in first.items() if k != "extra"} == ATIF


def test_a_run_of_harness_steps_exports_as_atif(tmp_path, harness, capsys) -> None:
    harness.configure(behaviors={"*": {"steps": 3, "step_cost": 0.02}})
    run_id = _run(_spec(tmp_path, harness.base_url), tmp_path / "s", capsys)
    exported = _export(run_id, tmp_path / "s", capsys)
    assert len(exported) == 2
    for doc in exported:
        assert read_atif(doc)[1] == "valid"
        assert doc["agent"]["name"] == "http_agent" and doc["session_id"].startswith("run-")
        costs = [s["metrics"]["cost_usd"] for s in doc["steps"] if "metrics" in s]
        assert costs == [0.02, 0.02, 0.02]


def test_partial_and_unavailable_trajectories_are_fetched_again_before_scoring(
    tmp_path, harness, capsys
) -> None:
    harness.configure(
        behaviors={
            "t1": {"trajectory_sequence": ["partial", "partial", None]},  # complete at the third fetch
            "t2": {"trajectory_sequence": ["missing", ATIF]},
        }
    )
    run_id = _run(_spec(tmp_path, harness.base_url), tmp_path / "s", capsys)
    items = Store(tmp_path / "s").run_items(run_id).sort("item_id").to_dicts()
    first, second = (json.loads(row["caller_metadata"]) for row in items)
    assert first["trajectory_status"] == "valid" and first["trajectory_refetches"] == 2
    assert second["trajectory_status"] == "valid" and second["trajectory_refetches"] == 1
    assert harness.stats()["requests"]["trajectory"] == 5
    # Bounded: one that never completes is asked three times in all, and stays what it was.
    harness.reset()
    harness.configure(behaviors={"*": {"trajectory": "missing"}})
    run_id = _run(_spec(tmp_path, harness.base_url), tmp_path / "s2", capsys)
    items = Store(tmp_path / "s2").run_items(run_id).to_dicts()
    assert {json.loads(r["caller_metadata"])["trajectory_status"] for r in items} == {"unavailable"}
    assert harness.stats()["requests"]["trajectory"] == 6


def test_exporting_a_run_without_steps_is_refused(tmp_path, harness, capsys) -> None:
    harness.configure(capabilities={"protocol": "assay-harness/1", "provides": {"trajectory": False}})
    run_id = _run(_spec(tmp_path, harness.base_url), tmp_path / "s", capsys)
    assert main(["trajectories", "export", run_id, "--store", str(tmp_path / "s")]) == 2
    assert "no item kept a trajectory (its target produced no steps)" in capsys.readouterr().err
