"""Datasets: JSONL, CSV or Parquet rows mapped to items with stable ids.

`load_dataset(spec, spec_dir)` reads the file (or a Hugging Face dataset's files: `_hub.py`),
maps each row through the spec's field mapping and reports every bad row at once
(`DatasetError`, naming the line and the field).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]  # not in typeshed
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from assay.errors import DatasetError
from assay.spec.models import DatasetSpec

_MAX_PROBLEMS = 50


@dataclass(frozen=True, slots=True)
class Item:
    """One dataset row, mapped.

    Args:
        item_id: the dataset's id field, else a hash of the row's content; pairing key across runs.
        item_index: the row's position in the dataset (0-based).
        input: the mapped input field.
        expected: the mapped expected field, or None.
        annotations: the mapped annotation fields.
        fields: the whole row (prompt templates format over it).
        where: the row's place in its file, as problems name it (`line 3`, `row 3`).
        folder: the dataset file's folder (paths a row names are relative to it).
    """

    item_id: str
    item_index: int
    input: Any
    expected: Any
    annotations: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    # Where a row came from is no part of what it says: items from a JSONL and a CSV file compare equal.
    where: str | None = field(default=None, compare=False)
    folder: Path | None = field(default=None, compare=False)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text (and equal hashes)."""
    if c_make_encoder is None or isinstance(value, str):
        return _CANONICAL.encode(value)
    # What `_CANONICAL.encode` does, less its per-call set-up (a third of the time of hashing a
    # dataset's items): the same C encoder with the same settings, and its own cycle markers.
    return "".join(c_make_encoder({}, str, encode_basestring, None, ":", ",", True, False, True)(value, 0))


@dataclass(frozen=True, slots=True)
class _BadRow:
    """A row the reader could not parse; kept in place so every problem is reported in order."""

    problem: str


def _read_jsonl(path: Path) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    # utf-8-sig: a byte-order mark (some Windows tools write one) is not part of line 1's JSON;
    # text mode makes \r\n and \r line ends "\n", as iterating over the file would.
    with path.open(encoding="utf-8-sig") as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, start=1):
        if not line or line.isspace():  # a blank line (`isspace` is what `strip` strips)
            continue
        try:
            # pydantic's parser is ~4x faster than `json.loads` and reads a row to the same
            # values; what it refuses (a lone surrogate, nesting deeper than 200) `json.loads`
            # reads, or says what is wrong.
            row = from_json(line, cache_strings="keys")
        except ValueError:
            try:
                row = json.loads(line)
                # A lone surrogate escape (`"\ud800"`) parses but is no text: it could be neither
                # hashed into the run's identity nor stored.
                json.dumps(row, ensure_ascii=False).encode()
            except json.JSONDecodeError as exc:
                row = _BadRow(f"not valid JSON ({exc.msg}): {line.strip()[:80]!r}")
            except UnicodeEncodeError as exc:
                unpaired = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
                row = _BadRow(
                    f"holds an unpaired surrogate escape ({unpaired}), which is not text: write the "
                    "character itself, or its surrogate pair"
                )
        rows.append((f"line {number}", row))
    return rows


def _read_csv(path: Path) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        # Rows are labelled with the line they start on, counting the header as line 1, as an
        # editor shows them; a quoted field may span lines, so count what the reader consumed.
        header: list[str] | None = None
        start = 1
        try:
            for values in reader:
                where, start = f"line {start}", reader.line_num + 1
                if not values:
                    continue  # a blank line
                if header is None:
                    header = values
                    repeated = sorted({name for name in header if header.count(name) > 1})
                    if repeated:
                        # A repeated name would silently keep only the last column's value.
                        raise DatasetError(
                            f"{where}: repeated column name(s) in the header: {', '.join(map(repr, repeated))}",
                            source=str(path),
                        )
                elif len(values) != len(header):
                    rows.append((where, _BadRow(_ragged(header, values))))
                else:
                    rows.append((where, dict(zip(header, values, strict=True))))
        except csv.Error as exc:
            rows.append((f"line {start}", _BadRow(f"not valid CSV: {exc}")))
    return rows


