"""Captured model requests as JSONL: one `RequestRecord` per line, written and checked here.

A record is one moment of one model call: its `start`, each HTTP `attempt`, its `end`. The
capture module builds records with `RequestRecord` and writes them with `encode` / `write_jsonl`;
`validate_jsonl` and `read_jsonl` check a file and stop at the first bad line, naming it.

Decisions a reader of a file can rely on:

- One compact JSON object per line, UTF-8, keys in a fixed order: the columns of the store's
  `requests` dataset (`assay._schema.REQUESTS`), `v`, `operation_id`, `phase` first. A field that
  is None is left out; reading fills it back.
- U+0085, U+2028 and U+2029 are written escaped, so no tool that splits lines on them (Python's
  `str.splitlines`, JavaScript) sees a record broken in two.
- NaN and Infinity are not JSON: `encode` refuses them and the reader reports them.
- An empty file (or one holding only blank lines) is valid and holds 0 records: a run that made
  no model call captured nothing. Blank lines are allowed at the end only.
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
from typing import Annotated, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator

from assay.errors import InputError
from assay.outcomes import RequestOutcome, RequestPhase, SpendKind

VERSION = 1
PHASES: tuple[str, ...] = tuple(phase.value for phase in RequestPhase)
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024

_EXPECTED_PHASES = ", ".join(json.dumps(phase) for phase in PHASES)
_SHOWN_CHARS = 80  # how much of a bad value or line a message quotes
# Characters json.dumps leaves raw with ensure_ascii=False that some line splitters break on.
_LINE_BREAKERS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}

_Millis = Annotated[float | None, Field(ge=0, allow_inf_nan=False)]
_Count = Annotated[int | None, Field(ge=0)]


class RequestRecord(BaseModel):
    """One captured moment of one model call: a row of the store's `requests` dataset.

    The fields are the columns of `assay._schema.REQUESTS`, in its order, with the meanings
    docs/schema.md gives them (a test keeps the two in step); here only how a JSONL line holds
    them: `started_at` is an ISO-8601 timestamp, and `request` / `response` are JSON values (dicts
    with string keys, lists, str, numbers, bools, None; no tuples), not JSON text.

    Validation is strict: no "3" for 3, no true for 1 (an int is accepted where a float is due);
    `phase`, `kind` and `outcome` must be words of `RequestPhase`, `SpendKind` and
    `RequestOutcome`. Unknown fields are refused, so a misspelt name is caught where the record
    is built.
    """

    model_config = ConfigDict(strict=True, extra="forbid", validate_assignment=True)

    v: Literal[1] = VERSION
    operation_id: str = Field(min_length=1)
    # Words of `assay.outcomes` are not strict: a file holds their values (strict takes only members).
    phase: RequestPhase = Field(strict=False)
    item_id: str | None = None
    trial: _Count = None
    scorer: str | None = None
    kind: SpendKind | None = Field(default=None, strict=False)
    attempt: Annotated[int | None, Field(ge=1)] = None
    model: str | None = None
    http_status: Annotated[int | None, Field(ge=100, le=599)] = None
    started_at: str | None = None
    wire_ms: _Millis = None
    retry_ms: _Millis = None
    total_ms: _Millis = None
    first_token_ms: _Millis = None
    tokens_input: _Count = None
    tokens_output: _Count = None
    cost_usd: Annotated[float | None, Field(ge=0, allow_inf_nan=False)] = None
    outcome: RequestOutcome | None = Field(default=None, strict=False)
    error: str | None = None
    request: JsonValue = None
    response: JsonValue = None
    truncated: bool = False
    bytes: _Count = None

    @field_validator("v", mode="before")
    @classmethod
    def _v_is_the_int_1(cls, value: Any) -> Any:
        # Literal[1] alone takes True and 1.0, which are equal to 1 in Python but not in a file.
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


def encode(record: RequestRecord) -> str:
    """The record as one compact JSON line, without the newline.

    Args:
        record: the record to write.

    Raises:
        ValueError: the record holds NaN or Infinity, or its line would be longer than
            `MAX_LINE_BYTES` (truncate `request` / `response` first).
    """
    data = {name: value for name, value in record.model_dump().items() if value is not None}
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


def write_jsonl(records: Iterable[RequestRecord | dict[str, Any]], out: TextIO) -> int:
    """Write one line per record and return how many were written.

    Every record is validated and encoded before the first line is written, so a bad record
    leaves `out` untouched.

    Args:
        records: records, or dicts of their fields (validated as `RequestRecord`).
        out: a text stream open for writing (UTF-8, if it is a file).

    Raises:
        pydantic.ValidationError: a dict is not a valid record.
        ValueError: a record cannot be encoded (see `encode`).
    """
    lines = [
        encode(record if isinstance(record, RequestRecord) else RequestRecord.model_validate(record))
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
        number = 0
        consumed = 0
        blank_at: int | None = None  # the first of a run of blank lines; fine only at the end
        while True:
            try:
                # The limit bounds memory even for a file that grows while it is read.
                raw = handle.readline(MAX_LINE_BYTES + 3)
            except OSError as exc:
                raise _BadFile(count, f"cannot read the file: {exc.strerror or exc}") from None
            if not raw:
                return
            number += 1
            consumed += len(raw)
            if consumed > MAX_FILE_BYTES:
                raise _BadFile(
                    count, f"the file grew past the {MAX_FILE_BYTES:,}-byte (16 MiB) limit while read"
                )
            length = len(raw) - (raw.endswith(b"\n") + raw.endswith(b"\r\n"))
            too_long = length > MAX_LINE_BYTES
            if not too_long and not raw.strip():
                blank_at = blank_at or number
                continue
            if blank_at is not None:
                raise _BadFile(count, f"line {blank_at}: blank line (only the end of the file may be blank)")
            if too_long:
                if not raw.endswith(b"\n"):
                    length += _rest_of_line(handle)
                raise _BadFile(
                    count,
                    f"line {number}: {length:,} bytes, over the {MAX_LINE_BYTES:,}-byte (4 MiB) line limit",
                )
            problem, record = _parse_line(raw, first=number == 1)
            if problem is not None:
                raise _BadFile(count, f"line {number}: {problem}")
            count += 1
            yield record


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
    if type(value["v"]) is not int or value["v"] != VERSION:
        return f"unsupported version: v is {_shown_value(value['v'])}, expected {VERSION}", None
    operation_id = value.get("operation_id")
    if "operation_id" not in value:
        return "field 'operation_id' is missing", None
    if not isinstance(operation_id, str) or not operation_id:
        got = "an empty string" if operation_id == "" else _shown_value(operation_id)
        return f"field 'operation_id' must be a non-empty string, got {got}", None
    if "phase" not in value:
        return f"field 'phase' is missing (expected one of {_EXPECTED_PHASES})", None
    if not isinstance(value["phase"], str) or value["phase"] not in PHASES:
        return (
            f"phase is {_shown_value(value['phase'])}, expected one of {_EXPECTED_PHASES}",
            None,
        )
    try:
        return None, RequestRecord.model_validate(value)
    except ValidationError as exc:
        return "; ".join(_field_problem(error) for error in exc.errors()), None


def _field_problem(error: Any) -> str:
    """One pydantic error as `field 'name': what is wrong (got value)`."""
    name = ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        return f"field {name!r} is missing"
    if error["type"] == "extra_forbidden":
        close = difflib.get_close_matches(name, RequestRecord.model_fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown field {name!r}{hint}"
    message = error["msg"].removeprefix("Value error, ")
    return f"field {name!r}: {message} (got {_shown_value(error['input'])})"


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _shown_value(value: Any) -> str:
    return _shown(json.dumps(value, ensure_ascii=False))


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
