"""`assay run` and `assay resume` as real Prefect flow runs, against a real `prefect server`.

One server for the module (booting one takes ~10-15 s). What a flow run did is checked twice:
in Assay's store, and through Prefect's REST API — the flow run, its flow and its shard task runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from assay.store import Store
from tests.conftest import REPO
from tests.helpers.prefect_server import PrefectAPI, prefect_http, serving_prefect

pytestmark = [pytest.mark.prefect]

SPEC = "examples/quickstart/spec.yaml"
QUICKSTART_ITEMS = 40
# A CLI run takes ~3 s against a running server; the margin is for a loaded machine.
CLI_TIMEOUT_S = 120
# Task runs reach the database through the server's event pipeline (the task run recorder),
# so they can appear a moment after the flow run that made them has finished.
TASK_RUNS_WAIT_S = 20.0
# Where the artifacts say `assay view` is served (nothing needs to listen there).
VIEW_URL = "http://127.0.0.1:8484"


@dataclass(frozen=True)
class FirstRun:
    """The module's first `assay run`: its store, its JSON summary and the CLI's exit status."""

    store: Path
    summary: dict[str, Any]
    returncode: int


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectAPI]:
    """One server per module; the same PREFECT_HOME for every CLI run, so they share its
    task-result cache as runs on one machine would."""
    with serving_prefect(tmp_path_factory.mktemp("prefect-home")) as api:
        api.env["ASSAY_VIEW_URL"] = VIEW_URL
        yield api


@pytest.fixture(scope="module")
def first_run(prefect_api: PrefectAPI, tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    """`assay run` of the quickstart, made once for the module's tests to inspect and resume."""
    store = tmp_path_factory.mktemp("store")
    done = _assay(prefect_api, "run", SPEC, "--store", str(store))
    # A failed CLI prints no summary; leave the failure to the tests' exit-status assertion.
    summary = json.loads(done.stdout) if done.returncode == 0 else {}
    return FirstRun(store=store, summary=summary, returncode=done.returncode)


def _assay(api: PrefectAPI, *args: str) -> subprocess.CompletedProcess[str]:
    """The `assay` CLI with `--json` against the module's server."""
    return api.assay(*args, "--json", timeout=CLI_TIMEOUT_S)


def _shard_task_runs(api: PrefectAPI, flow_run_id: str) -> list[dict[str, Any]]:
    """The flow run's `shard-*` task runs once they are all COMPLETED (or as they are after the
    wait, for the assertion to report)."""
    deadline = time.monotonic() + TASK_RUNS_WAIT_S
    while True:
        response = prefect_http.post(
            f"{api.url}/task_runs/filter", json={"flow_runs": {"id": {"any_": [flow_run_id]}}}, timeout=10
        )
        response.raise_for_status()
        shards = [run for run in response.json() if run["name"].startswith("shard-")]
        settled = bool(shards) and all(run["state_type"] == "COMPLETED" for run in shards)
        if settled or time.monotonic() > deadline:
            return shards
        time.sleep(0.5)


def _assert_completed_flow_run(api: PrefectAPI, flow_run_id: str) -> list[dict[str, Any]]:
    """Assert the flow run is a COMPLETED run of `assay-run` with completed shard task runs;
    return those task runs."""
    flow_run = prefect_http.get(f"{api.url}/flow_runs/{flow_run_id}", timeout=10)
    assert flow_run.status_code == 200, flow_run.text
    assert flow_run.json()["state"]["type"] == "COMPLETED"
    flow = prefect_http.get(f"{api.url}/flows/{flow_run.json()['flow_id']}", timeout=10)
    assert flow.status_code == 200, flow.text
    assert flow.json()["name"] == "assay-run"

    shards = _shard_task_runs(api, flow_run_id)
    assert shards, "the flow run has no shard-* task runs"
    assert {run["name"]: run["state_type"] for run in shards} == {run["name"]: "COMPLETED" for run in shards}
    return shards


def test_run_is_a_prefect_flow_run(prefect_api: PrefectAPI, first_run: FirstRun) -> None:
    assert first_run.returncode == 0
    assert first_run.summary["status"] == "completed"
    record = Store(first_run.store).read_run(first_run.summary["run_id"])
    assert record["status"] == "completed"
    assert record["prefect_flow_run_id"]

    _assert_completed_flow_run(prefect_api, record["prefect_flow_run_id"])


