"""Artifacts on an `s3://` store, against a real S3 API server (moto) on 127.0.0.1: an http_agent
run keeps its files and trajectories in the bucket (uploaded before their rows are committed), a
rescore reads the trajectories back, the report links them as s3 URLs, a resumed run's ledger of
harness run ids comes from the bucket, and deleting a run (what nightly retention does) removes
them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from assay.cli import main
from assay.store import Store
from assay.testing._background import BackgroundServer
from assay.testing.harness import HarnessServer
from tests.conftest import write_jsonl, write_spec
from tests.evaluators.test_remote_scorer import Evaluator
from tests.helpers.cli import assay_json, assay_process_json


@pytest.fixture
def harness() -> Iterator[HarnessServer]:
    with HarnessServer() as server:
        yield server


@pytest.fixture
def evaluator() -> Iterator[BackgroundServer[Evaluator]]:
    with BackgroundServer(Evaluator(), name="evaluator") as server:
        yield server


def test_an_http_agent_run_keeps_its_artifacts_in_the_bucket(
    s3, request, tmp_path, harness, evaluator, capsys
):
    url = s3.url(request.node.name)
    evaluator.app.reply = lambda body: [
        {"name": "steps", "score": min(1.0, len(body["trajectory"] or []) / 2)}
    ]
    harness.configure(
        behaviors={"*": {"artifacts": [{"path": "out/a.txt"}], "files": {"out/a.txt": "made"}, "steps": 2}}
    )
    write_jsonl(tmp_path / "d.jsonl", [{"id": "q/0", "input": "one"}, {"id": "q1", "input": "two"}])
    judge = {"kind": "remote", "name": "judge", "url": f"http://127.0.0.1:{evaluator.port}/evaluate"}
    spec = write_spec(
        tmp_path,
        name="agent-s3",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[judge],
        trials=2,
    )
    run_id = assay_json(capsys, "run", str(spec), "--store", url)["run_id"]
    store = Store(url)
    items = store.run_items(run_id).sort("item_id", "trial")
    assert items["outcome"].to_list() == ["completed"] * 4
    listed = set()
    for row in items.iter_rows(named=True):
        hid = json.loads(row["caller_metadata"])["harness_run_id"]
        item = row["item_id"].replace("/", "%2F")
        prefix = f"run_id={run_id}/{item}/{row['trial']}/{hid}"
        assert row["artifacts"] == [f"{prefix}/files/out/a.txt", f"{prefix}/trajectory.json"]
        assert store.location.read(f"artifacts/{prefix}/files/out/a.txt") == b"made"
        assert len(json.loads(store.read_artifact(f"{prefix}/trajectory.json"))["steps"]) == 2
        listed.update(row["artifacts"])
    # The bucket holds exactly the files the rows name, and the ledger of harness run ids (one
    # piece per writing process); the spool keeps nothing once its batches are committed.
    kept = set(store.location.keys(f"artifacts/run_id={run_id}"))
    files = {k for k in kept if "/@" not in k}
    assert files == {f"artifacts/{p}" for p in listed}
    (ledger,) = kept - files
    ledger_lines = store.location.read(ledger).decode().splitlines()
    assert {json.loads(line)["id"] for line in ledger_lines} == {
        json.loads(m)["harness_run_id"] for m in items["caller_metadata"]
    }
    assert not list((store.artifacts_root / f"run_id={run_id}").glob("*/*"))

    # A rescore never calls the agent: its scorer gets the trajectories kept in the bucket.
    evaluator.app.bodies.clear()
    scorer = f"{{kind: remote, name: again, url: 'http://127.0.0.1:{evaluator.port}/evaluate'}}"
    rescore = assay_json(capsys, "rescore", run_id, "--scorer", scorer, "--store", url)
    assert len(evaluator.app.bodies) == 4 and all(len(b["trajectory"]) == 2 for b in evaluator.app.bodies)
    assert store.run_scores(rescore["run_id"])["score"].to_list() == [1.0] * 4

    # The report links the kept files where they are: relative inside the bucket, by URL outside.
    assert assay_json(capsys, "report", run_id, "--store", url)["path"] == f"{url}/reports/{run_id}.html"
    page = tmp_path / "report.html"
    assay_json(capsys, "report", run_id, "--store", url, "--out", str(page))
    assert f'"artifacts":"{url}/artifacts"}}' in page.read_text()

    # Deleting the run (nightly retention) removes its artifacts; the rescore's run keeps nothing.
    store.delete_run(run_id)
    assert store.location.keys(f"artifacts/run_id={run_id}") == []


def test_a_reexecuted_item_replaces_its_files_and_a_resume_reads_the_ledger(
    s3, request, tmp_path, harness, capsys
):
    """What an earlier execution uploaded and no row names is removed when the item runs again:
    the item folder's prefix holds one set, the committed row's. The harness run ids other processes
    recorded come from the bucket, so a reused id is caught across processes."""
    url = s3.url(request.node.name)
    store = Store(url)
    write_jsonl(tmp_path / "d.jsonl", [{"id": "q0", "input": "one"}, {"id": "q1", "input": "two"}])
    spec = write_spec(
        tmp_path,
        name="agent-s3-resume",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[{"kind": "includes", "name": "echo", "value": "o"}],
        fail_on_item_error_rate=1,
    )
    harness.configure(behaviors={"*": {"status": "failed", "error": "not yet"}})
    main(["run", str(spec), "--store", url, "--json"])
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert set(store.run_items(run_id)["outcome"]) == {"failed"}
    # A killed execution of q0 left a file no row names; another process recorded the id "old".
    store.location.write(f"artifacts/run_id={run_id}/q0/0/stale/files/x.txt", b"half")
    line = json.dumps({"id": "old", "item_id": "gone", "trial": 0}) + "\n"
    store.location.write(f"artifacts/run_id={run_id}/@harness-runs.jsonl/another-process", line.encode())

    harness.configure(
        behaviors={
            "*": {"artifacts": [{"path": "a.txt"}], "files": {"a.txt": "new"}},
            "q1": {"run_id": "old"},
        }
    )
    main(["resume", run_id, "--retry-failed", "--store", url, "--json"])
    capsys.readouterr()
    items = {r["item_id"]: r for r in store.run_items(run_id).iter_rows(named=True)}
    assert items["q0"]["outcome"] == "completed"
    assert items["q1"]["outcome"] == "failed" and "already returned for item 'gone'" in items["q1"]["error"]
    q0 = set(store.location.keys(f"artifacts/run_id={run_id}/q0/0"))
    assert q0 == {f"artifacts/{p}" for p in items["q0"]["artifacts"]}, "the stray file is gone"
    assert store.location.read(f"artifacts/{items['q0']['artifacts'][0]}") == b"new"


@pytest.mark.docker
def test_a_container_run_on_s3_keeps_its_workspace_and_a_rescore_reads_it(s3, request, tmp_path):
    """A container target's transcript, diff and exported workspace are uploaded by the process
    that ran the attempt; a rescore in another process scores the workspace it downloads."""
    from tests.helpers.sandbox_images import busybox_image, engine
    from tests.sandbox.test_sandbox import _eval

    url = s3.url(request.node.name)
    spec = _eval(tmp_path, busybox_image(engine()), "mkdir -p out; echo 42 > out/answer.txt; echo 42")
    run_id = assay_process_json("run", str(spec), "--store", url)["run_id"]
    store = Store(url)
    (row,) = store.run_items(run_id).iter_rows(named=True)
    assert row["outcome"] == "completed" and row["artifacts"]
    workspace = next(p for p in row["artifacts"] if p.endswith("/workspace"))
    keys = set(store.location.keys(f"artifacts/run_id={run_id}"))
    assert f"artifacts/{workspace}/out/answer.txt" in keys
    assert all(
        any(k == f"artifacts/{p}" or k.startswith(f"artifacts/{p}/") for k in keys) for p in row["artifacts"]
    )

    (tmp_path / "graders.py").write_text(
        "def answer_file(workspace, sandbox):\n"
        "    assert sandbox is None\n"
        "    return (workspace / 'out' / 'answer.txt').read_text().strip() == '42'\n"
    )
    (tmp_path / "rescore.yaml").write_text(
        "scorers:\n  - {kind: user_code, function: 'graders:answer_file'}\n"
    )
    rescore = assay_process_json("rescore", run_id, "--store", url, "--spec", str(tmp_path / "rescore.yaml"))
    scores = store.run_scores(rescore["run_id"])
    assert scores["score"].to_list() == [1.0], scores["error"].to_list()
