"""What a run with a sequential compare (`compare_to`) needs from planning: its baseline checked,
its items in a seeded random order, its settings on the record — and the hook execution calls
after each committed batch (`CommitMonitor`; `assay.analysis.monitor` implements it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from assay._lazy import lazy_module
from assay.errors import InputError, RunNotFoundError, SpecError
from assay.outcomes import RunStatus, ScorerOutcome
from assay.run.identity import Identity
from assay.spec import EvalSpec
from assay.spec.dataset import Item
from assay.spec.models import CompareTo
from assay.store import Store

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

_RUN_ID = re.compile(r"[\w.\-]+")


class CommitMonitor(Protocol):
    """Told of every committed batch; says when the run should admit no more items."""

    stop: bool

    def committed(self, items: list[dict[str, Any]], scores: list[dict[str, Any]]) -> None: ...


def seeded_key(seed: int, item_id: str, trial: int) -> str:
    """An (item, trial)'s place in a sequential run's order: a hash of the run's seed and the pair,
    so the order is random, fixed by the seed, and recomputable from stored rows alone."""
    return hashlib.sha256(f"{seed}\x00{item_id}\x00{trial}".encode()).hexdigest()


def seeded_order(work: list[tuple[int, int]], items: list[Item], seed: int) -> list[tuple[int, int]]:
    """The work (item position, trial) in the seeded random order of `seeded_key`."""
    return sorted(work, key=lambda w: seeded_key(seed, items[w[0]].item_id, w[1]))


def with_compare_to(
    spec: EvalSpec,
    baseline: str | None,
    stored: Callable[[str], Mapping[str, Any] | None],
    run_id: str | None,
) -> EvalSpec:
    """The spec with its sequential compare: `--compare-to BASELINE` over the spec's own
    `compare_to` (or its defaults), or — resuming a run started with `--compare-to` — the
    settings its record keeps.

    Args:
        spec: the spec.
        baseline: `--compare-to`'s run id, if given.
        stored: a run's record as stored, or None (read only when needed).
        run_id: the run being opened, if its id is given.
    """
    if baseline is not None:
        if not _RUN_ID.fullmatch(baseline):
            raise SpecError(f"--compare-to {baseline!r}: expected a run id")
        settings = (spec.compare_to or CompareTo(baseline=baseline)).model_copy(update={"baseline": baseline})
        return _with(spec, settings, "--compare-to")
    if spec.compare_to is not None and spec.compare_to.baseline is not None:
        return spec
    record = stored(run_id) if run_id is not None else None
    if record is None or not record.get("compare_baseline"):
        if spec.compare_to is not None:
            raise SpecError(
                "compare_to.baseline: no baseline run: name it in the spec or with `--compare-to RUN_ID`"
            )
        return spec
    if spec.compare_to is not None:  # the spec's settings, the baseline the run was started with
        settings = spec.compare_to.model_copy(update={"baseline": record["compare_baseline"]})
    else:
        settings = CompareTo(
            baseline=record["compare_baseline"],
            scorer=record["compare_scorer"],
            threshold=record["compare_threshold"],
            alpha=record["compare_alpha"],
            stop=record["compare_stop"],
        )
    return _with(spec, settings, f"run {run_id}'s compare_to")


def _with(spec: EvalSpec, settings: CompareTo, source: str) -> EvalSpec:
    """The spec with these settings, checked as the spec's own `compare_to` would be."""
    updated = spec.model_copy(update={"compare_to": settings})
    try:
        updated._compare_to_names_a_scorer()
    except ValueError as exc:
        raise SpecError(f"{source}: {exc}") from None
    return updated


def check_baseline(spec: EvalSpec, store: Store, identity: Identity) -> None:
    """The baseline must be a finished run of the same dataset that scored the compared scorer.

    Raises:
        InputError: naming `compare_to.baseline` and what is wrong.
    """
    assert spec.compare_to is not None and spec.compare_to.baseline is not None  # `with_compare_to`'s
    baseline, scorer = spec.compare_to.baseline, spec.compared_scorer
    try:
        record = store.read_run(baseline)
    except RunNotFoundError:
        raise InputError(f"compare_to.baseline: no run {baseline!r} in store {str(store.root)!r}") from None
    if record["status"] == RunStatus.RUNNING:
        raise InputError(f"compare_to.baseline: run {baseline} has not finished (status running)")
    if record["dataset_hash"] != identity.dataset:
        raise InputError(
            f"compare_to.baseline: run {baseline} is of another dataset ({record['dataset_hash']})"
        )
    scored = store.run_scores(baseline).filter(
        (pl.col("scorer") == scorer) & (pl.col("outcome") == ScorerOutcome.SCORED)
    )
    if scored.is_empty():
        raise InputError(f"compare_to.scorer: baseline run {baseline} has no {scorer!r} scores")


def compare_columns(spec: EvalSpec) -> dict[str, Any]:
    """The run record's `compare_*` settings columns and its execution order's description."""
    compare = spec.compare_to
    if compare is None:
        return {}
    return {
        "execution_order": f"seeded random order (seed {spec.seed}), for compare_to",
        "compare_baseline": compare.baseline,
        "compare_scorer": spec.compared_scorer,
        "compare_threshold": compare.threshold,
        "compare_alpha": compare.alpha,
        "compare_stop": compare.stop,
    }
