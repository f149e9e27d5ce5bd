"""A run's record through its life, written from this module only: started (a new run's first
revision, or a resumed one's `running`), then closed, failed or unavailable; and read once per open.

    read(store, run_id)                          the record as stored, or None: an open's one read
    start(store, run_id, identity, fresh, ...)   the run's lease taken, the run recorded `running`
    close(store, run_id, record, changes)        its final revision (what `close_run` computed)
    fail(store, run_id, record, error)           failed, and why, touching nothing else
    unavailable(store, run_id, record, reasons)  it could not start (the gold check): nothing ran
    add_tag(store, run_id, tag)                  a tag on a finished run (a night that passed)

The process that holds a run's lease keeps the run's record (`RunPlan.record`, its `revision`
among the columns) and writes each change as the revision after the one it holds, put-if-absent
(`Store.write_run(after=)`). That revision taken means another writer changed the run meanwhile —
the run's last holder closing it while this process took the lease over — and the change is made
to the record as stored now, as the next free revision. So a run is read once as it opens and a
change reads nothing: no listing, no record read again (docs/storage.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from assay import _schema
from assay.errors import ResumeRefusedError, RunNotFoundError
from assay.outcomes import RunStatus
from assay.run.identity import Identity
from assay.store import Store
from assay.store.executions import sweep_executions
from assay.store.lease import Lease


def read(store: Store, run_id: str, *, required: bool = False) -> _schema.RunRecord | None:
    """A run's record as stored (`Store.read_run`), or None when the store has no such run.

    Raises:
        RunNotFoundError: `required` and there is no such run.
    """
    try:
        return store.read_run(run_id)
    except RunNotFoundError:
        if required:
            raise
        return None


def start(
    store: Store,
    run_id: str,
    identity: Identity,
    fresh: dict[str, Any],
    *,
    stored: Mapping[str, Any] | None,
    flow_run_id: str | None,
    restart_hint: str,
) -> tuple[dict[str, Any], Lease]:
    """Take the run's lease and record the run as `running`: `fresh`, or the stored record after
    checking its identity (before anything is written: a refused resume writes nothing).

    A run the store has (`stored`) is resumed even when not asked to (a Prefect flow-run retry
    arrives that way). The lease takes over the parts earlier executions committed (its
    `accepted` parts are what the run resumes from) and a resume clears what a killed process
    left half-written.

    Args:
        store: the store.
        run_id: the run.
        identity: the run's identity now.
        fresh: a new run's record (`new_record`).
        stored: the run's record as the open read it (`read`), None for a new run.
        flow_run_id: the Prefect flow run executing this, if any.
        restart_hint: what a refused resume's message suggests instead.

    Returns:
        The record as written (the run's `RunPlan.record`) and the lease, held.
    """
    if stored is not None:
        changed = identity.differences(Identity.from_record(stored))
        if changed:
            raise ResumeRefusedError(
                f"cannot resume run {run_id}: its identity changed since it started: {', '.join(changed)}. "
                f"{restart_hint}"
            )
    lease = Lease(store, run_id, flow_run_id)
    lease.acquire()
    try:
        if stored is not None:
            # First the parts of shard executions a later execution redid (a Dask worker's, docs/scale.md),
            # then what a killed writer left staged (a complete batch is kept, not redone), then
            # the fence: which committed parts the run resumes from.
            sweep_executions(store, run_id)
            store.recover(run_id)
        lease.take_over_parts()
        if stored is not None:
            # Its last holder may have closed it since it was read: then the revision after the
            # one read is taken, and the change is made to the record as stored now (`_write`).
            record = _held(stored)
            changes = {"status": RunStatus.RUNNING, "finished_at": None, "error": None}
            _write(store, run_id, record, **changes, prefect_flow_run_id=flow_run_id)
        else:
            record = {**fresh, "prefect_flow_run_id": flow_run_id}
            _write(store, run_id, record, fresh=True)
    except BaseException:
        lease.release()
        raise
    return record, lease


def close(store: Store, run_id: str, record: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """Record how the run ended: its final status, totals, gate and spend (`close_run`'s
    `changes`). Call it holding the run's lease.

    Args:
        store: the store.
        run_id: the run.
        record: the run's record as this process holds it; updated with the changes.
        changes: the columns that change, `status` and `finished_at` among them.
    """
    _write(store, run_id, record, **changes)


def fail(store: Store, run_id: str, record: dict[str, Any], error: str) -> None:
    """Record that the run failed and why, touching nothing else (when even summarising failed,
    or the run did not start)."""
    _write(store, run_id, record, status=RunStatus.FAILED.value, error=error, finished_at=datetime.now(UTC))


def unavailable(store: Store, run_id: str, record: dict[str, Any], reasons: list[str]) -> dict[str, Any]:
    """Record that the run could not start (a failed gold check) and why: nothing ran. Returns
    its summary."""
    reason = "; ".join(reasons)
    _write(
        store,
        run_id,
        record,
        status=RunStatus.UNAVAILABLE.value,
        unavailable_reason=reason,
        finished_at=datetime.now(UTC),
    )
    return {
        "run_id": run_id,
        "name": record["name"],
        "status": RunStatus.UNAVAILABLE.value,
        "reasons": reasons,
    }


def add_tag(store: Store, run_id: str, tag: str) -> None:
    """Add a tag to a finished run's record (one read, one revision)."""
    record = _held(cast(_schema.RunRecord, read(store, run_id, required=True)))
    _write(store, run_id, record, tags=[*record["tags"], tag])


def _held(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored record as a writer holds it: its columns (and `revision`), not the run's id."""
    return {key: value for key, value in stored.items() if key != "run_id"}


def _write(store: Store, run_id: str, record: dict[str, Any], *, fresh: bool = False, **changes: Any) -> None:
    """Write `record` with `changes` as the revision after the one it holds (the first, for a
    `fresh` record), and update it to what was written. That revision taken (another writer
    changed the run since it was read): the changes made to the record as stored now — or, for
    a fresh record, the record itself — as the next free revision."""
    if changes.keys() - {"tags", "summary_json"}:
        # The summary's figures are the parts' as the run closed: any later change but a tag
        # (a resume, a failure) may change the parts or what they mean.
        changes.setdefault("summary_json", None)
    after = 0 if fresh else record.get("revision") or 0
    revision = store.write_run(run_id, cast(_schema.RunRecord, {**record, **changes}), after=after)
    if revision is None:
        if not fresh:
            record.clear()
            record.update(_held(cast(_schema.RunRecord, read(store, run_id, required=True))))
        revision = store.write_run(run_id, cast(_schema.RunRecord, {**record, **changes}))
    record.update(changes, revision=revision)
