"""Captured model requests as JSONL: one `RequestRecord` per line, written and checked here.

A record is one moment of one model call: its `start`, each HTTP `attempt`, its `end`. The
capture module builds records with `RequestRecord` and writes them with `encode` / `write_jsonl`;
`validate_jsonl` and `read_jsonl` check a file and stop at the first bad line, naming it.

The file is the seed's (@axlsdk/eval's) request sidecar v1, an interchange format: a file its
`validateRequestSidecar` accepts is accepted here, and one it refuses is refused at the same line
number. Its contract is small: each non-blank line a JSON object with `v` = 1, a non-empty
`operationId` and a `phase` of start | attempt | end; blank lines are skipped anywhere, other
fields are free. Lines come in two spellings:

- v1 (the seed's): the id is `operationId`. Only the contract above is checked. The fields Assay
  knows under their v1 names (`V1_NAMES`: `itemId`, `httpStatus`, `inputTokens`…) are read into
  the record where their values fit; every other field (and one whose value does not fit) is kept
  as it is, under its own name, and written back out.
- Assay's: the id is `operation_id` (what `assay requests export` writes by default; the seed
  refuses such a line). Every field is checked, and an unknown one is refused, naming it: Assay
  wrote the line, so a stray name is a bug worth showing.

Decisions a reader of a file can rely on:

- One compact JSON object per line, UTF-8, keys in a fixed order: the columns of the store's
  `requests` dataset (`assay._schema.REQUESTS`), `v`, `operation_id`, `phase` first (with
  `v1=True`, under their v1 names), then any kept unknown fields. A field that is None is left
  out; reading fills it back.
- U+0085, U+2028 and U+2029 are written escaped, so no tool that splits lines on them (Python's
  `str.splitlines`, JavaScript) sees a record broken in two.
- NaN and Infinity are not JSON: `encode` refuses them and the reader reports them.
- An empty file (or one holding only blank lines) is valid and holds 0 records: a run that made
  no model call captured nothing. A blank line (whitespace as JavaScript's `trim` sees it) is
  skipped wherever it is, and, as in the seed, not counted: "line N" is the N-th non-blank line,
  and a message adds the file's own line number when the two differ.
- A file is at most `MAX_FILE_BYTES`, a line at most `MAX_LINE_BYTES` (without its line ending).
  `encode` refuses a record whose line would be longer; keeping the whole file under its limit
  (truncating `request` / `response`, setting `truncated` and `bytes`) is the writer's job.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import (
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from assay._schema._requests import VERSION, RequestColumns
from assay.errors import InputError
from assay.outcomes import RequestPhase

PHASES: tuple[str, ...] = tuple(phase.value for phase in RequestPhase)
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024

_EXPECTED_PHASES = ", ".join(json.dumps(phase) for phase in PHASES)
_SHOWN_CHARS = 80  # how much of a bad value or line a message quotes
# Characters json.dumps leaves raw with ensure_ascii=False that some line splitters break on.
_LINE_BREAKERS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}

# What JavaScript's `String.prototype.trim` removes: a line of only these is blank to the seed.
_JS_WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)
# Validation context under which a record keeps fields it does not know (read from a v1 line).
_KEEP_UNKNOWN = "keep_unknown"
V1_ID = "operationId"


class RequestRecord(RequestColumns):
    """One captured moment of one model call: a row of the store's `requests` dataset.

    The fields are the columns of `requests`, defined once with their meanings and the values
    they take in `assay._schema.RequestColumns`; here how a JSONL line holds them: `started_at`
    is an ISO-8601 timestamp, and `request` / `response` are JSON values (dicts with string keys,
    lists, str, numbers, bools, None; no tuples), not JSON text.

    Validation is strict: no "3" for 3, no true for 1 (an int is accepted where a float is due);
    `phase`, `kind`, `outcome` and `finish_reason` must be words of `RequestPhase`, `SpendKind`,
    `RequestOutcome` and `FinishReason`. Unknown fields are refused, so a misspelt name is caught where the record
    is built; only a record read from a v1 line keeps the fields it does not know (the file's
    reader validates it with a context that allows them), and writes them back out.
    """

    model_config = ConfigDict(strict=True, extra="allow", validate_assignment=True)

    # Fields of a v1 line named as one of Assay's whose value does not fit it: written back as read.
    _kept: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and not (info.context or {}).get(_KEEP_UNKNOWN):
            unknown = [name for name in data if name not in cls.model_fields]
            if unknown:
                raise ValueError("; ".join(_unknown_field(name) for name in unknown))
        return data

    @field_validator("v", mode="before")
    @classmethod
    def _v_is_the_number_1(cls, value: Any) -> Any:
        # Literal[1] alone takes True, which is equal to 1 in Python but not in a file. 1.0 is 1
        # to JavaScript's JSON.parse (and so to the seed): taken, and written back as 1.
        if type(value) is float and value == VERSION:
            return VERSION
        if type(value) is not int:
            raise ValueError(f"must be the integer {VERSION}")
        return value

    @field_validator("started_at")
    @classmethod
    def _started_at_is_iso(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(
                    "must be an ISO-8601 timestamp, e.g. 2025-01-31T12:00:00.000+00:00"
                ) from None
        return value


# Assay's field -> its name in a v1 line, where the two differ: the seed's `operationId`, its
# usage names for tokens, and camelCase for the rest. A field not listed keeps its name.
V1_NAMES: dict[str, str] = {
    "operation_id": V1_ID,
    "item_id": "itemId",
    "http_status": "httpStatus",
    "started_at": "startedAt",
    "wire_ms": "wireMs",
    "retry_ms": "retryMs",
    "total_ms": "totalMs",
    "tokens_input": "inputTokens",
    "tokens_output": "outputTokens",
    "cost_usd": "costUsd",
}
_FROM_V1 = {v1: name for name, v1 in V1_NAMES.items()}


def encode(record: RequestRecord, *, v1: bool = False) -> str:
    """The record as one compact JSON line, without the newline.

    Args:
        record: the record to write.
        v1: write its fields under their v1 names (`V1_NAMES`), as the seed spells them.

    Raises:
        ValueError: the record holds NaN or Infinity, or its line would be longer than
            `MAX_LINE_BYTES` (truncate `request` / `response` first).
    """
    data = {name: value for name, value in record.model_dump().items() if value is not None}
    data.update(record._kept)
    if v1:
        data = {V1_NAMES.get(name, name): value for name, value in data.items()}
    try:
        line = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise ValueError(f"record {record.operation_id!r} ({record.phase}): {exc}") from None
    for char, escaped in _LINE_BREAKERS.items():
        if char in line:
            line = line.replace(char, escaped)
    size = len(line.encode("utf-8"))
    if size > MAX_LINE_BYTES:
        raise ValueError(
            f"record {record.operation_id!r} ({record.phase}) encodes to {size:,} bytes, over the "
            f"{MAX_LINE_BYTES:,}-byte line limit: truncate its request or response"
        )
    return line


def write_jsonl(records: Iterable[RequestRecord | dict[str, Any]], out: TextIO, *, v1: bool = False) -> int:
    """Write one line per record and return how many were written.

    Every record is validated and encoded before the first line is written, so a bad record
    leaves `out` untouched.

    Args:
        records: records, or dicts of their fields (validated as `RequestRecord`).
        out: a text stream open for writing (UTF-8, if it is a file).
        v1: write the seed's field names (`V1_NAMES`).

    Raises:
        pydantic.ValidationError: a dict is not a valid record.
        ValueError: a record cannot be encoded (see `encode`).
    """
    lines = [
        encode(record if isinstance(record, RequestRecord) else RequestRecord.model_validate(record), v1=v1)
        for record in records
    ]
    out.write("".join(line + "\n" for line in lines))
    return len(lines)


class _BadFile(Exception):
    """The first problem in a file, and how many records came before it."""

    def __init__(self, valid: int, message: str) -> None:
        super().__init__(message)
        self.valid = valid
        self.message = message


def validate_jsonl(path: Path) -> tuple[int, str | None]:
    """Check a captured-requests file, stopping at the first problem.

    Args:
        path: the JSONL file.

    Returns:
        `(records, None)` when the file is good; else `(records valid before the problem,
        message)`, the message starting `line N: ` (1-based) when a line is at fault.
    """
    count = 0
    try:
        for _ in _records(Path(path)):
            count += 1
    except _BadFile as bad:
        return bad.valid, bad.message
    return count, None


def read_jsonl(path: Path | str) -> Iterator[RequestRecord]:
    """The file's records, in order. The whole file is checked before this returns, so a caller
    never acts on part of a bad file.

    Args:
        path: the JSONL file.

    Raises:
        InputError: the file is missing, too big, or has a bad line (the message names it).
    """
    try:
        records = list(_records(Path(path)))
    except _BadFile as bad:
        raise InputError(bad.message, source=str(path)) from None
    return iter(records)


def _records(path: Path) -> Iterator[RequestRecord]:
    """Each record in the file; raises `_BadFile` at the first problem."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise _BadFile(0, "file not found") from None
    except IsADirectoryError:
        raise _BadFile(0, "not a file but a directory") from None
    except OSError as exc:
        raise _BadFile(0, f"cannot read the file: {exc.strerror or exc}") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise _BadFile(0, f"the file is {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte (16 MiB) limit")
        count = 0
        number = 0  # non-blank lines, as the seed counts them
        physical = 0  # the file's lines
        consumed = 0
        while True:
            try:
                # The limit bounds memory even for a file that grows while it is read.
                raw = handle.readline(MAX_LINE_BYTES + 3)
            except OSError as exc:
                raise _BadFile(count, f"cannot read the file: {exc.strerror or exc}") from None
            if not raw:
                return
            physical += 1
            consumed += len(raw)
            if consumed > MAX_FILE_BYTES:
                raise _BadFile(
                    count, f"the file grew past the {MAX_FILE_BYTES:,}-byte (16 MiB) limit while read"
                )
            length = len(raw) - (raw.endswith(b"\n") + raw.endswith(b"\r\n"))
            too_long = length > MAX_LINE_BYTES
            if not too_long and _blank(raw):
                continue
            number += 1
            where = f"line {number}" if number == physical else f"line {number} (file line {physical})"
            if too_long:
                if not raw.endswith(b"\n"):
                    length += _rest_of_line(handle)
                raise _BadFile(
                    count,
                    f"{where}: {length:,} bytes, over the {MAX_LINE_BYTES:,}-byte (4 MiB) line limit",
                )
            problem, record = _parse_line(raw, first=physical == 1)
            if problem is not None:
                raise _BadFile(count, f"{where}: {problem}")
            count += 1
            yield record


