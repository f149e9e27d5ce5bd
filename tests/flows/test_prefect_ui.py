"""`assay ui` for real: a Prefect server on loopback, every deployment, a worker; a run triggered
through the API completes and lands in the store; Ctrl-C stops everything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import psutil
import pytest

from assay.store import Store
from tests.conftest import REPO, paced_spec, wait_for
from tests.helpers.prefect_server import _free_port, prefect_env, prefect_http

pytestmark = [pytest.mark.prefect]

ASSAY = str(Path(sys.executable).with_name("assay"))
PREFECT = str(Path(sys.executable).with_name("prefect"))


def _prefect(api: str, env: dict[str, str], *args: str) -> str:
    """A `prefect` command against the server; its output."""
    done = subprocess.run(
        [PREFECT, *args],
        env={**env, "PREFECT_API_URL": api},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _final_state(api: str, flow_run_id: str, ends: tuple[str, ...]) -> dict:
    """The flow run's state once its type is one of `ends` (or as it is after two minutes)."""
    deadline = time.monotonic() + 120
    while True:
        state = prefect_http.get(f"{api}/flow_runs/{flow_run_id}", timeout=10).json()["state"]
        if state["type"] in ends or time.monotonic() > deadline:
            return state
        time.sleep(1)


def _start(api: str, env: dict[str, str], deployment: str, params: dict) -> str:
    """Start a run of a deployment through the API with `params` as its one parameter, the
    flow's request (as the UI's form sends it); its flow run's id."""
    out = _prefect(api, env, "deployment", "run", deployment, "--params", json.dumps({"request": params}))
    return next(line.split()[-1] for line in out.splitlines() if "UUID" in line)


def _trigger(api: str, env: dict[str, str], tmp_path: Path):
    """A function that runs a deployment through the API and waits for the flow run's final state."""

    def trigger(deployment: str, params: dict) -> tuple[str, dict]:
        flow_run_id = _start(api, env, deployment, params)
        state = _final_state(api, flow_run_id, ("COMPLETED", "FAILED", "CRASHED"))
        assert state["type"] in ("COMPLETED", "FAILED"), (
            tmp_path / "logs" / "prefect-worker.log"
        ).read_text()[-3000:]
        return flow_run_id, state

    return trigger


def _committed(store: Path, flow_run_id: str) -> dict | None:
    """The record of the flow run's Assay run once it has committed items; None before."""
    runs = [r for r in Store(store).runs().collect().to_dicts() if r["prefect_flow_run_id"] == flow_run_id]
    return runs[0] if runs and Store(store).run_items(runs[0]["run_id"]).height else None


def _logs(api: str, flow_run_id: str, last: str) -> list[str]:
    """The flow run's own log messages (not its task runs'), once one starts with `last` (they
    arrive in batches)."""
    deadline = time.monotonic() + 30
    while True:
        response = prefect_http.post(
            f"{api}/logs/filter", json={"logs": {"flow_run_id": {"any_": [flow_run_id]}}}, timeout=10
        )
        messages = [log["message"] for log in response.json() if log["task_run_id"] is None]
        if any(m.startswith(last) for m in messages) or time.monotonic() > deadline:
            return messages
        time.sleep(0.5)


