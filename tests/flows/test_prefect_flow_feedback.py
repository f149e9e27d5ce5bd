"""What an operator sees of a flow run in the Prefect UI, read back through the Prefect client from
a real `prefect server`: the flow run's logs (its run, store, progress, summary, failures grouped),
and a spec error that fails the flow run with the terminal's message and no traceback.

One server for the module (booting one takes ~20-40 s on a loaded machine).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay import numbers
from assay.analysis.lines import failures_line
from assay.run.breaker import THRESHOLD
from assay.store import Store
from tests.conftest import REPO, mock_target, openai_spec, write_jsonl, write_spec
from tests.helpers.prefect_server import PrefectAPI, serving_prefect
from tests.helpers.shadowing import N_ITEMS, shadowing_spec

pytestmark = [pytest.mark.prefect]

CLI_TIMEOUT_S = 180
# Logs reach the server from the flow run's process in batches (the last at its exit).
LOGS_WAIT_S = 30.0


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectAPI]:
    with serving_prefect(tmp_path_factory.mktemp("prefect-home")) as api:
        # The logs are what these tests read: shipped to the API, at Prefect's own level.
        del api.env["PREFECT_LOGGING_LEVEL"], api.env["PREFECT_LOGGING_TO_API_ENABLED"]
        yield api


def _assay(api: PrefectAPI, *args: str) -> subprocess.CompletedProcess[str]:
    return api.assay(*args, timeout=CLI_TIMEOUT_S)


def _client(api: PrefectAPI) -> Any:
    """A sync Prefect client of the module's server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api.url}):
        return get_client(sync_client=True)