def _ragged(header: list[str], values: list[str]) -> str:
    said = f"{len(values)} fields, the header has {len(header)}"
    if len(values) > len(header):
        return f"{said}: extra values {values[len(header) :]!r}"
    return f"{said}: no value for {', '.join(map(repr, header[len(values) :]))}"


def _read_parquet(path: Path) -> list[tuple[str, Any]]:
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except pl.exceptions.PolarsError as exc:  # e.g. ComputeError for a file that is not Parquet
        raise DatasetError(f"not a readable Parquet file: {exc}", source=str(path)) from None
    return [(f"row {n}", row) for n, row in enumerate(frame.to_dicts(), start=1)]


def _read_rows(path: Path) -> list[tuple[str, Any]]:
    """Rows with the label an error message should use for each ("line 3", "row 3")."""
    suffix = path.suffix.lower()
    readers = {".jsonl": _read_jsonl, ".ndjson": _read_jsonl, ".csv": _read_csv}
    readers |= {".parquet": _read_parquet, ".pq": _read_parquet}
    if suffix not in readers:
        raise DatasetError(
            f"dataset.path: unsupported dataset format {suffix or path.name!r}: use .jsonl, .csv or .parquet",
            source=str(path),
        )
    try:
        return readers[suffix](path)
    except UnicodeDecodeError as exc:
        raise DatasetError(
            f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r})", source=str(path)
        ) from None
    except OSError as exc:
        raise DatasetError(f"dataset.path: cannot read the file: {exc.strerror}", source=str(path)) from None


def _field_list(row: dict[str, Any]) -> str:
    names = [repr(name) for name in list(row)[:12]]
    more = ", ..." if len(row) > 12 else ""
    return f"the row has {', '.join(names)}{more}" if names else "the row is empty"


def _capped(problems: list[str]) -> list[str]:
    """At most `_MAX_PROBLEMS` lines, the last saying how many more were not shown."""
    if len(problems) <= _MAX_PROBLEMS:
        return problems
    return [*problems[:_MAX_PROBLEMS], f"... and {len(problems) - _MAX_PROBLEMS} more problems not shown"]


_LINE_PROBLEM = re.compile(r"^(line|row) (\d+): (.*)$", re.DOTALL)
_LINES_SHOWN = 5


def _collapsed(problems: list[str]) -> list[str]:
    """The same problem on many lines as one line with its count and the first few line numbers:
    `lines 1, 2, 3, 4, 5 and 35 more (40 rows): field 'question' (dataset.input) is missing`.
    Problems keep the order of their first line.

    Args:
        problems: one per row, each `line N: ...` (or `row N: ...`), or anything else (kept as is).
    """
    groups: dict[tuple[str, str], list[str]] = {}
    for problem in problems:
        match = _LINE_PROBLEM.match(problem)
        key = (match[1], match[3]) if match else ("", problem)
        groups.setdefault(key, []).append(match[2] if match else "")
    out = []
    for (unit, message), numbers in groups.items():
        if not unit:
            out.extend([message] * len(numbers))
        elif len(numbers) == 1:
            out.append(f"{unit} {numbers[0]}: {message}")
        else:
            shown = ", ".join(numbers[:_LINES_SHOWN])
            rest = f" and {len(numbers) - _LINES_SHOWN} more" if len(numbers) > _LINES_SHOWN else ""
            out.append(f"{unit}s {shown}{rest} ({len(numbers)} rows): {message}")
    return out


def load_items(spec: DatasetSpec, spec_dir: Path) -> list[Item]:
    """Read the dataset and map its rows to items (`load_dataset`'s items).

    Args:
        spec: the dataset part of the eval spec.
        spec_dir: the folder relative paths are resolved against (the spec's folder).
    """
    return load_dataset(spec, spec_dir)[1]