# Boot, deploy, four flow runs through a worker polling every few seconds: minutes on a loaded machine.
@pytest.mark.timeout(900)
def test_assay_ui_serves_deploys_and_runs(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = prefect_env(tmp_path / "home")
    # As a user runs it: the UI served, logs shipped to the API at Prefect's own level.
    for name in ("PREFECT_SERVER_UI_ENABLED", "PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_TO_API_ENABLED"):
        env.pop(name)
    store = tmp_path / "store"
    env["ASSAY_TEST_DELAY_S"] = "0.5"  # the paced run's items (tests/helpers/commit_signals.py)
    ui = subprocess.Popen(
        [
            ASSAY,
            "ui",
            "--port",
            str(port),
            "--home",
            str(tmp_path / "home"),
            "--logs",
            str(tmp_path / "logs"),
            "--store",
            str(store),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # "starting" at once, then progress while it boots, then "ready".
        lines = [ui.stdout.readline() for _ in range(3)]
        why = (lines, ui.stderr.read() if ui.poll() is not None else "")
        assert lines[0].startswith(f"starting: a Prefect server on 127.0.0.1:{port}"), why
        assert lines[1].startswith("server answers; deploying"), why
        line = lines[2]
        assert line.startswith("ready:"), (line, ui.stderr.read() if ui.poll() is not None else "")
        # Where it writes, said as it starts: the runs' store and Prefect's state.
        deployed, said = [ui.stdout.readline() for _ in range(2)]
        # A new Prefect home: every deployment of prefect.yaml is new (tests/flows/test_ui_deployments.py
        # restarts with edits).
        assert (
            deployed == "deployments: deployed assay-run, assay-rescore, assay-compare, assay-nightly (new)\n"
        )
        assert said.startswith(
            f"store: {store} (runs that name no store) · Prefect state: {tmp_path / 'home'}"
        ), said
        deployments = prefect_http.post(f"{api}/deployments/filter", json={}, timeout=10).json()
        assert {d["name"] for d in deployments} == {
            "assay-run",
            "assay-rescore",
            "assay-compare",
            "assay-nightly",
        }
        nightly = next(d for d in deployments if d["name"] == "assay-nightly")
        assert nightly["schedules"][0]["schedule"]["cron"] == "0 2 * * *"
        # The UI renders parameters as forms: each flow's one parameter, its request model, and
        # every field of that model carry a description.
        for deployment in deployments:
            schema = deployment["parameter_openapi_schema"]
            assert list(schema["properties"]) == ["request"], deployment["name"]
            assert schema["properties"]["request"].get("description"), deployment["name"]
            model = schema["properties"]["request"]["$ref"].rsplit("/", 1)[1]
            fields = schema["definitions"][model]["properties"]
            assert fields and all(f.get("description") for f in fields.values()), deployment["name"]
        options = nightly["parameter_openapi_schema"]["definitions"]["CompareOptions"]["properties"]
        assert all(field.get("description") for field in options.values())

        trigger = _trigger(api, env, tmp_path)
        # No store parameter: the run goes to the store `assay ui` named, not the checkout's folder.
        flow_run_id, state = trigger(
            "assay-run/assay-run", {"spec": str(REPO / "examples/quickstart/spec.yaml")}
        )
        assert state["type"] == "COMPLETED"
        (run,) = Store(store).runs().collect().to_dicts()
        assert run["prefect_flow_run_id"] == flow_run_id and run["n_completed"] == 40
        # The Logs tab of a deployment's run: the run, its progress, its summary.
        logs = _logs(api, flow_run_id, "cost ")
        assert (
            f"run {run['run_id']} of quickstart-arithmetic: 40 of 40 items to run · store {store}" in logs
        ), logs
        assert "progress: 40 of 40 items (100.0%) · 0 failed" in "\n".join(logs), logs
        assert f"quickstart-arithmetic run {run['run_id']}: completed" in logs, logs

        # A rescore with a scorer that fails almost everything, then compare: the gate fails the flow run.
        _, state = trigger(
            "assay-rescore/assay-rescore",
            {
                "source_run_id": run["run_id"],
                "scorers": ["{kind: regex, name: exact, pattern: '^$'}"],
                "store": str(store),
            },
        )
        assert state["type"] == "COMPLETED"
        worse = Store(store).runs().filter(pl.col("kind") == "rescore").collect()["run_id"][0]
        _, state = trigger(
            "assay-compare/assay-compare",
            {"baseline": [run["run_id"]], "candidate": [worse], "store": str(store)},
        )
        assert state["type"] == "FAILED" and "regressed" in state["message"]
        assert list((store / "comparisons").glob("comparison_id=*/comparison.parquet"))

        # A run cancelled from the UI once it has committed items: cancelled in Prefect and in the
        # store, and the flow run's last line says so with the resume hint (never "Running()").
        (tmp_path / "paced").mkdir()
        spec = paced_spec(tmp_path / "paced", 400)  # 0.5 s an item, 4 at a time: ~50 s
        flow_run_id = _start(api, env, "assay-run/assay-run", {"spec": str(spec)})
        wait_for(lambda: _committed(store, flow_run_id), "the paced run committed items", timeout=120)
        paced = _committed(store, flow_run_id)
        # As the UI's Cancel button does (the `prefect` CLI takes seconds to start on a loaded machine).
        cancel = prefect_http.post(
            f"{api}/flow_runs/{flow_run_id}/set_state",
            json={"state": {"type": "CANCELLING", "name": "Cancelling"}},
            timeout=10,
        )
        assert cancel.json()["status"] == "ACCEPT", cancel.text
        state = _final_state(api, flow_run_id, ("CANCELLED", "COMPLETED", "FAILED", "CRASHED"))
        assert state["type"] == "CANCELLED", state
        logs = _logs(api, flow_run_id, "Finished in state")
        assert not [m for m in logs if "Finished in state Running()" in m], logs
        (ended,) = [m for m in logs if m.startswith("Finished in state")]
        assert ended.startswith(
            f"Finished in state Cancelled('cancelled: finished items are stored; `assay resume {paced['run_id']}` continues"
        ), ended
        assert Store(store).read_run(paced["run_id"])["status"] == "cancelled"
    finally:
        children = psutil.Process(ui.pid).children(recursive=True) if ui.poll() is None else []
        ui.send_signal(signal.SIGINT)
        ui.wait(timeout=60)
    assert ui.returncode == 0
    time.sleep(1)
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], "all stopped"
    assert os.path.exists(tmp_path / "logs" / "prefect-server.log")