def _logs(api: PrefectAPI, flow_run_id: str, last: str) -> list[Any]:
    """The flow run's logs, once one of them says `last` (or as they are after the wait)."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    deadline = time.monotonic() + LOGS_WAIT_S
    with _client(api) as client:
        while True:
            logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            if any(last in log.message for log in logs) or time.monotonic() > deadline:
                return logs
            time.sleep(0.5)


def _failing_spec(folder: Path, n: int) -> Path:
    """`n` items through a local function that fails every fourth with the same error."""
    (folder / "solver.py").write_text(
        "def solve(question: str) -> str:\n"
        "    if int(question.removeprefix('q')) % 4 == 0:\n"
        "        raise ValueError('no answer for multiples of four')\n"
        "    return question\n"
    )
    write_jsonl(
        folder / "data.jsonl", [{"id": f"q{i}", "input": f"q{i}", "expected": f"q{i}"} for i in range(n)]
    )
    return write_spec(
        folder,
        name="logged",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "solver:solve"},
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=4,
    )


def test_a_flow_run_logs_its_run_store_progress_summary_and_failures(api: PrefectAPI, tmp_path: Path) -> None:
    spec = _failing_spec(tmp_path, 20)
    store = tmp_path / "store"
    done = _assay(api, "run", str(spec), "--store", str(store), "--json")
    assert done.returncode == 1, "5 of 20 failed: over the 5 % gate"
    summary = json.loads(done.stdout)
    run_id = summary["run_id"]
    flow_run_id = Store(store).read_run(run_id)["prefect_flow_run_id"]

    cost_line = numbers.cost_line(summary["cost"])
    logs = _logs(api, flow_run_id, cost_line)
    ours = [log.message for log in logs if log.name == "prefect.flow_runs" and log.level == 20]
    text = "\n".join(ours)
    assert f"run {run_id} of logged: 20 of 20 items to run · store {store}" in ours, text
    progress = [line for line in ours if line.startswith("progress: ")]
    assert progress[0].startswith("progress: 0 of 20 items (0.0%) · 0 failed"), text
    assert progress[-1].startswith("progress: 20 of 20 items (100.0%) · 5 failed"), text
    assert f"logged run {run_id}: failed_gate" in ours, text
    assert any(line.startswith("items: 15 completed, 5 failed of 20 planned") for line in ours), text
    # Grouped as the terminal groups them (the same function words both).
    assert failures_line(5, summary["failures"]) in ours, text
    assert "5 failed: ValueError: no answer for multiples of four (5)" in text
    assert any(line.startswith("scorer exact: mean ") for line in ours), text
    assert cost_line in ours, text
    # The terminal stays quiet: Prefect's INFO lines go to the API, not to stderr.
    assert "progress: " not in done.stderr and "Beginning flow run" not in done.stderr
    # Failed, as `assay run` exits 1: a schedule's runs and automations see it, the gate named.
    with _client(api) as client:
        state = client.read_flow_run(flow_run_id).state
    assert state is not None and state.type.value == "FAILED", state
    assert "item error rate 25.0% (5 failed of 20 attempted), limit 5.0% (fail_on_item_error_rate)" in (
        state.message or ""
    )


def test_a_users_tasks_flows_and_evaluators_beside_the_spec_under_prefect(
    api: PrefectAPI, tmp_path: Path
) -> None:
    """Under Prefect the flow imports Assay's flows and tasks before the spec's folder goes on
    `sys.path`: the user's `tasks:solve` and `evaluators:graded` must still be the user's."""
    spec = shadowing_spec(tmp_path)
    store = tmp_path / "store"
    done = _assay(api, "run", str(spec), "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert Store(store).read_run(json.loads(done.stdout)["run_id"])["prefect_flow_run_id"]
    scores = pl.read_parquet(store / "scores" / "**" / "*.parquet").filter(pl.col("kind") == "score")
    assert scores["score"].to_list() == [1.0] * N_ITEMS


_RUN_FLOW = """
import asyncio, sys
from assay.flows.run import run_eval
from assay.orchestrate.run import RunRequest
state = asyncio.run(run_eval(RunRequest(spec=sys.argv[1], store=sys.argv[2]), return_state=True))
print(state.state_details.flow_run_id)
"""


def test_a_spec_error_fails_the_flow_run_with_the_message_alone(api: PrefectAPI, tmp_path: Path) -> None:
    """As a deployment's run would: the flow itself (no CLI check first) given a spec with a bad
    field. The flow run fails with what the terminal prints, names the spec, and logs no traceback."""
    write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "input": "x"}])
    spec = write_spec(
        tmp_path,
        name="broken-spec",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "solver:solve", "colour": "red"},
        scorers=[{"kind": "exact_match"}],
    )
    terminal = _assay(api, "run", str(spec), "--store", str(tmp_path / "store"))
    assert terminal.returncode == 2
    message = terminal.stderr.strip().removeprefix("error: ")
    assert "colour" in message, terminal.stderr

    done = subprocess.run(
        [sys.executable, "-c", _RUN_FLOW, str(spec), str(tmp_path / "store")],
        check=False,
        cwd=REPO,
        env=api.env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    flow_run_id = done.stdout.strip().splitlines()[-1]
    with _client(api) as client:
        flow_run = client.read_flow_run(flow_run_id)
    assert flow_run.state is not None and flow_run.state.type.value == "FAILED"
    assert flow_run.state.message == message
    assert flow_run.name == "broken-spec · bad input"
    logs = _logs(api, flow_run_id, "Finished in state Failed")
    assert any("Finished in state Failed" in log.message for log in logs), [log.message for log in logs]
    assert not [log.message for log in logs if "Traceback" in log.message]
    assert not (tmp_path / "store").exists(), "nothing written"


SECRET = "sk-test-from-a-secret-block-0123456789"


def test_an_api_key_from_a_secret_block_reaches_the_endpoint_and_nothing_else(
    api: PrefectAPI, tmp_path: Path, mock: Any
) -> None:
    """`api_key_secret` on a target and a judge: the key is read from the Prefect Secret block at
    run time, sent as the Authorization header, and found in no parameter, log or stored byte."""
    from prefect.blocks.system import Secret
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api.url}):
        Secret(value=SECRET).save("mock-openai-key", overwrite=True)
    mock.configure(answers={"*": '{"score": 1, "explanation": "fine"}'})
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=4,
        target=mock_target(mock.base_url, api_key_secret="mock-openai-key"),
        scorers=[
            {
                "kind": "llm_judge",
                "name": "judge",
                "base_url": mock.base_url,
                "model": "mock-judge",
                "api_key_secret": "mock-openai-key",
                "rubric": "Grade {output} for {input}",
                "gold_check": False,
            }
        ],
        capture_requests=True,
        fail_on_item_error_rate=1,
    )
    assert SECRET not in spec.read_text()
    store = tmp_path / "store"
    done = _assay(api, "run", str(spec), "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["items"]["completed"] == 4
    assert [row["scored"] for row in summary["scorers"]] == [4]
    assert mock.stats()["last_authorization"] == f"Bearer {SECRET}"

    flow_run_id = Store(store).read_run(summary["run_id"])["prefect_flow_run_id"]
    with _client(api) as client:
        flow_run = client.read_flow_run(flow_run_id)
    assert SECRET not in json.dumps(flow_run.parameters)
    logs = _logs(api, flow_run_id, "Finished in state")
    assert logs and not [log.message for log in logs if SECRET in log.message]
    assert SECRET not in done.stdout + done.stderr
    stored = [path for path in store.rglob("*") if path.is_file()]
    assert any(path.match("requests/*/*.parquet") for path in stored), "requests were captured"
    assert not [path for path in stored if SECRET.encode() in path.read_bytes()]


def test_a_missing_secret_block_is_a_spec_error_naming_the_field(api: PrefectAPI, tmp_path: Path) -> None:
    spec = openai_spec(
        tmp_path,
        "http://127.0.0.1:9/v1",
        target=mock_target("http://127.0.0.1:9/v1", api_key_secret="no-such-block"),
    )
    done = _assay(api, "run", str(spec), "--store", str(tmp_path / "store"))
    assert done.returncode == 2
    assert "target.api_key_secret: no Prefect Secret block named 'no-such-block'" in done.stderr
    assert not (tmp_path / "store").exists()


def test_a_dead_endpoint_stops_the_flow_run_as_a_result_not_a_crashed_shard(
    api: PrefectAPI, tmp_path: Path
) -> None:
    """The circuit breaker's stop under Prefect: no shard task fails, crashes or is retried, the
    flow run fails with the run's message and no traceback, and as many items are sent as the
    terminal's embedded run sends (`THRESHOLD`), not that again for each shard's retry."""
    with socket.socket() as refusing:  # bound, never listening: its port refuses connections
        refusing.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{refusing.getsockname()[1]}/v1"
        # 60 items: three shards under Prefect; one at a time, so the count is exact.
        spec = openai_spec(tmp_path, dead, n=60, target=mock_target(dead, max_retries=0), concurrency=1)
        store = tmp_path / "store"
        done = _assay(api, "run", str(spec), "--store", str(store), "--json")
    assert done.returncode == 1, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["status"] == "failed", summary
    sent = Store(store).run_items(summary["run_id"], history=True)
    assert sent.height == THRESHOLD, sent["item_id"].to_list()

    flow_run_id = Store(store).read_run(summary["run_id"])["prefect_flow_run_id"]
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    # Task runs reach the server through its event pipeline, a moment after the flow run ends.
    deadline = time.monotonic() + LOGS_WAIT_S
    with _client(api) as client:
        flow_run = client.read_flow_run(flow_run_id)
        while True:
            shards = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
            ended = [
                s for s in shards if s.state_type and s.state_type.value in ("COMPLETED", "FAILED", "CRASHED")
            ]
            if len(ended) == len(shards) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert flow_run.state is not None and flow_run.state.type.value == "FAILED", flow_run.state
    assert (flow_run.state.message or "").startswith(
        f"failed: TargetUnreachable: {THRESHOLD} items in a row failed to connect to the target"
    ), flow_run.state.message
    assert len(shards) == 3, [shard.name for shard in shards]
    assert [(s.state_type.value if s.state_type else None, s.run_count) for s in shards] == [
        ("COMPLETED", 1)
    ] * 3
    logs = _logs(api, flow_run_id, "Finished in state Failed")
    text = "\n".join(log.message for log in logs)
    assert "Finished in state Failed" in text, text
    # The one ERROR line is the flow run's end, Failed as `assay run` exits 1.
    errors = [log.message for log in logs if log.level >= 40]
    assert len(errors) == 1 and errors[0].startswith("Finished in state Failed('failed: "), text
    assert "Traceback" not in text and "Crash detected" not in text, text