def load_dataset(spec: DatasetSpec, spec_dir: Path) -> tuple[DatasetSpec, list[Item]]:
    """Read the dataset and map its rows to items; returns the spec pinned to what was read (a
    Hugging Face dataset's `revision` is the commit it named) and the items.

    Args:
        spec: the dataset part of the eval spec.
        spec_dir: the folder relative paths are resolved against (the spec's folder).
    """
    if spec.hf is not None:
        from assay.spec._hub import HubDataset, hub_files

        hub = hub_files(HubDataset(spec.hf, spec.revision, spec.config, spec.split, spec.path))
        spec = spec.model_copy(update={"revision": hub.commit})
        source = f"hf://datasets/{spec.hf}@{hub.commit}"
        # A row's media paths are relative to the (first) data file, in the local snapshot.
        folder = hub.files[0].parent
        rows = [
            (f"{file.name} {where}" if len(hub.files) > 1 else where, row)
            for file in hub.files
            for where, row in _read_rows(file)
        ]
    else:
        assert spec.path is not None  # the spec names a file or a repository
        path = (spec_dir / spec.path).resolve()
        if not path.is_file():
            raise DatasetError(f"dataset.path: file not found: {spec.path!r} (looked in {path})")
        source, folder = str(path), path.parent
        rows = _read_rows(path)
    return spec, _items(spec, rows, source, folder)


def _items(spec: DatasetSpec, rows: list[tuple[str, Any]], source: str, folder: Path) -> list[Item]:
    if spec.limit is not None:
        rows = rows[: spec.limit]
    if not rows:
        raise DatasetError("the dataset has no rows", source=source)

    expected_required = "expected" in spec.model_fields_set and spec.expected is not None
    mapped = {f for f in (spec.id, spec.input, spec.expected) if f}
    problems: list[str] = []
    items: list[Item] = []
    seen_ids: dict[str, str] = {}
    hash_counts: dict[str, int] = {}

    for index, (where, row) in enumerate(rows):
        if not isinstance(row, dict):
            if isinstance(row, _BadRow):
                problems.append(f"{where}: {row.problem}")
            else:
                problems.append(f"{where}: expected a JSON object, got {type(row).__name__}")
            continue
        row_problems = []
        if spec.input not in row:
            row_problems.append(
                f"{where}: field {spec.input!r} (dataset.input) is missing; {_field_list(row)}"
            )
        if expected_required and spec.expected not in row:
            row_problems.append(
                f"{where}: field {spec.expected!r} (dataset.expected) is missing; {_field_list(row)}"
            )
        if spec.annotations is not None:
            row_problems += [
                f"{where}: field {name!r} (dataset.annotations) is missing; {_field_list(row)}"
                for name in spec.annotations
                if name not in row
            ]
        if spec.id is not None:
            raw_id = row.get(spec.id)
            item_id = str(raw_id)
            if raw_id is None or item_id == "":
                row_problems.append(f"{where}: field {spec.id!r} (dataset.id) is missing or empty")
        else:
            digest = hashlib.sha256(canonical_json(row).encode()).hexdigest()[:16]
            # Identical rows are distinct items: the second copy gets a suffix, stable by order.
            hash_counts[digest] = hash_counts.get(digest, 0) + 1
            item_id = digest if hash_counts[digest] == 1 else f"{digest}-{hash_counts[digest]}"
        if row_problems:
            problems += row_problems
            continue
        if item_id in seen_ids:
            problems.append(f"{where}: duplicate id {item_id!r} (dataset.id; first at {seen_ids[item_id]})")
            continue
        seen_ids[item_id] = where
        if spec.annotations is None:
            annotations = {k: v for k, v in row.items() if k not in mapped}
        else:
            annotations = {k: row[k] for k in spec.annotations}
        # Positional: a frozen dataclass's keyword call costs a third more, 10,000s of times.
        items.append(
            Item(
                item_id,
                index,
                row[spec.input],
                row.get(spec.expected) if spec.expected else None,
                annotations,
                row,
                where,
                folder,
            )
        )
    if problems:
        raise DatasetError(_capped(_collapsed(problems)), source=source)
    return items


def dataset_hash(items: list[Item]) -> str:
    """A hash of what the items say (ids, inputs, expectations, annotations), not of file bytes."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(
            (canonical_json([item.item_id, item.input, item.expected, item.annotations]) + "\n").encode()
        )
    return digest.hexdigest()