def test_resume_adds_no_items(prefect_api: PrefectAPI, first_run: FirstRun) -> None:
    assert first_run.returncode == 0, "the run to resume failed"
    run_id = first_run.summary["run_id"]
    store = Store(first_run.store)
    first_flow_run = store.read_run(run_id)["prefect_flow_run_id"]

    done = _assay(prefect_api, "resume", run_id, "--store", str(first_run.store))

    assert done.returncode == 0
    assert json.loads(done.stdout)["status"] == "completed"
    record = store.read_run(run_id)
    assert record["status"] == "completed"
    assert record["prefect_flow_run_id"] not in (None, first_flow_run)
    items = store.run_items(run_id)
    assert items.height == QUICKSTART_ITEMS
    assert items.select("item_id", "trial").n_unique() == QUICKSTART_ITEMS
    # Every shard finished in the first run, so the resumed flow run takes each from the task cache.
    shards = _assert_completed_flow_run(prefect_api, record["prefect_flow_run_id"])
    assert {run["state"]["name"] for run in shards} == {"Cached"}


def test_rescore_and_compare_are_prefect_flow_runs(prefect_api: PrefectAPI, first_run: FirstRun) -> None:
    assert first_run.returncode == 0, "the run to rescore failed"
    run_id = first_run.summary["run_id"]
    rescored = _assay(prefect_api, "rescore", run_id, "--scorer", "token_f1", "--store", str(first_run.store))
    assert rescored.returncode == 0
    rescore_id = json.loads(rescored.stdout)["run_id"]
    record = Store(first_run.store).read_run(rescore_id)
    assert record["kind"] == "rescore" and record["prefect_flow_run_id"]
    flow_run = prefect_http.get(
        f"{prefect_api.url}/flow_runs/{record['prefect_flow_run_id']}", timeout=10
    ).json()
    assert flow_run["state"]["type"] == "COMPLETED"

    # The comparison's options (a pydantic model) travel as a Prefect flow parameter.
    compared = _assay(prefect_api, "compare", run_id, "--candidate", run_id, "--store", str(first_run.store))
    assert compared.returncode == 0, compared.stderr
    assert {row["verdict"] for row in json.loads(compared.stdout)["scorers"]} == {"unchanged"}
    runs = prefect_http.post(
        f"{prefect_api.url}/flow_runs/filter",
        json={"flows": {"name": {"any_": ["assay-compare"]}}},
        timeout=10,
    ).json()
    assert [run["state"]["type"] for run in runs] == ["COMPLETED"]
    assert runs[0]["name"] == f"compare {run_id} → {run_id}"
    artifacts = prefect_http.post(
        f"{prefect_api.url}/artifacts/filter",
        json={"artifacts": {"flow_run_id": {"any_": [runs[0]["id"]]}}},
        timeout=10,
    ).json()
    (markdown,) = [a for a in artifacts if a["type"] == "markdown"]
    assert (
        "unchanged" in markdown["data"]
        and run_id in markdown["data"]
        and "Gates: all passed." in markdown["data"]
    )
    assert f"[Triage it in assay view]({VIEW_URL}/compare?a={run_id}&b={run_id})" in markdown["data"]


def test_flow_runs_are_named_and_publish_artifacts(prefect_api: PrefectAPI, first_run: FirstRun) -> None:
    assert first_run.returncode == 0
    record = Store(first_run.store).read_run(first_run.summary["run_id"])
    flow_run = prefect_http.get(
        f"{prefect_api.url}/flow_runs/{record['prefect_flow_run_id']}", timeout=10
    ).json()
    assert flow_run["name"] == f"quickstart-arithmetic · {first_run.summary['run_id']}"
    artifacts = prefect_http.post(
        f"{prefect_api.url}/artifacts/filter",
        json={"artifacts": {"flow_run_id": {"any_": [record["prefect_flow_run_id"]]}}},
        timeout=10,
    ).json()
    (table,) = [a for a in artifacts if a["type"] == "table"]
    assert table["key"] == "assay-run-quickstart-arithmetic"
    rows = json.loads(table["data"])
    assert {row["scorer"] for row in rows if row["kind"] == "score"} == {
        "exact",
        "numeric",
        "mentions_answer",
        "bare_number",
    }
    (duration,) = [row for row in rows if row["kind"] == "gauge" and row["scorer"] == "gauge.duration_ms"]
    assert duration["scored"] == QUICKSTART_ITEMS and re.fullmatch(r"[\d,.]+ ms", duration["mean"])
    # Written as the terminal writes them (assay.numbers): a percentage, the cost with its completeness.
    assert "item error rate 0.0%; cost " in table["description"], table["description"]
    assert table["description"].endswith(f". [Open it in assay view]({VIEW_URL}/runs/{record['run_id']})")


