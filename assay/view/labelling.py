"""The labelling page's data: a run's sample drawn as `assay labels sample` draws it (the same
function, seed and strategy, so the page and a task list written by the command hold the same
items), one task at a time with the labeller's current label of it (stale when the output
changed since), the scale's keys, the judge's agreement so far, and a posted label checked and
written through `assay.store.labels`. Nothing here knows about HTTP.
"""

from __future__ import annotations

import getpass
import math
import re
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from assay import _schema
from assay.analysis import labelling
from assay.analysis.judge_trust import agreement_report
from assay.errors import InputError
from assay.outcomes import ScorerOutcome
from assay.store import Store
from assay.store.labels import read_labels, run_labels, write_labels
from assay.view.items import item_page

# A scale of at most this many distinct judge scores is labelled with digit keys; a finer one by
# typing the value.
_KEYED_LEVELS = 9
_CACHED_SAMPLES = 8
_HASH = re.compile(r"[0-9a-f]{64}")
_samples: OrderedDict[tuple[Any, ...], list[dict[str, Any]]] = OrderedDict()


def _user() -> str:
    """The server's user name, the labeller when the page names none ("labeller" where the
    process has no name: a container's uid without a passwd entry)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "labeller"


class LabelQuery(BaseModel):
    """The labelling page's state, as its URL holds it.

    Args:
        scorer: the scorer whose outputs are labelled.
        n: the sample's size (`assay labels sample --n`).
        strategy: `random`, `stratified` or `uncertain` (`--strategy`).
        seed: the draw's seed (`--seed`).
        i: the task shown, from 0.
        blind: hide the judge's score, its explanation and the agreement figures.
        labeller: whose labels these are (default: the server's user name).
    """

    model_config = ConfigDict(extra="forbid")

    scorer: str
    n: int = Field(20, ge=1, le=100_000)
    strategy: str = "random"
    seed: int = 0
    i: int = Field(0, ge=0)
    blind: bool = False
    labeller: str = Field(default_factory=_user, min_length=1)

    def state(self, **changed: Any) -> dict[str, Any]:
        """The URL's parameters, with `changed` applied (`blind` only when set)."""
        values = self.model_dump() | changed
        if not values["blind"]:
            values.pop("blind")
        else:
            values["blind"] = "1"
        return values


def sample(store: Store, run_id: str, query: LabelQuery) -> list[dict[str, Any]]:
    """The run's sample for `query`'s scorer, size, strategy and seed, without the texts (the
    page reads the shown item's own). Kept per run revision (`_CACHED_SAMPLES`).

    Raises:
        RunNotFoundError: no such run.
        InputError: an unknown strategy, or no scores of the scorer.
    """
    record = store.read_run(run_id)
    key = (str(store.root), run_id, record["revision"], query.scorer, query.n, query.strategy, query.seed)
    if key in _samples:
        _samples.move_to_end(key)
        return _samples[key]
    tasks = labelling.sample_tasks(
        store, run_id, query.scorer, n=query.n, strategy=query.strategy, seed=query.seed
    )
    kept = [{k: v for k, v in t.items() if k not in ("input", "output_text")} for t in tasks]
    _samples[key] = kept
    while len(_samples) > _CACHED_SAMPLES:
        _samples.popitem(last=False)
    return kept


def keys_of(store: Store, run_id: str, scorer: str) -> list[dict[str, Any]]:
    """The label's keys: `1` pass and `0` fail for a binary scorer, digits from 1 for the judge's
    distinct scores of a few-level one (lowest first); none for a finer scale (the value is typed)."""
    scores = store.run_scores(run_id).filter(
        (pl.col("scorer") == scorer) & (pl.col("outcome") == ScorerOutcome.SCORED.value)
    )
    levels = sorted(scores["score"].drop_nulls().unique().to_list())
    if set(levels) <= {0.0, 1.0}:
        return [{"key": "1", "value": 1.0, "name": "pass"}, {"key": "0", "value": 0.0, "name": "fail"}]
    if len(levels) <= _KEYED_LEVELS:
        return [{"key": str(k), "value": v, "name": f"{v:g}"} for k, v in enumerate(levels, start=1)]
    return []


def label_page(store: Store, run_id: str, query: LabelQuery) -> dict[str, Any]:
    """What the labelling page shows for `query`: the task, its item, the labeller's label of it
    and how many of the sample they labelled, the keys, and (unless blind) the agreement so far.

    Raises:
        RunNotFoundError: no such run.
        InputError: a bad sample, or `i` past its end.
    """
    tasks = sample(store, run_id, query)
    if not tasks:
        raise InputError(f"the sample of run {run_id}'s {query.scorer!r} scores is empty")
    if query.i >= len(tasks):
        raise InputError(f"i: the sample has {len(tasks)} tasks, so i is at most {len(tasks) - 1}")
    mine = read_labels(store, run_id).filter(
        (pl.col("scorer") == query.scorer) & (pl.col("labeller") == query.labeller)
    )
    held = {(r["item_id"], r["trial"]): r for r in mine.to_dicts()}
    current = {(t["item_id"], t["trial"]): t["output_hash"] for t in tasks}
    done = sum(1 for k, r in held.items() if current.get(k) == r["output_hash"])
    task = tasks[query.i]
    label = held.get((task["item_id"], task["trial"]))
    shown = item_page(store, run_id, task["item_id"], task["trial"])
    return {
        "task": task,
        "tasks": len(tasks),
        "done": done,
        "label": label,
        "stale": label is not None and label["output_hash"] != task["output_hash"],
        "shown": shown,
        "judge": None
        if query.blind
        else next((s for s in shown["scores"] if s["scorer"] == query.scorer), None),
        "keys": keys_of(store, run_id, query.scorer),
        "agreement": None if query.blind else agreement_so_far(store, run_id, query.scorer),
    }


def agreement_so_far(store: Store, run_id: str, scorer: str) -> dict[str, Any] | None:
    """`assay agreement`'s report of the scorer over every current label (every labeller's);
    None before the first (where `assay agreement` says how to get labels)."""
    if run_labels(store, run_id).filter(pl.col("scorer") == scorer).is_empty():
        return None
    report = agreement_report(store, run_id, scorer)
    return report if report["n_labelled"] else None


def record_label(store: Store, run_id: str, query: LabelQuery, form: dict[str, str]) -> int:
    """Write the label `form` gives of the sample's task `query.i`: its value, note and the hash
    of the output the page showed; returns the label's revision.

    Raises:
        InputError: a value not in [0, 1], a task not in the sample, or an output that changed
            since the page showed it (its hash differs: reload, and label what is there now).
    """
    tasks = sample(store, run_id, query)
    if query.i >= len(tasks):
        raise InputError(f"i: the sample has {len(tasks)} tasks, so i is at most {len(tasks) - 1}")
    task = tasks[query.i]
    problems = []
    if form.get("item_id") != task["item_id"] or form.get("trial") != str(task["trial"]):
        problems.append(
            f"item_id, trial: task {query.i} of the sample is {task['item_id']!r} trial {task['trial']}"
        )
    try:
        value = float(form.get("value", ""))
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        problems.append(f"value {form.get('value')!r} is not a number in [0, 1]")
    shown = form.get("output_hash", "")
    if not _HASH.fullmatch(shown):
        problems.append("output_hash: the sha256 of the output shown is missing")
    elif shown != task["output_hash"]:
        problems.append("output_hash: the item's output changed since the page showed it; reload it")
    if problems:
        raise InputError(problems)
    note = form.get("note", "").strip()
    row: _schema.LabelRow = {
        "item_id": task["item_id"],
        "trial": task["trial"],
        "scorer": query.scorer,
        "value": value,
        "labeller": query.labeller,
        "labelled_at": datetime.now(UTC),
        "note": note or None,
        "output_hash": shown,
        "inclusion_probability": task["inclusion_probability"],
    }
    return write_labels(store, run_id, [row])
