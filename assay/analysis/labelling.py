"""People's labels in and out: a label file read and checked (`assay labels import`), a run's
labels as rows (`export`), and which items to label next (`sample`).

A label file is CSV (a header row), JSONL (an object a line) or Parquet, with the columns
`item_id`, `value` and, unless the command line gives them, `run_id`, `scorer` and `labeller`;
optional `trial` (default 0), `labelled_at` (ISO 8601; default now), `note`, `output_hash`
(default: the run's current output, which the labeller is taken to have judged) and
`inclusion_probability`. A task list that `sample` wrote is such a file once its `value` column
is filled; its other columns (`judge_score`, `input`, `output_text`) are read and ignored, and so is an
export's `revision`. Every
bad row is named by its line (the row, for Parquet) and nothing is written while any is bad.

Sampling strategies, each seeded and reproducible, each recording every pick's inclusion
probability (`inclusion_probability`), which the corrected estimates weight by:

* `random`: n items uniformly, without replacement (chance n / N each);
* `stratified`: the items grouped by the judge's score (its distinct values, or five quantile
  bins of a continuous score), n shared equally among the groups (chance n_h / N_h in each);
* `uncertain`: each item drawn independently with a chance proportional to the judge's
  uncertainty `1 - |2 f - 1|` plus its mean (so every item keeps a chance), scaled to n expected
  picks and capped at 1 (a Poisson sample, as Zrnic & Candès 2024 require). Label every task,
  or the weighted estimate no longer holds.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from assay import _schema
from assay._files import write_atomic
from assay.errors import InputError
from assay.outcomes import RowKind
from assay.store import Store, current_items
from assay.store.labels import current_hashes, read_labels

STRATEGIES = ("random", "stratified", "uncertain")
# Read and ignored: a task list's context for the labeller, an export's revision.
_TASK_EXTRAS = frozenset({"judge_score", "input", "output_text", "revision"})
_COLUMNS = frozenset(_schema.LABELS.names) - {"revision"} | {"run_id"}
_BINS = 5


def read_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """A label file's rows, each with where it is (`line N` / `row N`).

    Raises:
        InputError: the file is missing, of an unknown kind, or not readable as its kind.
    """
    if not path.is_file():
        raise InputError(f"no file {str(path)!r}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as handle:
                return [(f"line {n}", dict(row)) for n, row in enumerate(csv.DictReader(handle), start=2)]
        if suffix in (".jsonl", ".ndjson"):
            rows = []
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"line {n}: not JSON ({exc.msg})", source=str(path)) from None
                if not isinstance(row, dict):
                    raise InputError(f"line {n}: not a JSON object", source=str(path))
                rows.append((f"line {n}", row))
            return rows
        if suffix == ".parquet":
            import polars as pl

            frame = pl.read_parquet(path)
            return [(f"row {n}", row) for n, row in enumerate(frame.to_dicts(), start=1)]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"cannot read it: {exc}", source=str(path)) from None
    raise InputError(
        f"a label file is .csv, .jsonl or .parquet, not {suffix or 'no suffix'!r}", source=str(path)
    )


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or _blank(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class _Run:
    """What a label is checked against: a run's current items (their output hashes) and scorers."""

    def __init__(self, store: Store, run_id: str) -> None:
        store.read_run(run_id)
        self.hashes = current_hashes(store, run_id)
        self.scorers = set(store.run_scores(run_id)["scorer"].to_list())


