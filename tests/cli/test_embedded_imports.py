"""The embedded path (no Prefect API configured) never imports Prefect; a configured API still
makes a run orchestrated. Each case is a fresh interpreter, so nothing imported by another test
can hide an import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import REPO, openai_spec
from tests.helpers.shadowing import N_ITEMS, shadowing_spec

pytestmark = [pytest.mark.slow]  # subprocesses, signals, leases: seconds each

# Runs the CLI's `main` in this interpreter, then reports what it imported.
_PROBE = """
import json, sys
from assay.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m == "prefect" or m.startswith("prefect."))
scipy = sorted(m for m in sys.modules if m == "scipy" or m.startswith("scipy."))
# Dask is imported only to share rate controllers through a scheduler (ASSAY_RATE_SHARE).
dask = sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed"))
# huggingface_hub is imported only for a spec that names a Hugging Face dataset (`dataset.hf`).
hub = sorted(m for m in sys.modules if m.split(".")[0] == "huggingface_hub")
print(json.dumps({"code": code, "prefect": loaded[:5], "scipy": scipy[:5], "dask": dask[:5], "hub": hub[:5]}))
"""


def _probe(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(  # noqa: PLW1510 - the exit status is the assertion
        [sys.executable, "-c", _PROBE, *argv],
        cwd=cwd,
        env={**_clean_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _clean_env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") or k == "PREFECT_HOME"}
    env["PYTHONPATH"] = str(REPO)
    return env


def test_run_and_resume_embedded_import_no_prefect(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    store = tmp_path / "store"
    ran = _probe("run", str(spec), "--store", str(store), "--quiet", cwd=tmp_path)
    assert ran == {"code": 0, "prefect": [], "scipy": [], "dask": [], "hub": []}
    run_id = next((store / "runs").iterdir()).name.removeprefix("run_id=")
    resumed = _probe("resume", run_id, "--store", str(store), "--quiet", cwd=tmp_path)
    assert resumed == {"code": 0, "prefect": [], "scipy": [], "dask": [], "hub": []}


def test_the_reading_commands_import_neither_prefect_nor_scipy(tmp_path, mock):
    """`ls`, `show`, `compare`, `power` and `estimate` start fast: Prefect and SciPy cost seconds of
    imports (benchmarks/cli_startup.py measures the whole processes)."""
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    store = str(tmp_path / "store")
    for _ in range(2):
        assert _probe("run", str(spec), "--store", store, "--quiet", cwd=tmp_path)["code"] == 0
    first, second = sorted(p.name.removeprefix("run_id=") for p in (tmp_path / "store" / "runs").iterdir())
    for argv in (
        ["ls"],
        ["show", first],
        ["compare", first, "--candidate", second],
        ["power", first, "--mde", "0.05"],
        ["estimate", str(spec)],
    ):
        assert _probe(*argv, "--store", store, cwd=tmp_path) == {
            "code": 0,
            "prefect": [],
            "scipy": [],
            "dask": [],
            "hub": [],
        }, argv


def test_rescore_embedded_imports_no_prefect(tmp_path, mock):
    # A rescore drives the same skeleton as a run (assay/orchestrate/): embedded, no Prefect either.
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    store = tmp_path / "store"
    assert _probe("run", str(spec), "--store", str(store), "--quiet", cwd=tmp_path)["code"] == 0
    run_id = next((store / "runs").iterdir()).name.removeprefix("run_id=")
    rescored = _probe(
        "rescore", run_id, "--scorer", "includes", "--store", str(store), "--quiet", cwd=tmp_path
    )
    assert rescored == {"code": 0, "prefect": [], "scipy": [], "dask": [], "hub": []}
    assert len(list((store / "runs").iterdir())) == 2


def test_nightly_embedded_imports_no_prefect(tmp_path, mock):
    """`assay nightly` without an API runs its plain driver (assay/orchestrate/nightly.py): two
    nights, the second compared with the first, and Prefect never imported."""
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    store = str(tmp_path / "store")
    for _ in range(2):
        night = _probe("nightly", str(spec), "--store", store, "--quiet", cwd=tmp_path)
        assert night == {"code": 0, "prefect": [], "scipy": [], "dask": [], "hub": []}
    assert len(list((tmp_path / "store" / "runs").iterdir())) == 2
    assert len(list((tmp_path / "store" / "comparisons").iterdir())) == 1


def test_an_api_url_in_the_active_profile_still_orchestrates(tmp_path):
    # The profile points at a port nobody listens on: the CLI asks Prefect, which finds the URL,
    # and the health check refuses to run (exit 2) — proof the run would have been orchestrated.
    home = tmp_path / "prefect-home"
    home.mkdir()
    (home / "profiles.toml").write_text(
        'active = "remote"\n[profiles.remote]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
    )
    spec = openai_spec(tmp_path, "http://127.0.0.1:9/v1", n=1)
    done = subprocess.run(  # noqa: PLW1510 - the exit status is the assertion
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(tmp_path / "store")],
        cwd=tmp_path,
        env={**_clean_env(), "PREFECT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "the Prefect API at http://127.0.0.1:9/api does not answer" in done.stderr
    assert not (tmp_path / "store").exists()


def _probe_run(tmp_path: Path, probe: str, *argv: str) -> dict[str, Any]:
    """Run a probe script (`python -c probe argv...`) in a clean environment; its JSON report, the
    last line it prints."""
    done = subprocess.run(  # noqa: PLW1510 - the exit status is the assertion
        [sys.executable, "-c", probe, *argv],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Records what was imported when the run opened its target (planning done, no call made yet).
_PLANNED_PROBE = """
import json, sys
import assay.orchestrate.run as driver
from assay.cli import main
seen = {}
opened = driver.open_plan_target
def open_plan_target(*args, **kwargs):
    seen.update({m: m in sys.modules for m in sys.argv[1].split(",")})
    return opened(*args, **kwargs)