def test_a_failed_compare_gate_fails_the_flow_run(
    prefect_api: PrefectAPI, first_run: FirstRun, tmp_path: Path
) -> None:
    assert first_run.returncode == 0
    run_id = first_run.summary["run_id"]
    # A rescore with a stricter scorer scores lower than the run's own exact match: a regression.
    worse = _assay(
        prefect_api,
        "rescore",
        run_id,
        "--scorer",
        "{kind: regex, name: exact, pattern: '^$'}",
        "--store",
        str(first_run.store),
    )
    worse_id = json.loads(worse.stdout)["run_id"]
    compared = _assay(
        prefect_api, "compare", run_id, "--candidate", worse_id, "--store", str(first_run.store)
    )
    assert compared.returncode == 1, compared.stderr
    comparison = json.loads(compared.stdout)
    assert comparison["passed"] is False and comparison["scorers"][0]["verdict"] == "regressed"
    runs = prefect_http.post(
        f"{prefect_api.url}/flow_runs/filter",
        json={"flows": {"name": {"any_": ["assay-compare"]}}, "sort": "START_TIME_DESC"},
        timeout=10,
    ).json()
    latest = next(run for run in runs if run["name"] == f"compare {run_id} → {worse_id}")
    assert latest["state"]["type"] == "FAILED" and "regressed" in latest["state"]["message"]


def test_nightly_is_a_flow_run_with_its_runs_and_compare_as_subflows(
    prefect_api: PrefectAPI, tmp_path: Path
) -> None:
    store = tmp_path / "nightly-store"
    first = _assay(prefect_api, "nightly", SPEC, "--store", str(store))
    assert first.returncode == 0, first.stderr
    assert "first night" in json.loads(first.stdout)["specs"][0]["note"]
    second = _assay(prefect_api, "nightly", SPEC, "--store", str(store))
    assert second.returncode == 0, second.stderr
    night = json.loads(second.stdout)["specs"][0]
    assert {row["verdict"] for row in night["comparison"]["scorers"]} == {"unchanged"}

    nightly_runs = prefect_http.post(
        f"{prefect_api.url}/flow_runs/filter",
        json={"flows": {"name": {"any_": ["assay-nightly"]}}},
        timeout=10,
    ).json()
    assert len(nightly_runs) == 2 and {run["state"]["type"] for run in nightly_runs} == {"COMPLETED"}
    latest = max(nightly_runs, key=lambda run: run["start_time"])
    children = prefect_http.post(
        f"{prefect_api.url}/flow_runs/filter",
        json={"flow_runs": {"parent_flow_run_id": {"any_": [latest["id"]]}}},
        timeout=10,
    ).json()
    assert {run["name"].split(" ")[0] for run in children} >= {"quickstart-arithmetic", "compare"}

    # Each night's flow run: named after its date, its artifact each spec's verdict and report.
    first_night = min(nightly_runs, key=lambda run: run["start_time"])
    assert {run["name"] for run in nightly_runs} == {f"nightly-{datetime.now(UTC):%Y-%m-%d}"}
    page = _nightly_artifact(prefect_api, first_night["id"])
    assert "no baseline yet: this night becomes it" in page, page
    page = _nightly_artifact(prefect_api, latest["id"])
    assert page.startswith(f"# {latest['name']}: passed"), page
    report = store / "reports" / f"{night['run_id']}.html"
    assert report.is_file() and f"[report]({report.as_uri()})" in page, page
    assert "passed: " in page and f"`{night['baseline']}`" in page, page


def _nightly_artifact(api: PrefectAPI, flow_run_id: str) -> str:
    """The markdown a nightly flow run published."""
    found = prefect_http.post(
        f"{api.url}/artifacts/filter",
        json={"artifacts": {"flow_run_id": {"any_": [flow_run_id]}, "key": {"any_": ["assay-nightly"]}}},
        timeout=10,
    ).json()
    assert len(found) == 1, found
    return str(found[0]["data"])


def test_a_failed_night_names_its_regression_first_then_its_gates(
    prefect_api: PrefectAPI, tmp_path: Path, mock: Any
) -> None:
    from tests.conftest import openai_spec

    spec, store = openai_spec(tmp_path, mock.base_url, n=30), tmp_path / "store"
    assert _assay(prefect_api, "nightly", str(spec), "--store", str(store)).returncode == 0
    # Tonight no answer has digits, and two items fail: 6.7 %, over the run's 5 % gate.
    mock.configure(
        answers={"*": "no idea"},
        faults=[{"status": 400, "times": -1, "match": f"What is {i} + {i}?"} for i in (3, 5)],
    )
    done = _assay(prefect_api, "nightly", str(spec), "--store", str(store))
    assert done.returncode == 1, done.stderr[-2000:]
    night = json.loads(done.stdout)["specs"][0]
    nightly = max(
        prefect_http.post(
            f"{prefect_api.url}/flow_runs/filter",
            json={"flows": {"name": {"any_": ["assay-nightly"]}}},
            timeout=10,
        ).json(),
        key=lambda r: r["start_time"],
    )
    state = nightly["state"]
    assert state["type"] == "FAILED", state
    regression, gate = state["message"].split("; ")
    assert regression.startswith(f"arith {night['run_id']}: candidate ") and regression.endswith(" regressed")
    assert gate.startswith(f"arith {night['run_id']}: item error rate 6.7% (2 failed of 30 attempted)"), gate
    page = _nightly_artifact(prefect_api, nightly["id"])
    assert page.startswith(
        f"# {nightly['name']}: FAILED\n\nWhy it failed (regressions first, then gates):\n\n"
    ), page
    assert page.index(regression) < page.index(gate) and "| failed_gate | FAILED: " in page, page