def parse_labels(
    store: Store,
    path: Path,
    *,
    run_id: str | None = None,
    scorer: str | None = None,
    labeller: str | None = None,
) -> dict[str, list[_schema.LabelRow]]:
    """A label file's rows checked against the store, grouped by run: what `write_labels` takes.

    Raises:
        InputError: every problem, each naming its line and column; nothing is returned then.
    """
    rows = read_rows(path)
    if not rows:
        raise InputError("no labels in it", source=str(path))
    problems: list[str] = []
    runs: dict[str, _Run | None] = {}
    out: dict[str, list[_schema.LabelRow]] = {}
    now = datetime.now(UTC)
    for where, row in rows:
        unknown = sorted(set(row) - _COLUMNS - _TASK_EXTRAS)
        if unknown:
            problems.append(f"{where}: unknown column {', '.join(map(repr, unknown))}")
            continue
        found: list[str] = []
        rid = str(row["run_id"]) if not _blank(row.get("run_id")) else run_id
        name = str(row["scorer"]) if not _blank(row.get("scorer")) else scorer
        who = str(row["labeller"]) if not _blank(row.get("labeller")) else labeller
        item = row.get("item_id")
        for column, value in (("run_id", rid), ("scorer", name), ("labeller", who), ("item_id", item)):
            if _blank(value):
                found.append(f"{where}: {column} is missing")
        value = _number(row.get("value"))
        if value is None or not 0.0 <= value <= 1.0:
            found.append(f"{where}: value {row.get('value')!r} is not a number in [0, 1]")
        trial_text = row.get("trial")
        trial = 0 if _blank(trial_text) else _number(trial_text)
        if trial is None or trial < 0 or trial != int(trial):
            found.append(f"{where}: trial {trial_text!r} is not a whole number >= 0")
        chance_text = row.get("inclusion_probability")
        chance = None if _blank(chance_text) else _number(chance_text)
        if not _blank(chance_text) and (chance is None or not 0.0 < chance <= 1.0):
            found.append(f"{where}: inclusion_probability {chance_text!r} is not a number in (0, 1]")
        when = _time(row.get("labelled_at"), now)
        if when is None:
            found.append(f"{where}: labelled_at {row.get('labelled_at')!r} is not an ISO 8601 time")
        if not found and rid is not None:
            if rid not in runs:
                try:
                    runs[rid] = _Run(store, rid)
                except InputError:
                    runs[rid] = None
            run = runs[rid]
            if run is None:
                found.append(f"{where}: no run {rid!r} in the store")
            elif name not in run.scorers:
                found.append(f"{where}: run {rid!r} has no scorer {name!r}")
            elif (str(item), int(trial or 0)) not in run.hashes:
                found.append(f"{where}: run {rid!r} has no item {item!r} trial {int(trial or 0)}")
        if found:
            problems.extend(found)
            continue
        assert rid is not None and run is not None
        key = (str(item), int(trial or 0))
        given = row.get("output_hash")
        out.setdefault(rid, []).append(
            {
                "item_id": key[0],
                "trial": key[1],
                "scorer": str(name),
                "value": float(value or 0.0),
                "labeller": str(who),
                "labelled_at": when or now,
                "note": None if _blank(row.get("note")) else str(row["note"]),
                "output_hash": run.hashes[key] if _blank(given) else str(given),
                "inclusion_probability": chance,
            }
        )
    if problems:
        raise InputError(problems, source=str(path))
    return out


def _time(value: Any, default: datetime) -> datetime | None:
    if _blank(value):
        return default
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def export_rows(store: Store, run_id: str) -> list[dict[str, Any]]:
    """A run's current labels, one JSON-able dict each (times as ISO text)."""
    store.read_run(run_id)
    frame = read_labels(store, run_id)
    return [
        {**row, "labelled_at": row["labelled_at"].isoformat() if row["labelled_at"] else None}
        for row in frame.to_dicts()
    ]


def _uncertain_chances(scores: np.ndarray, n: int) -> np.ndarray:
    """Each item's chance under `uncertain`: proportional to `1 - |2 f - 1|` plus its mean (all
    equal for a pass/fail judge), summing to n, capped at 1 with what the capped items leave
    shared among the rest."""
    uncertainty = 1.0 - np.abs(2.0 * scores - 1.0)
    weight = uncertainty + (uncertainty.mean() or 1.0)
    chance = np.zeros(scores.size)
    free = np.ones(scores.size, dtype=bool)
    while free.any():
        chance[free] = (n - np.sum(~free)) * weight[free] / weight[free].sum()
        over = free & (chance >= 1.0)
        if not over.any():
            break
        chance[over] = 1.0
        free &= ~over
    return chance


def strata(scores: np.ndarray) -> np.ndarray:
    """Each item's stratum by the judge's score: its distinct value (up to five), else its
    quantile bin of five."""
    levels = np.unique(scores)
    if levels.size <= _BINS:
        return np.searchsorted(levels, scores)
    edges = np.quantile(scores, np.linspace(0, 1, _BINS + 1)[1:-1])
    return np.searchsorted(edges, scores, side="right")