driver.open_plan_target = open_plan_target
code = main(sys.argv[2:])
everything = {m for m in sys.modules}
print(json.dumps({"code": code, "at_open": seen, "http_agent": sorted(m for m in everything if "http_agent" in m)}))
"""


def test_an_openai_run_plans_without_polars_and_never_loads_other_target_kinds(tmp_path, mock):
    """`assay run` of an `openai` target plans without Polars (it loads in the background while
    the last calls wait, for the summary at the end) and never imports the modules of target
    kinds it does not use, nor the sequential monitor of `compare_to` runs."""
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    watched = "polars,httpx,assay.analysis.monitor,assay.run.rescore,assay.targets.container.target"
    report = _probe_run(
        tmp_path, _PLANNED_PROBE, watched, "run", str(spec), "--store", str(tmp_path / "s"), "--quiet"
    )
    assert report["code"] == 0
    assert report["at_open"] == dict.fromkeys(watched.split(","), False)
    assert report["http_agent"] == []


# Records how many items had finished each time the run started loading a module for its closing.
_WARM_UP_PROBE = """
import json, sys
import assay.orchestrate.run as driver
from assay.run import progress
from assay.cli import main
finished, warmed = [0], []
installed = progress.current
class Counting:
    def __init__(self, inner):
        self.inner = inner
    def started(self, total, already_done):
        self.inner.started(total, already_done)
    def item_done(self, outcome, cost_usd=None, cached=False):
        finished[0] += 1
        self.inner.item_done(outcome, cost_usd, cached)
    def batches(self, label, counts):
        self.inner.batches(label, counts)
progress.current = lambda: Counting(installed())
loading = driver.warm_up
def warm_up(*names):
    warmed.append([finished[0], *names])
    return loading(*names)
driver.warm_up = warm_up
code = main(sys.argv[1:])
print(json.dumps({"code": code, "warmed": warmed, "finished": finished[0]}))
"""


def test_polars_loads_for_the_closing_once_only_the_last_items_in_flight_are_left(tmp_path, mock):
    """Polars (~0.25 s of imports holding the GIL) loads while the last items wait on the target,
    not at the start, where it took that time from the loop running items."""
    spec = openai_spec(tmp_path, mock.base_url, n=30)  # 4 at a time
    report = _probe_run(tmp_path, _WARM_UP_PROBE, "run", str(spec), "--store", str(tmp_path / "s"), "--quiet")
    assert report == {"code": 0, "warmed": [[26, "polars"]], "finished": 30}


def test_a_users_tasks_flows_and_evaluators_modules_beside_the_spec_shadow_nothing(tmp_path):
    """The user's `tasks:solve` and `evaluators:graded` are theirs, and Assay's own flows, tasks and
    evaluators (installed under `assay.`) stay Assay's — embedded, in a fresh interpreter."""
    spec = shadowing_spec(tmp_path)
    store = tmp_path / "store"
    ran = _probe("run", str(spec), "--store", str(store), "--json", cwd=tmp_path)
    assert ran["code"] == 0
    scores = pl.read_parquet(store / "scores" / "**" / "*.parquet").filter(pl.col("kind") == "score")
    assert scores["score"].to_list() == [1.0] * N_ITEMS
