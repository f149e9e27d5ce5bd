"""Planning a run: validate everything (`assay.run.checks`), fix its identity, record it (through
`assay/run/record.py`, which reads each run's record once), cut the work into shards.

`open_runs` is the only step that writes before items execute, and it writes only after the spec,
the dataset and every rendered prompt passed validation: bad input leaves the store untouched.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay import __version__, _schema
from assay._lazy import lazy_module
from assay.calls.accounting import Budget, PriceTable
from assay.calls.capture import Recorder, Redactor, secrets_of
from assay.calls.http import REFUSED
from assay.calls.response_cache import ResponseCache
from assay.errors import InputError, RunNotFoundError, SpecError, describe
from assay.outcomes import FailureKind, RunKind, RunStatus
from assay.run import record as run_record
from assay.run.checks import validate
from assay.run.compare_to import CommitMonitor, check_baseline, compare_columns, seeded_order, with_compare_to
from assay.run.identity import Identity, identity_of, spec_hash
from assay.spec import EvalSpec
from assay.spec.dataset import Item, canonical_json
from assay.store import Store
from assay.store.lease import Lease
from assay.targets import kind_of

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

MAX_SHARDS = 8
_MIN_SHARD_SIZE = 25


@dataclass(frozen=True, slots=True)
class Shard:
    """A slice of the work: (item position, trial) pairs, and a digest of exactly those."""

    index: int
    work: tuple[tuple[int, int], ...]

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.work).encode()).hexdigest()[:16]


class RunPlan:
    """Everything a run's execution needs. A plain class on purpose: Prefect walks the fields of
    dataclasses and pydantic models passed to tasks, and a plan holds every item.

    Args:
        run_id: the run's id.
        spec: the validated spec.
        spec_dir: the spec's folder (relative paths, importable code).
        items: the dataset's items.
        identity: the run's identity.
        store: where results go.
        record: the run's record as this process holds it, `revision` among its columns (changed
            only through `assay/run/record.py`).
        done: (item_id, trial) already committed when execution started.
        lease: this process's hold on the run.
        work: (item position, trial) pairs to execute; default every item x every trial.
        retried: for `--retry-failed`: the (item_id, trial) run again, each with the `retry` of
            its failed row (not in `done`); their new rows take the next `retry`.
        spent_usd: what earlier executions of the run spent (`committed_spend`): the budget
            counts from there.
        stored_bytes: the bytes of captured requests earlier executions committed
            (`committed_request_bytes`): the capture's limit counts from there.

    Building one reads and writes nothing (`open_runs` does the reading).

    Also: `prices` (the spec's over the shipped table), `budget` (the run's admission control) and
    `capture` (the request sidecar's recorder).
    """

    def __init__(
        self,
        *,
        run_id: str,
        spec: EvalSpec,
        spec_dir: Path,
        items: list[Item],
        identity: Identity,
        store: Store,
        record: dict[str, Any],
        done: set[tuple[str, int]],
        lease: Lease,
        work: list[tuple[int, int]] | None = None,
        retried: dict[tuple[str, int], int] | None = None,
        spent_usd: float = 0.0,
        stored_bytes: int = 0,
    ) -> None:
        self.run_id = run_id
        self.spec = spec
        self.spec_dir = spec_dir
        self.items = items
        self.identity = identity
        self.store = store
        self.record = record
        self.done = done
        self.retried = retried or {}
        self.lease = lease
        self.prices = PriceTable.shipped(spec.prices)
        self.response_cache = ResponseCache(store.location)
        self.capture = Recorder(
            spec.capture_settings,
            Redactor(secrets_of(spec), spec.redact),
            stored_bytes=stored_bytes,
            status=record.get("capture_status"),
        )
        # A resumed run's budget counts what its earlier executions already spent.
        self.budget = Budget(spec.budget_usd, spent_usd=spent_usd)
        self.work = work if work is not None else execution_order(len(items), spec.trials, spec.seed)
        self.monitor: CommitMonitor | None = None  # a sequential compare's (`compare_to`), set by the driver
        # On a Dask cluster the controllers live in the workers: the fleet's, as its scheduler
        # hosts it, stored with the run instead of this process's (`assay/orchestrate/dask.py`).
        self.fleet_rate: dict[str, Any] | None = None

    @property
    def total(self) -> int:
        return len(self.work)

    @property
    def retry_digest(self) -> str:
        """A digest of what this execution retries ("" when nothing): part of a shard's cache key,
        so that a shard that finished before is run again for its failed items."""
        if not self.retried:
            return ""
        return hashlib.sha256(canonical_json(sorted(self.retried.items())).encode()).hexdigest()[:16]

    def retry_columns(self, item_id: str, trial: int) -> dict[str, int | None]:
        """An item row's `retry` and `retry_of`: the next after its failed row's when it is a retry,
        else 0 and null."""
        previous = self.retried.get((item_id, trial))
        return {"retry": 0 if previous is None else previous + 1, "retry_of": previous}

    def shards(self, max_shards: int = MAX_SHARDS) -> list[Shard]:
        """Cut the work into at most `max_shards` shards (of at least 25 items), in order."""
        work = self.work
        size = max(_MIN_SHARD_SIZE, math.ceil(len(work) / max_shards))
        return [
            Shard(index=n, work=tuple(work[start : start + size]))
            for n, start in enumerate(range(0, len(work), size))
        ]


def committed_spend(store: Store, run_id: str) -> float:
    """What the run's committed rows spent: every row's, history included (the money was spent)."""
    return store.run_items(run_id, history=True)["cost_usd"].sum() or 0.0


def committed_request_bytes(store: Store, run_id: str) -> int:
    """The bytes of the run's committed captured requests."""
    return int(store.run_requests(run_id)["bytes"].sum() or 0)


def execution_order(n_items: int, trials: int, seed: int) -> list[tuple[int, int]]:
    """(item position, trial) in the order they run: dataset order for one trial; with several, a
    shuffle seeded by the run's seed, so one item's trials do not run back to back (a provider's
    cache or a rate limit would otherwise touch them alike). The seed is part of the run's
    identity, so a resume runs the same order."""
    work = [(position, trial) for position in range(n_items) for trial in range(trials)]
    if trials > 1:
        random.Random(seed).shuffle(work)
    return work


def new_run_id(now: datetime | None = None, suffix: str | None = None) -> str:
    """A sortable run id: UTC time to the second, then 6 hex characters."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%S}-{suffix or secrets.token_hex(3)}"


# `--retry-failed` words beyond the failure kinds: an HTTP failure whose last answer was 429.
RATE_LIMIT = "rate_limit"


def failure_selector(kinds: list[str]) -> Callable[[pl.DataFrame], pl.Series]:
    """Which failed items `assay resume --retry-failed KINDS` runs again: a mask over failed item
    rows. No kinds: every failed item. A kind is a `FailureKind` word, or `rate_limit` (an `http`
    failure whose last status was 429).

    Raises:
        InputError: a word that is neither (the message lists the words).
    """
    words = [*FailureKind, RATE_LIMIT]
    unknown = [kind for kind in kinds if kind not in words]
    if unknown:
        raise InputError(
            f"--retry-failed: unknown failure kind {', '.join(map(repr, unknown))}; expected a comma-"
            f"separated list of {', '.join(words)}"
        )

    def selected(failed: pl.DataFrame) -> pl.Series:
        if not kinds:
            return pl.Series([True] * failed.height, dtype=pl.Boolean)
        mask = failed["failure_kind"].is_in([kind for kind in kinds if kind != RATE_LIMIT])
        if RATE_LIMIT in kinds:
            mask = mask | (
                (failed["failure_kind"] == FailureKind.HTTP) & (failed["failure_http_status"] == 429)
            )
        return mask.fill_null(False)

    return selected


def with_never_sent(
    selected: Callable[[pl.DataFrame], pl.Series] | None,
) -> Callable[[pl.DataFrame], pl.Series]:
    """`selected` (`--retry-failed`'s kinds, if given) or a failure whose request was never sent:
    its connection refused (`assay.calls.http.REFUSED`), so a resume once the endpoint answers
    asks it without `--retry-failed` (it cost nothing and the target never saw it)."""

    def never_sent(failed: pl.DataFrame) -> pl.Series:
        mask = (failed["failure_kind"] == FailureKind.CONNECTION) & failed["error"].str.contains(
            REFUSED, literal=True
        )
        if selected is not None:
            mask = mask | selected(failed)
        return mask.fill_null(False)

    return never_sent


def new_record(
    spec: EvalSpec, spec_path: Path | None, identity: Identity, n_items: int, n_planned: int
) -> dict[str, Any]:
    """A fresh run row, status `running`; the caller sets kind-specific fields."""
    target = spec.target
    return {
        "kind": RunKind.RUN,
        "name": spec.name,
        "status": RunStatus.RUNNING,
        "created_at": datetime.now(UTC),
        "finished_at": None,
        "spec_path": str(spec_path) if spec_path else None,
        "spec_json": spec.model_dump_json(),
        "spec_hash": spec_hash(spec),
        "identity": identity.digest,
        "dataset_hash": identity.dataset,
        "dataset_revision": identity.dataset_revision,
        "target_hash": identity.target,
        "scorers_hash": identity.scorers,
        "source_run_id": None,
        "matrix_id": None,
        "cell": None,
        "target_kind": target.kind,
        "model": getattr(target, "model", None),
        "trials": spec.trials,
        "seed": spec.seed,
        "policy": spec.policy,
        "attempts": spec.attempts,
        "fixtures_hash": identity.fixtures,
        "execution_order": f"seeded shuffle (seed {spec.seed})" if spec.trials > 1 else "dataset order",
        "tags": list(spec.tags),
        "n_items": n_items,
        "n_planned": n_planned,
        "fail_on_item_error_rate": spec.fail_on_item_error_rate,
        "fail_on_scorer_error_rate": spec.fail_on_scorer_error_rate,
        "assay_version": __version__,
    }


def open_runs(
    spec_path: str | Path,
    *,
    store: Store,
    run_id: str | None = None,
    resume: bool = False,
    flow_run_id: str | None = None,
    cell: str | None = None,
    extra_tags: list[str] | None = None,
    compare_to: str | None = None,
    retry_failed: list[str] | None = None,
    check_keys: bool = False,
) -> list[RunPlan]:
    """Validate, fix each run's identity and record it as `running`: one run, or one per cell of
    a matrix spec (run ids `<matrix id>-<cell>`).

    Args:
        spec_path: the spec file.
        store: the store to write to.
        run_id: the run's id (a matrix's id for a matrix spec); a new one when None.
        resume: continue the run(s) (identity must not have changed) rather than start them.
        flow_run_id: the Prefect flow run executing this, if any.
        cell: only this cell of a matrix spec, and `run_id` is that cell's own run id (resume).
        extra_tags: tags added to the spec's on a new run (the nightly flow adds `nightly`).
        compare_to: a baseline run to compare with sequentially (`--compare-to`), over the spec's.
        retry_failed: with `resume`: also run again the items whose current row failed, of these
            failure kinds (`failure_selector`; empty: every kind). Each earlier row stays, as history.
        check_keys: try each agent's provider key with one cheap request first, before any
            container starts (`TargetKind.key_problems`); a key refused is bad input.
    """
    if retry_failed is not None and not resume:
        raise InputError("--retry-failed: only a resumed run has failed items to run again")
    selected = with_never_sent(failure_selector(retry_failed) if retry_failed is not None else None)
    spec_path = Path(spec_path).resolve()
    spec, items = validate(spec_path)
    stored = _Stored(store)
    spec = with_compare_to(spec, compare_to, stored.of, run_id)
    cells = spec.cells()
    if cell is not None:
        cells = [(name, cell_spec) for name, cell_spec in cells if name == cell]
        if not cells:
            raise SpecError(f"targets: the spec has no cell {cell!r} any more", source=str(spec_path))
    matrix_id = None if spec.targets is None or cell is not None else (run_id or new_run_id())
    # Every cell is prepared (its agent asked, its identity fixed) before any run is recorded,
    # so bad input in any cell leaves the store untouched.
    prepared = []
    for name, cell_spec in cells:
        this_id = f"{matrix_id}-{name}" if matrix_id else (run_id or new_run_id())
        identity = identity_of(cell_spec, items, spec_path.parent)
        if check_keys:
            refused = kind_of(cell_spec.target).key_problems(cell_spec.target)
            if refused:
                raise SpecError(refused, source=str(spec_path))
        # The target's preflight (an HTTP agent's capabilities, a container's image) is done once
        # and snapshotted on the run (a resume reuses the snapshot); items it cannot take (fixture
        # files) leave the plan, listed.
        record = stored.of(this_id)
        if resume and record is None:
            raise RunNotFoundError(f"no run {this_id!r} in store {str(store.root)!r}")
        snapshot = _target_snapshot(cell_spec, items, record, spec_path.parent)
        skipped = {d["item_id"] for d in (snapshot or {}).get("dropped_items", [])}
        work = [
            (p, t)
            for p, t in execution_order(len(items), spec.trials, spec.seed)
            if items[p].item_id not in skipped
        ]
        if cell_spec.compare_to is not None:
            check_baseline(cell_spec, store, identity)
            work = seeded_order(work, items, spec.seed)
        fresh = new_record(cell_spec, spec_path, identity, len(items), len(work))
        fresh.update(
            matrix_id=matrix_id,
            cell=name,
            tags=[*spec.tags, *(extra_tags or [])],
            target_snapshot=json.dumps(snapshot) if snapshot else None,
            **compare_columns(cell_spec),
        )
        prepared.append((cell_spec, this_id, identity, work, fresh, record))

    plans: list[RunPlan] = []
    opened: list[tuple[str, dict[str, Any], Lease]] = []
    try:
        for cell_spec, this_id, identity, work, fresh, before in prepared:
            record, lease = run_record.start(
                store,
                this_id,
                identity,
                fresh,
                stored=before,
                flow_run_id=flow_run_id,
                restart_hint=f"Start a new run with `assay run {spec_path}` instead.",
            )
            opened.append((this_id, record, lease))
            done = store.done_keys(this_id, parts=lease.accepted)
            retried = store.failed_keys(this_id, selected, parts=lease.accepted) if resume else {}
            earlier = bool(done or retried)  # an earlier execution committed rows
            plans.append(
                RunPlan(
                    run_id=this_id,
                    spec=cell_spec,
                    spec_dir=spec_path.parent,
                    items=items,
                    identity=identity,
                    store=store,
                    record=record,
                    done=done - retried.keys(),
                    work=work,
                    lease=lease,
                    retried=retried,
                    spent_usd=committed_spend(store, this_id) if earlier else 0.0,
                    stored_bytes=committed_request_bytes(store, this_id) if earlier else 0,
                )
            )
    except BaseException as exc:
        # A run recorded as running must not stay so: these failed to start.
        for opened_id, record, lease in opened:
            run_record.fail(store, opened_id, record, f"it did not start: {describe(exc)}")
            lease.release()
        raise
    return plans


class _Stored:
    """The records of the runs an open names, each read once (`assay/run/record.py`)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._read: dict[str, _schema.RunRecord | None] = {}

    def of(self, run_id: str) -> _schema.RunRecord | None:
        """The run's record as stored, or None."""
        if run_id not in self._read:
            self._read[run_id] = run_record.read(self._store, run_id)
        return self._read[run_id]


def _target_snapshot(
    spec: EvalSpec, items: list[Item], record: Mapping[str, Any] | None, spec_dir: Path
) -> dict[str, Any] | None:
    """The target kind's preflight, and the snapshot it keeps on the run (a resume passes the
    stored one back, from its `record`); its warnings and the items it leaves out are shown."""
    stored = record.get("target_snapshot") if record is not None else None
    snapshot = kind_of(spec.target).prepare(
        spec.target, items, spec_dir, json.loads(stored) if stored else None
    )
    for warning in (snapshot or {}).get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    dropped = (snapshot or {}).get("dropped_items")
    if dropped:
        ids = ", ".join(d["item_id"] for d in dropped[:20])
        print(f"warning: skipped {len(dropped)} items the agent cannot take: {ids}", file=sys.stderr)
    return snapshot


def spec_for_resume(record: Mapping[str, Any]) -> Path:
    """The spec file a stored run was started from (resume re-reads it and checks identity).

    Args:
        record: the run's record (`Store.read_run`).
    """
    path = Path(record["spec_path"])
    if not path.is_file():
        raise SpecError(f"run {record['run_id']} was started from {path}, which no longer exists")
    return path
