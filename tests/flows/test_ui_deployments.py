"""`assay ui`'s deploy step against a real Prefect server: a deployment edited through the API (as
the UI edits the nightly's parameters and schedule) keeps its edits when `assay ui` starts again;
one whose prefect.yaml entry changed is deployed again, and one deleted on the server is deployed
anew. The checkout is a copy of prefect.yaml beside the repository's flows/ and tasks/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.flows.deployments import RECORD
from assay.flows.ui import deploy_changed
from tests.conftest import REPO
from tests.helpers.prefect_server import PrefectAPI, prefect_http, serving_prefect

pytestmark = [pytest.mark.prefect]

ALL = ["assay-run", "assay-rescore", "assay-compare", "assay-nightly"]


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / "prefect.yaml").write_text((REPO / "prefect.yaml").read_text())
    for name in ("flows", "tasks"):
        os.symlink(REPO / name, folder / name)
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def api(tmp_path: Path) -> Iterator[PrefectAPI]:
    with serving_prefect(tmp_path / "home") as api:
        yield api


def _deployment(api: PrefectAPI, name: str) -> dict[str, Any]:
    (found,) = [
        d for d in prefect_http.post(f"{api.url}/deployments/filter", json={}).json() if d["name"] == name
    ]
    return found


# Three `prefect deploy`s, each importing the flows: a minute or more on a loaded machine.
@pytest.mark.timeout(600)
def test_ui_edits_survive_a_restart_and_a_changed_entry_is_deployed_again(
    api: PrefectAPI, checkout: Path
) -> None:
    first = deploy_changed(api.url, api.env, api.home)
    assert (first.new, first.changed, first.kept) == (ALL, [], [])
    assert first.line() == f"deployments: deployed {', '.join(ALL)} (new)"
    assert (api.home / RECORD).is_file()

    # The UI's edits of the nightly: its specs and retention, and its schedule.
    nightly = _deployment(api, "assay-nightly")
    edited = {"request": {"specs": ["my/own.yaml"], "retention": 7}}
    assert (
        prefect_http.patch(f"{api.url}/deployments/{nightly['id']}", json={"parameters": edited}).status_code
        == 204
    )
    (schedule,) = nightly["schedules"]
    assert (
        prefect_http.patch(
            f"{api.url}/deployments/{nightly['id']}/schedules/{schedule['id']}",
            json={"schedule": {"cron": "30 4 * * *", "timezone": "UTC"}},
        ).status_code
        == 204
    )

    again = deploy_changed(api.url, api.env, api.home)  # `assay ui` started again
    assert (again.new, again.changed, again.kept) == ([], [], ALL)
    assert again.line().startswith(f"deployments: kept {', '.join(ALL)} as on the server (kept your edits")
    nightly = _deployment(api, "assay-nightly")
    assert nightly["parameters"] == edited
    assert nightly["schedules"][0]["schedule"]["cron"] == "30 4 * * *"

    # prefect.yaml's nightly entry changes; the run deployment is deleted on the server.
    document = yaml.safe_load((checkout / "prefect.yaml").read_text())
    (entry,) = [d for d in document["deployments"] if d["name"] == "assay-nightly"]
    entry["parameters"]["request"]["retention"] = 10
    (checkout / "prefect.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    run = _deployment(api, "assay-run")
    assert prefect_http.delete(f"{api.url}/deployments/{run['id']}").status_code == 204

    third = deploy_changed(api.url, api.env, api.home)
    assert (third.new, third.changed, third.kept) == (
        ["assay-run"],
        ["assay-nightly"],
        ["assay-rescore", "assay-compare"],
    )
    assert third.line() == (
        "deployments: deployed assay-run (new) · deployed assay-nightly (changed in prefect.yaml) · "
        "kept assay-rescore, assay-compare as on the server (kept your edits of their parameters and "
        "schedules in the UI; edit their prefect.yaml entries to replace them)"
    )
    nightly = _deployment(api, "assay-nightly")
    assert nightly["parameters"] == {"request": {"specs": ["examples/quickstart/spec.yaml"], "retention": 10}}
    assert nightly["schedules"][0]["schedule"]["cron"] == "0 2 * * *"
    assert _deployment(api, "assay-run")["entrypoint"] == "flows/run.py:run_eval"