def sample_tasks(
    store: Store, run_id: str, scorer: str, *, n: int, strategy: str = "random", seed: int = 0
) -> list[dict[str, Any]]:
    """The items to label next: a task list, one dict per pick, in item order.

    Each task has `run_id`, `item_id`, `trial`, `scorer`, `judge_score`, `inclusion_probability`,
    `output_hash`, `input`, `output_text`, and empty `value` and `labeller` for the labeller.

    Raises:
        InputError: an unknown strategy, n < 1, or a run without scores of `scorer`.
    """
    import polars as pl

    if strategy not in STRATEGIES:
        raise InputError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if n < 1:
        raise InputError(f"--n must be at least 1, not {n}")
    store.read_run(run_id)
    keys = ["item_id", "trial"]
    scores = (
        store.scan_run(run_id, "scores")
        .filter(
            (pl.col("kind") == RowKind.SCORE.value)
            & (pl.col("scorer") == scorer)
            & pl.col("score").is_not_null()
        )
        .select(*keys, "score")
    )
    # The sample is drawn over keys and scores alone; only the picked rows' texts and outputs are
    # read (every input and output of a million items was ~1.7 GB).
    current = current_items(store.scan_run(run_id, "items").select(*keys, "retry")).select(keys)
    frame = scores.join(current, on=keys).sort(keys).collect()
    if frame.is_empty():
        raise InputError(f"run {run_id!r} has no scores of scorer {scorer!r}")
    values = frame["score"].to_numpy().astype(np.float64)
    rng = np.random.default_rng(seed)
    size = values.size
    if strategy == "random":
        picked = np.sort(rng.choice(size, size=min(n, size), replace=False))
        chance = np.full(size, min(n, size) / size)
    elif strategy == "stratified":
        groups = strata(values)
        labels = np.unique(groups)
        share = _allocation(np.array([np.sum(groups == g) for g in labels]), min(n, size))
        chance = np.zeros(size)
        chosen = []
        for g, take in zip(labels, share, strict=True):
            members = np.flatnonzero(groups == g)
            chosen.extend(rng.choice(members, size=take, replace=False).tolist())
            chance[members] = take / members.size
        picked = np.sort(np.array(chosen, dtype=np.int64))
    else:
        chance = _uncertain_chances(values, min(n, size))
        picked = np.flatnonzero(rng.random(size) < chance)
    tasks = frame[picked].with_columns(pl.Series("inclusion_probability", chance[picked], dtype=pl.Float64))
    texts = (
        current_items(store.scan_run(run_id, "items").select(*keys, "retry", "input", "output_text"))
        .join(tasks.lazy().select(keys), on=keys, how="semi")
        .select(*keys, "input", "output_text")
        .collect()
    )
    hashes = current_hashes(store, run_id, tasks.select(keys))
    rows = tasks.join(texts, on=keys, how="left", maintain_order="left").to_dicts()
    return [
        {
            "run_id": run_id,
            "item_id": row["item_id"],
            "trial": row["trial"],
            "scorer": scorer,
            "judge_score": row["score"],
            "inclusion_probability": row["inclusion_probability"],
            "output_hash": hashes[(row["item_id"], row["trial"])],
            "input": row["input"],
            "output_text": row["output_text"],
            "value": None,
            "labeller": None,
        }
        for row in rows
    ]


def _allocation(sizes: np.ndarray, n: int) -> list[int]:
    """n shared as equally as the groups' sizes allow (what a small group cannot take goes to the others)."""
    share = np.zeros(sizes.size, dtype=np.int64)
    left = n
    while left > 0:
        open_ = np.flatnonzero(share < sizes)
        if open_.size == 0:
            break
        each = max(1, left // open_.size)
        for g in open_:
            add = min(each, int(sizes[g] - share[g]), left)
            share[g] += add
            left -= add
            if left == 0:
                break
    return share.tolist()


def write_tasks(tasks: list[dict[str, Any]], out: Path | None) -> str:
    """A task list as CSV (`out` ending .csv) or JSONL (otherwise, and on stdout): the text,
    written to `out` when given."""
    if out is not None and out.suffix.lower() == ".csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(tasks[0]) if tasks else ["run_id"])
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in t.items()} for t in tasks)
        text = buffer.getvalue()
    else:
        text = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks)
    if out is not None:
        write_atomic(out, text)
    return text
