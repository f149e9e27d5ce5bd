"""A run's record through its life (assay/run/record.py): read once per open, each change written
as the revision after the one the writer holds — on a local folder and on S3 (moto's server).

The counts are of the store's own requests for the run's record: listings of its folder (a LIST
on S3) and reads of its revisions (a GET on S3, or Polars' reads of a revision's path).
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest

import assay.store.local
from assay.errors import ResumeRefusedError
from assay.orchestrate.run import RunRequest, drive_run
from assay.outcomes import RunStatus
from assay.run import record as run_record
from assay.run.identity import Identity
from assay.run.plan import open_runs
from assay.store import Store, stored_form
from tests.conftest import REPO, openai_spec


class _Counting:
    """A store's location that counts the requests for the records of runs: listings of a run's
    record folder, reads of its revisions (by bytes, or by path, as Polars reads them) and
    revisions created."""

    def __init__(self, location: Any, counts: dict[str, int]) -> None:
        self._location = location
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._location, name)

    def _count(self, what: str, key: str, *, folder: bool = False) -> None:
        parts = key.split("/")
        if parts[0] == "runs" and len(parts) == (2 if folder else 3) and parts[1].startswith("run_id="):
            self._counts[what] += 1

    def names(self, key: str) -> list[str]:
        self._count("lists", key, folder=True)
        return self._location.names(key)

    def read(self, key: str) -> bytes:
        self._count("reads", key)
        return self._location.read(key)

    def reader_path(self, key: str) -> str:
        self._count("reads", key)
        return self._location.reader_path(key)

    def create(self, key: str, data: Any, staging: str) -> bool:
        self._count("creates", key)
        return self._location.create(key, data, staging)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every `Store` opened from now on counts its run-record requests here."""
    found = {"lists": 0, "reads": 0, "creates": 0}
    real = assay.store.local.open_location
    monkeypatch.setattr(assay.store.local, "open_location", lambda root: _Counting(real(root), found))
    return found


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "store")
    s3 = request.getfixturevalue("s3")
    return s3.url(request.node.name.replace("[", "-").replace("]", ""))


def _drive(spec: Path, root: str, **options: Any) -> dict[str, Any]:
    return asyncio.run(drive_run(RunRequest(spec=str(spec), store=root, **options)))


def _reset(counts: dict[str, int]) -> None:
    counts.update(lists=0, reads=0, creates=0)


def test_a_new_run_lists_its_record_once_and_reads_none(root, counts, tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    summary = _drive(spec, root)
    assert summary["status"] == RunStatus.COMPLETED
    # One listing (no such run yet); two revisions, each created without listing again.
    assert counts == {"lists": 1, "reads": 0, "creates": 2}


def test_a_resume_reads_its_record_once_and_its_writes_read_nothing(root, counts, tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    run_id = _drive(spec, root)["run_id"]
    _reset(counts)
    resumed = _drive(spec, root, run_id=run_id, resume=True)
    assert resumed["status"] == RunStatus.COMPLETED and resumed["items"]["completed"] == 3
    # The open's one read (one LIST, one GET on S3); `running`, then the close, each created
    # as the revision after the one held.
    assert counts == {"lists": 1, "reads": 1, "creates": 2}
    revisions = Store(root).location.names(f"runs/run_id={run_id}")
    assert revisions == [f"run-{n:06d}.parquet" for n in (1, 2, 3, 4)]


def test_the_held_record_is_what_a_read_returns(root, tmp_path, mock):
    """The record a run closes from is the one it holds: written, it reads back the same."""
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    store = Store(root)
    (plan,) = open_runs(spec, store=store)
    try:
        assert stored_form(plan.run_id, plan.record) == store.read_run(plan.run_id)
    finally:
        run_record.fail(store, plan.run_id, plan.record, "the test is over")
        plan.lease.release()
    assert store.read_run(plan.run_id) == stored_form(plan.run_id, plan.record)
    assert plan.record["revision"] == 2 and store.read_run(plan.run_id)["status"] == RunStatus.FAILED


def test_a_record_changed_since_it_was_read_is_changed_as_stored_now(root, tmp_path, mock):
    """The run's last holder closes it between the open's read and the new holder's write: the
    revision after the one read is taken, so the resume starts from the record as stored now."""
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    store = Store(root)
    run_id = _drive(spec, root)["run_id"]
    stored = run_record.read(store, run_id, required=True)
    assert stored is not None and stored["revision"] == 2
    meanwhile = {k: v for k, v in stored.items() if k != "run_id"}
    store.write_run(run_id, {**meanwhile, "tags": ["closed", "meanwhile"]})  # revision 3

    record, lease = run_record.start(
        store,
        run_id,
        Identity.from_record(stored),
        {},
        stored=stored,
        flow_run_id=None,
        restart_hint="",
    )
    try:
        assert record["revision"] == 4 and record["tags"] == ["closed", "meanwhile"]
        assert store.read_run(run_id)["tags"] == ["closed", "meanwhile"]
        assert store.read_run(run_id)["status"] == RunStatus.RUNNING
        # A change made while another writer took the next revision: made to its record.
        store.write_run(run_id, {**meanwhile, "tags": ["again"]})  # revision 5
        run_record.fail(store, run_id, record, "stopped")
        now = store.read_run(run_id)
        assert (now["revision"], now["tags"], now["status"]) == (6, ["again"], RunStatus.FAILED)
        assert record["revision"] == 6 and record["tags"] == ["again"]
    finally:
        lease.release()


def test_a_resume_whose_identity_changed_writes_nothing(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    root = str(tmp_path / "store")
    run_id = _drive(spec, root)["run_id"]
    store = Store(root)
    folders = (f"runs/run_id={run_id}", f"leases/run_id={run_id}")
    before = [store.location.names(folder) for folder in folders]
    stored = store.read_run(run_id)
    changed = Identity.from_record({**stored, "seed": stored["seed"] + 1})
    assert changed.differences(Identity.from_record(stored)) == [
        f"seed ({stored['seed']} -> {stored['seed'] + 1})"
    ]
    with pytest.raises(ResumeRefusedError, match=r"identity changed since it started: seed"):
        run_record.start(store, run_id, changed, {}, stored=stored, flow_run_id=None, restart_hint="")
    assert [store.location.names(folder) for folder in folders] == before  # no revision, no lease


def test_only_the_record_module_writes_run_records():
    """Every revision of a run's record is written by assay/run/record.py."""
    writers = set()
    sources = [
        path for folder in ("assay", "flows", "tasks", "evaluators") for path in (REPO / folder).rglob("*.py")
    ]
    for path in sorted(sources):
        relative = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "write_run"
                and relative != "assay/store/local.py"
            ):
                writers.add(relative)
    assert writers == {"assay/run/record.py"}
