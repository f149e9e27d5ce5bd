"""Rescoring: new scorers over a stored run's outputs, with no call to the target.

A rescore is a run of kind `rescore` with `source_run_id`. Its items are the source's item rows:
completed ones are scored with the new scorers; failed ones pass through with their outcome,
error and failure description, and get no scores. Timing and the source's gauge rows (duration,
steps, tokens…) are carried forward from the source (the rescore made no generation calls) and
spend is zero. Resume works as for a run: the
rescore's identity is the source's dataset and target with the new scorers.

With `keep_scores` (`assay rescore --keep-scores`) the source's score rows of every scorer that no
new scorer replaces by name are carried forward too (`runs.kept_scorers`), unchanged but for their
spend (the rescore made no call for them): the rescore is then the source with some scores redone,
and `assay compare SOURCE --candidate RESCORE` shows those scorers' change beside the rest's none.

As the seed's `rescore`: a rescore takes its own budget, concurrency and capture settings
(`RescoreSettings`; the source's otherwise), records the source's generation spend beside its own
judging (`runs.source_generation_usd`), and carries the source's captured requests forward only
when it captures: an item keeps only the source operation ids whose records it holds, and a
source whose records are gone makes its capture `unavailable`, saying so.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay._lazy import lazy_module
from assay.calls.accounting import Accounting
from assay.calls.capture import carry_forward
from assay.errors import InputError, SpecError, describe
from assay.evaluators import ScorerSpec
from assay.outcomes import (
    TOKEN_COLUMNS,
    CaptureStatus,
    Completeness,
    ItemOutcome,
    RowKind,
    RunKind,
    RunStatus,
)
from assay.run import record as run_record
from assay.run.admit import Gate
from assay.run.checks import scorer_problems
from assay.run.execute import ShardExecutor
from assay.run.identity import Identity, scorers_digest
from assay.run.plan import RunPlan, committed_request_bytes, committed_spend, new_record, new_run_id
from assay.run.rows import Finished, ItemRow, ScoreRow, stored_tool_calls
from assay.run.scoring import Scoring
from assay.spec import EvalSpec, describe_errors
from assay.spec.dataset import Item
from assay.store import Store

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")


class RescoreSettings(BaseModel):
    """A rescore's own settings, each over the source's (`assay rescore --budget/--concurrency/
    --capture-requests`). None keeps the source's.

    Args:
        budget: a USD limit on the rescore's judging spend (`"$5"`).
        concurrency: items scored at once.
        capture_requests: whether (with the source's limits, or the defaults) to capture the
            judges' requests, and carry the source's forward.
    """

    model_config = ConfigDict(extra="forbid")

    budget: str | None = None
    concurrency: int | None = None
    capture_requests: bool | None = None

    def apply(self, spec: dict[str, Any]) -> None:
        """Set these on a spec's fields (a dict, before validation names a bad value)."""
        for name, value in self.model_dump().items():
            if value is None:
                continue
            if name == "capture_requests" and value and isinstance(spec.get(name), dict):
                continue  # on, with the source's limits
            spec[name] = value


class RescoreSpec(BaseModel):
    """What a rescore takes from a spec file: its scorers (an eval spec's other fields are ignored)."""

    model_config = ConfigDict(extra="ignore")

    scorers: list[ScorerSpec] = Field(min_length=1)


def parse_scorers(*, spec_path: Path | None, inline: list[str]) -> list[Any]:
    """The scorers of a rescore, from a spec file or from inline YAML (`--scorer '{kind: …}'`).

    Args:
        spec_path: a YAML file with a `scorers` list (an eval spec will do).
        inline: YAML mappings, or bare kinds like `exact_match`.
    """
    if (spec_path is None) == (not inline):
        raise SpecError("give the new scorers with either --spec FILE or one or more --scorer")
    if spec_path is not None:
        try:
            document = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SpecError(f"cannot read {spec_path}: {exc}") from None
        source = str(spec_path)
    else:
        document = {"scorers": [_inline_scorer(text) for text in inline]}
        source = "--scorer"
    try:
        return RescoreSpec.model_validate(document).scorers
    except ValidationError as exc:
        raise SpecError(describe_errors(exc, document), source=source) from None


def _inline_scorer(text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"--scorer {text!r} is not valid YAML: {exc}") from None
    return {"kind": value} if isinstance(value, str) else value


def _items_from_rows(rows: pl.DataFrame) -> list[Item]:
    firsts = rows.sort("item_index", "trial").unique("item_id", keep="first", maintain_order=True)
    items = []
    for row in firsts.iter_rows(named=True):
        annotations = json.loads(row["annotations"]) if row["annotations"] else {}
        input_value = json.loads(row["input"])
        expected = json.loads(row["expected"]) if row["expected"] is not None else None
        items.append(
            Item(
                item_id=row["item_id"],
                item_index=row["item_index"],
                input=input_value,
                expected=expected,
                annotations=annotations,
                # The source row's other fields are not stored; scorers see what is.
                fields={**annotations, "input": input_value, "expected": expected},
            )
        )
    return items


def open_rescore(
    source_run_id: str,
    scorers: list[Any] | None,
    *,
    store: Store,
    spec_dir: Path,
    spec_path: Path | None = None,
    run_id: str | None = None,
    resume: bool = False,
    flow_run_id: str | None = None,
    settings: RescoreSettings | None = None,
    keep_scores: bool = False,
) -> tuple[RunPlan, dict[tuple[str, int], dict[str, Any]]]:
    """Plan a rescore of `source_run_id` and record it as `running`.

    Args:
        source_run_id: the run whose outputs are scored again.
        scorers: the new scorers (None when resuming: the stored ones are used).
        store: the store holding the source, and where the rescore goes.
        spec_dir: where user-code scorers are imported from.
        spec_path: the file the scorers came from, if any.
        run_id: the rescore's id; new when None.
        resume: continue `run_id`.
        flow_run_id: the Prefect flow run executing this, if any.
        settings: the rescore's own budget, concurrency and capture (a resume keeps its first).
        keep_scores: carry the source's scores forward, of the scorers no new one replaces (a
            resume keeps its first choice: `runs.kept_scorers`).

    Returns:
        The plan, and the source's item rows by (item_id, trial).
    """
    source = store.read_run(source_run_id)
    if source["status"] == RunStatus.RUNNING:
        raise InputError(
            f"run {source_run_id} has not finished (status running): `assay resume {source_run_id}` first"
        )
    stored_spec = json.loads(source["spec_json"])
    # The rescore's own record, read once (a resume's spec, and whether its id exists already).
    required = resume or scorers is None
    stored = run_record.read(store, run_id, required=required) if run_id is not None else None
    if scorers is None:  # resuming: the rescore's own stored spec (its scorers and settings)
        if run_id is None:
            raise InputError("resuming a rescore needs its run id")
        assert stored is not None  # `required`
        stored_spec = json.loads(stored["spec_json"])
    else:
        stored_spec["scorers"] = [s.model_dump(mode="json") for s in scorers]
        (settings or RescoreSettings()).apply(stored_spec)
    try:
        spec = EvalSpec.model_validate(stored_spec)
    except ValidationError as exc:
        raise SpecError(describe_errors(exc, stored_spec), source="assay rescore") from None
    problems = scorer_problems(spec.scorers, str(spec_dir))
    if problems:
        raise SpecError(problems, source=str(spec_path) if spec_path else "--scorer")

    rows = store.run_items(source_run_id)
    if rows.is_empty():
        raise InputError(f"run {source_run_id} has no items to rescore")
    items = _items_from_rows(rows)
    position = {item.item_id: n for n, item in enumerate(items)}
    source_rows = {(row["item_id"], row["trial"]): row for row in rows.iter_rows(named=True)}
    work = sorted((position[item_id], trial) for item_id, trial in source_rows)

    # The source's identity with the new scorers; the fixtures are the target's (never called).
    identity = replace(Identity.from_record(source), scorers=scorers_digest(spec.scorers), fixtures=None)
    fresh = new_record(spec, spec_path, identity, len(items), len(work))
    fresh.update(
        kind=RunKind.RESCORE,
        source_run_id=source_run_id,
        target_kind=source["target_kind"],
        model=source["model"],
        # The source's cell, so per-cell queries of a matrix keep a rescore with its cell; not its
        # matrix_id: a rescore is no cell of the matrix's leaderboard.
        cell=source.get("cell"),
        kept_scorers=kept_scorers(store, source_run_id, spec.scorers) if keep_scores else None,
        **source_generation(source),
    )
    run_id = run_id or new_run_id()
    record, lease = run_record.start(
        store,
        run_id,
        identity,
        fresh,
        stored=stored,
        flow_run_id=flow_run_id,
        restart_hint=f"Start a new rescore of {source_run_id} instead.",
    )
    try:
        done = store.done_keys(run_id, parts=lease.accepted)
        plan = RunPlan(
            run_id=run_id,
            spec=spec,
            spec_dir=spec_dir,
            items=items,
            identity=identity,
            store=store,
            record=record,
            done=done,
            work=work,
            lease=lease,
            spent_usd=committed_spend(store, run_id) if done else 0.0,
            stored_bytes=committed_request_bytes(store, run_id) if done else 0,
        )
        carried = _carry_requests(store, source_run_id, plan, source_rows)
        for row in source_rows.values():  # only references to records the rescore holds
            ids = [i for i in row["operation_ids"] or [] if i in carried]
            row["operation_ids"] = ids or None
    except BaseException as exc:
        # Recorded as running: it must not stay so.
        run_record.fail(store, run_id, record, f"it did not start: {describe(exc)}")
        lease.release()
        raise
    return plan, source_rows


def kept_scorers(store: Store, source_run_id: str, scorers: list[Any]) -> list[str]:
    """The source's scorers a `--keep-scores` rescore carries forward: all it has rows of, but
    those a new scorer of the same name replaces.

    Args:
        store: the store.
        source_run_id: the source run.
        scorers: the rescore's new scorers.
    """
    replaced = {scorer.name for scorer in scorers}
    names = store.run_scores(source_run_id)["scorer"].unique().to_list()
    return sorted(name for name in names if name not in replaced)


def source_generation(source: dict[str, Any]) -> dict[str, Any]:
    """The source's generation spend, recorded on a rescore beside its own judging: the source
    run's measured generation cost and its completeness; for a rescore of a rescore, the one its
    source recorded (a rescore generates nothing)."""
    if source["kind"] == RunKind.RESCORE:
        return {
            "source_generation_usd": source.get("source_generation_usd"),
            "source_generation_completeness": source.get("source_generation_completeness"),
        }
    return {
        "source_generation_usd": source.get("cost_generation_usd"),
        "source_generation_completeness": source.get("cost_completeness"),
    }


def _carry_requests(store: Store, source_run_id: str, plan: RunPlan, source_rows: dict[Any, Any]) -> set[str]:
    """Copy the source's captured requests into the rescore, once (a resume finds them there);
    returns the operation ids the rescore holds records of. Without capture, none: an item's
    reference to a record the rescore does not hold would dangle. A source whose items name
    operations but whose records are gone makes the capture `unavailable`, saying why."""
    settings = plan.spec.capture_settings
    if settings is None:
        return set()
    held = store.run_requests(plan.run_id)
    if not held.filter(pl.col("operation_id").is_not_null()).is_empty():
        return set(held["operation_id"].drop_nulls())
    source = store.run_requests(source_run_id)
    if source.is_empty():
        if any(row["operation_ids"] for row in source_rows.values()):
            plan.capture.status = CaptureStatus.UNAVAILABLE
            plan.capture.reason = (
                f"the source run {source_run_id}'s captured requests are no longer available"
            )
        return set()
    kept, cut = carry_forward(source.to_dicts(), settings)
    if kept:
        store.write_carried_requests(plan.run_id, pl.DataFrame(kept, schema=source.schema).to_arrow())
        plan.capture.bytes += sum(r["bytes"] or 0 for r in kept)
    if cut:
        plan.capture.status, plan.capture.reason = CaptureStatus.TRUNCATED, cut
    return {r["operation_id"] for r in kept}


def rescore_executor(plan: RunPlan, source_rows: dict[tuple[str, int], dict[str, Any]]) -> ShardExecutor:
    """The rescore's shards: each item's stored output scored by the new scorers.

    Args:
        plan: the rescore's plan.
        source_rows: the source's item rows by (item_id, trial).
    """
    scoring = Scoring(plan)
    items = RescoreItems(plan, source_rows, Gate(plan, target_calls=False), scoring)
    return ShardExecutor(plan, items, scoring.in_flight(plan.spec.concurrency))


class RescoreItems:
    """Each item the source's: a completed one's stored output scored, a failed one passed through.

    Args:
        plan: the rescore's plan.
        source_rows: the source's item rows by (item_id, trial).
        gate: the rescore's gate (no target is called: it only stops a process that lost the run).
        scoring: the new scorers.
    """

    def __init__(
        self,
        plan: RunPlan,
        source_rows: dict[tuple[str, int], dict[str, Any]],
        gate: Gate,
        scoring: Scoring,
    ) -> None:
        self._store = plan.store
        self._source_rows = source_rows
        self._gate = gate
        self._scoring = scoring
        # The source's gauges measured the target's work, which a rescore does not redo: they are
        # carried forward unchanged, as the items' timing is; so are the kept scorers' scores.
        self._source_gauges: dict[tuple[str, int], list[ScoreRow]] = {}
        gauges = plan.store.run_scores(plan.record["source_run_id"], kind=RowKind.GAUGE)
        for row in gauges.iter_rows(named=True):
            self._source_gauges.setdefault((row["item_id"], row["trial"]), []).append(row)
        self._kept: dict[tuple[str, int], list[ScoreRow]] = {}
        if plan.record.get("kept_scorers"):
            scores = plan.store.run_scores(plan.record["source_run_id"])
            for row in scores.filter(pl.col("scorer").is_in(plan.record["kept_scorers"])).iter_rows(
                named=True
            ):
                self._kept.setdefault((row["item_id"], row["trial"]), []).append(row)

    async def __call__(self, item: Item, trial: int) -> Finished:
        async with self._gate:
            return await self._rescored(item, trial)

    async def _rescored(self, item: Item, trial: int) -> Finished:
        source = self._source_rows[(item.item_id, trial)]
        # Timing is the source's; spend is this run's: no generation calls, only its own judging.
        row: ItemRow = {
            **source,
            "caller_cost_usd": None,
            **dict.fromkeys(TOKEN_COLUMNS, 0),
            **Accounting().columns(),
        }
        if source["outcome"] != ItemOutcome.COMPLETED:
            return Finished(row, [], [])
        output = json.loads(source["output"]) if source["output"] is not None else None
        artifacts = source.get("artifacts")
        # Local files are read in place; from object storage they are downloaded, off the loop.
        if self._store.local:
            context = kept_context(self._store, artifacts)
        else:
            context = await asyncio.to_thread(kept_context, self._store, artifacts)
        if (calls := stored_tool_calls(source.get("tool_calls"))) is not None:
            context["tool_calls"] = calls  # an answer of tool calls: as the source run's scorers saw it
        try:
            scored = await self._scoring.score(item, trial, output, **context)
        finally:
            if "workspace" in context and not self._store.local:  # a download: not kept twice
                shutil.rmtree(context["workspace"], ignore_errors=True)
        # The source's operation ids stay as they were, where its records were carried forward.
        operation_ids = list(source["operation_ids"] or []) + [
            i for scope in scored.scopes for i in scope.operation_ids
        ]
        row.update(Accounting.total(scored.judging).columns(), operation_ids=operation_ids or None)
        gauges = self._source_gauges.get((item.item_id, trial), [])
        kept = [_carried(score, source) for score in self._kept.get((item.item_id, trial), [])]
        return Finished(
            row, [*scored.rows, *kept, *gauges], [r for scope in scored.scopes for r in scope.records]
        )


def _carried(score: ScoreRow, item: dict[str, Any]) -> ScoreRow:
    """A kept scorer's source row as the rescore's: its judgement as it was, its spend zero (the
    rescore made no call for it), its references only to the records the rescore holds (those its
    item row keeps).

    Args:
        score: the source's score row.
        item: the item's source row, its `operation_ids` already cut to the carried records.
    """
    held = set(item["operation_ids"] or [])
    ids = [i for i in score["operation_ids"] or [] if i in held]
    return {
        **score,
        **dict.fromkeys(TOKEN_COLUMNS, 0),
        "cost_usd": 0.0,
        "cost_completeness": Completeness.COMPLETE.value,
        "cost_reasons": None,
        "operations": 0,
        "operation_ids": ids or None,
    }


def kept_context(store: Store, artifacts: list[str] | None) -> dict[str, Any]:
    """What a rescore's scorers get of the files the source attempt kept: file-reading scorers
    its exported `workspace` (a local folder: downloaded from object storage), trajectory-reading
    ones its `trajectory` (an http_agent's `trajectory.json`); neither when it kept none.

    Args:
        store: the store.
        artifacts: the attempt's `items.artifacts` (relative to `<store>/artifacts`).
    """
    kept = [path for path in artifacts or [] if path.endswith("/workspace")]
    context: dict[str, Any] = {"workspace": store.artifact_folder(kept[0])} if kept else {}
    trajectory = stored_trajectory(store, artifacts)
    if trajectory is not None:
        context["trajectory"] = trajectory
    return context


def stored_trajectory(store: Store, artifacts: list[str] | None) -> list[dict[str, Any]] | None:
    """The steps of the `trajectory.json` files an attempt kept (an http_agent's: one per harness
    run, several for a session), in order, so a rescore's scorers see the trajectory the original
    run's did; None when there is none to read.

    Args:
        store: the store.
        artifacts: the attempt's `items.artifacts` (relative to `<store>/artifacts`).
    """
    steps: list[dict[str, Any]] = []
    found = False
    for path in artifacts or []:
        if path.rsplit("/", 1)[-1] != "trajectory.json":
            continue
        try:
            document = json.loads(store.read_artifact(path))
        except (OSError, ValueError):
            continue  # deleted or damaged since: scored without it, as a target that kept none
        kept = document.get("steps") if isinstance(document, dict) else None
        if isinstance(kept, list):
            steps += kept
            found = True
    return steps if found else None
