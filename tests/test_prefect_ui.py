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

import httpx
import polars as pl
import psutil
import pytest

from assay.store import Store
from tests.conftest import REPO
from tests.prefect_server import _free_port, prefect_env

pytestmark = [pytest.mark.prefect]

ASSAY = str(Path(sys.executable).with_name("assay"))
PREFECT = str(Path(sys.executable).with_name("prefect"))


def _trigger(api: str, env: dict[str, str], tmp_path: Path):
    """A function that runs a deployment through the API and waits for the flow run's final state."""

    def trigger(deployment: str, params: dict) -> tuple[str, dict]:
        done = subprocess.run(
            [PREFECT, "deployment", "run", deployment, "--params", json.dumps(params)],
            env={**env, "PREFECT_API_URL": api},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        flow_run_id = next(line.split()[-1] for line in done.stdout.splitlines() if "UUID" in line)
        deadline = time.monotonic() + 120
        while True:
            state = httpx.get(f"{api}/flow_runs/{flow_run_id}", timeout=10).json()["state"]
            if state["type"] in ("COMPLETED", "FAILED", "CRASHED") or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert state["type"] in ("COMPLETED", "FAILED"), (
            tmp_path / "logs" / "prefect-worker.log"
        ).read_text()[-3000:]
        return flow_run_id, state

    return trigger


def test_assay_ui_serves_deploys_and_runs(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = prefect_env(tmp_path / "home")
    env.pop("PREFECT_SERVER_UI_ENABLED")  # the real command serves the UI
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
        deployments = httpx.post(f"{api}/deployments/filter", json={}, timeout=10).json()
        assert {d["name"] for d in deployments} == {
            "assay-run",
            "assay-rescore",
            "assay-compare",
            "assay-nightly",
        }
        nightly = next(d for d in deployments if d["name"] == "assay-nightly")
        assert nightly["schedules"][0]["schedule"]["cron"] == "0 2 * * *"
        # The UI renders parameters as forms: every one carries a description.
        for deployment in deployments:
            schema = deployment["parameter_openapi_schema"]
            assert all(p.get("description") for p in schema["properties"].values()), deployment["name"]
        options = nightly["parameter_openapi_schema"]["definitions"]["CompareOptions"]["properties"]
        assert all(field.get("description") for field in options.values())

        store = tmp_path / "store"
        trigger = _trigger(api, env, tmp_path)
        flow_run_id, state = trigger(
            "assay-run/assay-run", {"spec": str(REPO / "examples/quickstart/spec.yaml"), "store": str(store)}
        )
        assert state["type"] == "COMPLETED"
        (run,) = Store(store).runs().collect().to_dicts()
        assert run["prefect_flow_run_id"] == flow_run_id and run["n_completed"] == 40

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
    finally:
        children = psutil.Process(ui.pid).children(recursive=True) if ui.poll() is None else []
        ui.send_signal(signal.SIGINT)
        ui.wait(timeout=60)
    assert ui.returncode == 0
    time.sleep(1)
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], "all stopped"
    assert os.path.exists(tmp_path / "logs" / "prefect-server.log")