def test_a_container_run_is_a_flow_run_with_shards_of_sandboxed_attempts(
    prefect_api: PrefectAPI, tmp_path: Path
) -> None:
    from assay.sandbox.hygiene import leftovers
    from tests.conftest import write_jsonl, write_spec
    from tests.helpers.sandbox_images import busybox_image

    write_jsonl(tmp_path / "data.jsonl", [{"id": f"c{n}", "input": str(n)} for n in range(6)])
    spec = write_spec(
        tmp_path,
        name="sandboxed-under-prefect",
        dataset={"path": "data.jsonl", "id": "id"},
        target={
            "kind": "container",
            "image": busybox_image(),
            "command": ["sh", "-c", "cat $ASSAY_PROMPT_FILE"],
        },
        scorers=[{"kind": "code_exec", "checks": ["test -d /workspace"]}],
        concurrency=3,
    )
    store = tmp_path / "store"
    done = _assay(prefect_api, "run", str(spec), "--store", str(store))
    assert done.returncode == 0
    run_id = json.loads(done.stdout)["run_id"]
    record = Store(store).read_run(run_id)
    _assert_completed_flow_run(prefect_api, record["prefect_flow_run_id"])
    items = Store(store).run_items(run_id).sort("item_id")
    assert items["outcome"].to_list() == ["completed"] * 6
    assert items["output_text"].to_list() == [str(n) for n in range(6)]
    assert Store(store).run_scores(run_id)["score"].to_list() == [1.0] * 6
    assert leftovers(run_id) == []


def test_a_flow_run_that_lost_its_lease_fails_without_retrying_its_shards(
    prefect_api: PrefectAPI, tmp_path: Path
) -> None:
    """Paused with a batch about to be committed, the flow run's lease is taken by another host
    meanwhile: on waking, the shard finds the lease lost, is not retried, and the flow run fails
    saying so (exit 3); the run's record is left to the new holder."""
    import psutil

    from assay._files import put_if_absent
    from tests.conftest import paced_spec, wait_for

    spec = paced_spec(tmp_path, 300)
    store = tmp_path / "store"
    env = {**prefect_api.env, "ASSAY_LEASE_TTL_S": "600", "ASSAY_TEST_AT": "stop-before-commit"}
    holder = subprocess.Popen(
        # `-m` from the repo root: the spec's target lives in the tests package.
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--quiet"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stopped = lambda: psutil.Process(holder.pid).status() == psutil.STATUS_STOPPED
        wait_for(stopped, "paused before its first commit", holder, timeout=CLI_TIMEOUT_S)
        (partition,) = (store / "runs").glob("run_id=*")
        run_id = partition.name.removeprefix("run_id=")
        leases = store / "leases" / f"run_id={run_id}"
        number = max(int(path.stem) for path in leases.glob("*.json") if path.stem.isdigit()) + 1
        theirs = {"host": "elsewhere", "pid": 1, "token": "theirs", "renewed": time.time(), "ttl": 600}
        assert put_if_absent(leases / f"{number:012d}.json", json.dumps(theirs).encode())
    finally:
        holder.send_signal(subprocess.signal.SIGCONT)
    _, stderr = holder.communicate(timeout=CLI_TIMEOUT_S)

    assert holder.returncode == 3, stderr
    assert f"lost the lease on run {run_id}" in stderr and "elsewhere:1 took the run over" in stderr
    record = Store(store).read_run(run_id)
    assert record["status"] == "running", "the record is the new holder's to write"
    flow_run = prefect_http.get(
        f"{prefect_api.url}/flow_runs/{record['prefect_flow_run_id']}", timeout=10
    ).json()
    assert flow_run["state"]["type"] in ("FAILED", "CRASHED")
    task_runs = prefect_http.post(
        f"{prefect_api.url}/task_runs/filter",
        json={"flow_runs": {"id": {"any_": [record["prefect_flow_run_id"]]}}},
        timeout=10,
    ).json()
    shards = [run for run in task_runs if run["name"].startswith("shard-")]
    assert shards and all(run["run_count"] <= 1 for run in shards), [
        (run["name"], run["run_count"], run["state_type"]) for run in shards
    ]
