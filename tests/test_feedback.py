"""What a person at a terminal reads when things go wrong: failures grouped by reason, a scorer
that failed everywhere named with its first error, never an empty table without a reason, and a
target that refuses connections stopping the run early (issue 15, points 3 and 4)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.cli import main
from assay.errors import TargetUnreachable
from assay.run.breaker import CircuitBreaker
from assay.store import Store
from assay.testing.mock_openai import MockOpenAIServer
from tests.conftest import arithmetic_rows, only_run_id, write_jsonl, write_spec


@pytest.fixture
def refusing() -> Iterator[socket.socket]:
    """A socket on 127.0.0.1 whose port refuses connections: bound (so nobody else takes it),
    never listening. Close it to free the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock


def refused_spec(folder: Path, port: int, n: int = 30) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    target = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "mock-1"}
    return write_spec(
        folder,
        name="refused",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target={**target, "prompt": "{question}", "max_retries": 0},
        scorers=[{"kind": "exact_match"}],
        concurrency=2,
    )


def test_a_refusing_target_stops_the_run_early_and_resumes(tmp_path, refusing, capsys):
    refusing_port = refusing.getsockname()[1]
    spec, store = refused_spec(tmp_path, refusing_port), tmp_path / "store"
    assert main(["run", str(spec), "--store", str(store)]) == 1
    out = capsys.readouterr().out
    run_id = only_run_id(store)
    where = f"127.0.0.1:{refusing_port}"
    assert f"run {run_id}  status failed" in out
    assert (
        "stopped by: TargetUnreachable: 5 items in a row failed to connect to the target and none "
        f"succeeded (connection refused by {where}); stopped early, the rest cancelled "
        f"(`assay resume {run_id}` continues it)"
    ) in " ".join(out.split()), out
    record = Store(store).read_run(run_id)
    failed, cancelled = record["n_failed"], record["n_cancelled"]
    assert failed >= 5 and failed + cancelled == 30 and cancelled >= 20, (failed, cancelled)
    assert f"items: {failed} failed, {cancelled} cancelled of 30 planned" in out
    assert f"{failed} failed: connection refused by {where} ({failed})" in out
    assert "no scores: no item completed" in out and "┏" not in out, "no empty table"

    # A refused call was never sent: it cost $0, and that figure is complete.
    items = Store(store).run_items(run_id)
    assert items["cost_usd"].to_list() == [0.0] * failed
    assert items["cost_completeness"].to_list() == ["complete"] * failed
    assert items["operations"].to_list() == [1] * failed
    assert record["cost_completeness"] == "complete" and record["cost_usd"] == 0.0

    # Once the endpoint answers, `assay resume` runs the cancelled items.
    refusing.close()
    with MockOpenAIServer(port=refusing_port):
        assert main(["resume", run_id, "--store", str(store), "--json"]) in (0, 1)
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] in ("completed", "failed_gate") and summary["items"]["completed"] == cancelled


def test_the_breaker_trips_only_on_a_streak_of_connection_failures_before_any_success():
    def row(outcome: str, kind: str | None = None) -> dict[str, str | None]:
        return {"outcome": outcome, "failure_kind": kind, "error": f"{kind} error"}

    breaker = CircuitBreaker(threshold=3)
    breaker.observe(row("failed", "connection"))
    breaker.observe(row("failed", "connection"))
    breaker.observe(row("failed", "http"))  # the endpoint answered: the streak starts over
    breaker.observe(row("failed", "connection"))
    breaker.observe(row("failed", "connection"))
    with pytest.raises(
        TargetUnreachable, match=r"^3 items in a row failed to connect .*\(connection error\)"
    ):
        breaker.observe(row("failed", "connection"))

    disarmed = CircuitBreaker(threshold=2)
    disarmed.observe(row("completed"))  # once anything succeeded, failures are data
    for _ in range(5):
        disarmed.observe(row("failed", "connection"))


def test_a_scorer_failing_on_every_item_says_so_in_one_line(tmp_path, mock, capsys):
    write_jsonl(tmp_path / "data.jsonl", arithmetic_rows(3))
    mock.configure(answers={"*": "I would rather not grade this."})
    spec = write_spec(
        tmp_path,
        name="judged",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target={"kind": "openai", "base_url": mock.base_url, "model": "mock-1", "prompt": "{question}"},
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {
                "kind": "llm_judge",
                "name": "judge",
                "base_url": mock.base_url,
                "model": "mock-1",
                "rubric": "Is the answer correct?",
            },
        ],
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("judge:")]
    assert lines == [
        (
            "judge: 3 of 3 failed — JudgeError: no score found in the judge's reply; the judge "
            "replied: 'I would rather not grade this.'"
        )
    ], out
    assert not any(line.startswith("exact:") for line in out.splitlines()), "exact never failed"