def _blank(raw: bytes) -> bool:
    """Whether a line is blank to the seed (empty once JavaScript's `trim` has run)."""
    if not raw.strip():
        return True
    try:
        return not raw.decode("utf-8").strip(_JS_WHITESPACE)
    except UnicodeDecodeError:
        return False


def _rest_of_line(handle: Any) -> int:
    """Read to the end of the current line (in pieces) and return how many bytes that was."""
    extra = 0
    while chunk := handle.readline(1 << 20):
        if chunk.endswith(b"\n"):
            return extra + len(chunk) - 1 - chunk.endswith(b"\r\n")
        extra += len(chunk)
    return extra


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not a JSON value")


# Made once: json.loads with an argument builds a decoder per call.
_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def _parse_line(raw: bytes, *, first: bool) -> tuple[str | None, Any]:
    """(None, record) for a good line, else (the problem, None)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"not UTF-8 text (byte {exc.start + 1} of the line is {raw[exc.start : exc.start + 1]!r})",
            None,
        )
    if first and text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark some editors add is not part of line 1's JSON
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno}): {_shown(text.strip())}", None
    except ValueError as exc:  # NaN / Infinity, or an integer with too many digits
        return f"not valid JSON ({exc})", None
    except RecursionError:
        return "not valid JSON (nested too deeply)", None
    del text
    if not isinstance(value, dict):
        return f"expected a JSON object, got {_json_kind(value)}", None
    if "v" not in value:
        return f"field 'v' is missing (expected {VERSION})", None
    v = value["v"]
    if type(v) not in (int, float) or v != VERSION:
        return f"unsupported version: v is {_shown_value(v)}, expected {VERSION}", None
    v1 = V1_ID in value
    id_name = V1_ID if v1 else "operation_id"
    if id_name not in value:
        return f"field {V1_ID!r} (or Assay's 'operation_id') is missing", None
    operation_id = value[id_name]
    if not isinstance(operation_id, str) or not operation_id:
        got = "an empty string" if operation_id == "" else _shown_value(operation_id)
        return f"field {id_name!r} must be a non-empty string, got {got}", None
    if "phase" not in value:
        return f"field 'phase' is missing (expected one of {_EXPECTED_PHASES})", None
    if not isinstance(value["phase"], str) or value["phase"] not in PHASES:
        return (
            f"phase is {_shown_value(value['phase'])}, expected one of {_EXPECTED_PHASES}",
            None,
        )
    if v1:
        return None, _from_v1(value)
    unknown = [_unknown_field(name) for name in value if name not in RequestRecord.model_fields]
    try:
        record = RequestRecord.model_validate(value, context={_KEEP_UNKNOWN: True})
    except ValidationError as exc:
        return "; ".join([*(_field_problem(error) for error in exc.errors()), *unknown]), None
    if unknown:
        return "; ".join(unknown), None
    return None, record


def _from_v1(value: dict[str, Any]) -> RequestRecord:
    """A v1 line's record: the fields Assay knows, under their v1 names, read where their values
    fit; everything else kept as it is. The seed's contract (v, id, phase) is already checked."""
    renamed: dict[str, Any] = {}
    original: dict[str, str] = {}
    for name, field in value.items():
        if name == "operation_id":
            continue  # the v1 id wins: the seed reads that one
        ours = _FROM_V1.get(name, name)
        renamed[ours], original[ours] = field, name
    kept: dict[str, Any] = {}
    while True:
        try:
            record = RequestRecord.model_validate(renamed, context={_KEEP_UNKNOWN: True})
        except ValidationError as exc:
            # A known field whose value does not fit Assay's record is kept as it was: the seed
            # does not check it, so neither may the reader refuse it. Under a v1 name of its own it
            # is an unknown field; under a name Assay's record has, it is set aside whole.
            for error in exc.errors():
                ours = str(error["loc"][0])
                if original[ours] != ours:
                    renamed[original[ours]] = renamed.pop(ours)
                else:
                    kept[ours] = renamed.pop(ours)
            continue
        record._kept = kept
        return record


def _field_problem(error: Any) -> str:
    """One pydantic error as `field 'name': what is wrong (got value)`."""
    name = ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        return f"field {name!r} is missing"
    message = error["msg"].removeprefix("Value error, ")
    return f"field {name!r}: {message} (got {_shown_value(error['input'])})"


def _unknown_field(name: str) -> str:
    """`unknown field 'modle' (did you mean 'model'?)`."""
    close = difflib.get_close_matches(name, RequestRecord.model_fields, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown field {name!r}{hint}"


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _shown_value(value: Any) -> str:
    return _shown(json.dumps(value, ensure_ascii=False))


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
