"""Captured-request JSONL: records round-trip, and a bad file is refused at its first bad line.

The requirement: `validate_jsonl` names the first bad line ("line N: ...") and counts the records
before it; `read_jsonl` raises `InputError` (exit status 2) with the same message.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from assay.calls.request_codec import (
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    PHASES,
    VERSION,
    RequestRecord,
    encode,
    read_jsonl,
    validate_jsonl,
    write_jsonl,
)
from assay.errors import InputError


def full_record(**overrides: Any) -> RequestRecord:
    """A record with every field set."""
    fields: dict[str, Any] = {
        "operation_id": "op-1",
        "phase": "attempt",
        "item_id": "q1",
        "trial": 0,
        "scorer": "judge",
        "kind": "judging",
        "attempt": 2,
        "model": "gpt-test",
        "http_status": 200,
        "started_at": "2025-01-31T12:00:00.123+00:00",
        "wire_ms": 12.5,
        "retry_ms": 0,
        "total_ms": 40.25,
        "tokens_input": 10,
        "tokens_output": 3,
        "cost_usd": 0.0001,
        "outcome": "ok",
        "error": None,
        "request": {"messages": [{"role": "user", "content": "2+2?"}], "temperature": 0},
        "response": {"choices": [{"message": {"content": "4"}}], "extra": None},
        "truncated": False,
        "bytes": 123,
    }
    return RequestRecord(**(fields | overrides))


GOOD = {"v": 1, "operation_id": "op-1", "phase": "start"}


def good_line(n: int = 0) -> str:
    return json.dumps(GOOD | {"operation_id": f"op-{n}"})


def write_lines(path: Path, lines: list[str | bytes], *, end: bytes = b"\n") -> Path:
    """Join the lines with newlines (bytes are written as they are) and end with `end`."""
    raw = [line if isinstance(line, bytes) else line.encode() for line in lines]
    path.write_bytes(b"\n".join(raw) + (end if raw else b""))
    return path


def bad_third_line(tmp_path: Path, line: str | bytes) -> tuple[int, str | None]:
    """Validate a file of two good lines, the given line, then one more good line."""
    path = write_lines(tmp_path / "requests.jsonl", [good_line(1), good_line(2), line, good_line(4)])
    return validate_jsonl(path)


def assert_third_line_bad(tmp_path: Path, line: str | bytes, *said: str) -> str:
    count, message = bad_third_line(tmp_path, line)
    assert count == 2, message
    assert message is not None and message.startswith("line 3: "), message
    for text in said:
        assert text in message, message
    with pytest.raises(InputError) as raised:
        read_jsonl(tmp_path / "requests.jsonl")
    assert raised.value.problems == [message]
    assert raised.value.source == str(tmp_path / "requests.jsonl")
    return message


# --- good files ---------------------------------------------------------------------------


def test_round_trip_encode_validate_read(tmp_path: Path) -> None:
    records = [
        RequestRecord(operation_id="op-1", phase="start", item_id="q1", kind="generation"),
        full_record(),
        full_record(phase="end", request=None, response=[1, "two", {"three": 3.5}], truncated=True),
    ]
    path = tmp_path / "requests.jsonl"
    with path.open("w", encoding="utf-8") as out:
        assert write_jsonl(records, out) == 3
    assert validate_jsonl(path) == (3, None)
    assert list(read_jsonl(path)) == records


def test_encode_is_one_compact_line_in_a_stable_key_order() -> None:
    line = encode(full_record(error="line one\nline two"))
    assert "\n" not in line and not line.endswith("\n")
    assert ", " not in line and ": " not in line
    keys = list(json.loads(line))
    assert keys[:3] == ["v", "operation_id", "phase"]
    assert keys == [name for name in RequestRecord.model_fields if name in keys]
    assert encode(full_record(error="line one\nline two")) == line


def test_encode_leaves_out_none_and_reading_fills_it_back(tmp_path: Path) -> None:
    record = RequestRecord(operation_id="op-1", phase="end", model=None)
    assert encode(record) == '{"v":1,"operation_id":"op-1","phase":"end","truncated":false}'
    # None inside a payload is data, not a missing field.
    assert '"extra":null' in encode(full_record())


def test_write_jsonl_takes_dicts_and_writes_one_line_each() -> None:
    out = io.StringIO()
    assert write_jsonl([GOOD, full_record(), {"operation_id": "op-2", "phase": "end"}], out) == 3
    lines = out.getvalue().split("\n")
    assert len(lines) == 4 and lines[-1] == ""
    assert json.loads(lines[2])["v"] == VERSION


def test_write_jsonl_writes_nothing_when_a_record_is_bad() -> None:
    out = io.StringIO()
    with pytest.raises(ValidationError):
        write_jsonl([GOOD, GOOD | {"phase": "finish"}], out)
    assert out.getvalue() == ""


def test_unicode_is_written_as_is_and_read_back(tmp_path: Path) -> None:
    record = full_record(
        item_id="ç-é-漢字", response={"content": "Größe 🙂 \u2028 next \u2029 \x85 end"}, error="naïve"
    )
    line = encode(record)
    assert "漢字" in line and "🙂" in line
    # Characters some tools split lines on are escaped, so every record stays on one line.
    assert len(line.splitlines()) == 1 and "\\u2028" in line
    path = tmp_path / "requests.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    assert list(read_jsonl(path)) == [record]


@pytest.mark.parametrize(
    "end", [b"\n", b"", b"\n\n", b"\n  \n\n"], ids=["newline", "none", "blank", "blanks"]
)
def test_trailing_newline_or_blank_lines_at_the_end_are_fine(tmp_path: Path, end: bytes) -> None:
    path = write_lines(tmp_path / "requests.jsonl", [good_line(1), good_line(2)], end=end)
    assert validate_jsonl(path) == (2, None)
    assert [r.operation_id for r in read_jsonl(path)] == ["op-1", "op-2"]


def test_crlf_line_endings_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(f"{good_line(1)}\r\n{good_line(2)}\r\n".encode())
    assert validate_jsonl(path) == (2, None)


def test_an_empty_file_is_valid_with_no_records(tmp_path: Path) -> None:
    """A run that made no model call captures nothing: 0 records, not an error."""
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"")
    assert validate_jsonl(path) == (0, None)
    assert list(read_jsonl(path)) == []


def test_a_byte_order_mark_on_line_1_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + good_line(1).encode() + b"\n")
    assert validate_jsonl(path) == (1, None)


def test_every_phase_is_accepted(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [json.dumps(GOOD | {"phase": phase}) for phase in PHASES])
    assert validate_jsonl(path) == (3, None)


@pytest.mark.slow
def test_a_file_at_the_size_limit_is_read_fast(tmp_path: Path) -> None:
    """Many small records and a few near the line limit, up to 16 MiB exactly."""
    path = tmp_path / "requests.jsonl"
    big = encode(full_record(response={"content": "x" * (MAX_LINE_BYTES - 1000)})) + "\n"
    small = encode(full_record()) + "\n"
    body = big * 3
    count = 3 + (MAX_FILE_BYTES - len(body) - 1) // len(small)
    body += small * (count - 3)
    padding = MAX_FILE_BYTES - len(body.encode())
    body += "\n" * padding  # blank lines at the end bring it to the limit exactly
    path.write_text(body, encoding="utf-8")
    assert path.stat().st_size == MAX_FILE_BYTES
    started = time.perf_counter()
    assert validate_jsonl(path) == (count, None)
    assert time.perf_counter() - started < 10  # about a quarter of a second on a laptop


# --- bad lines, each named with the number of records before it ---------------------------


def test_not_json(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, '{"v": 1, "operation_id": "op-3",', "not valid JSON")


def test_nan_is_not_json(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, json.dumps(GOOD | {"cost_usd": float("nan")}), "not valid JSON", "NaN")


def test_a_json_array_instead_of_an_object(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, json.dumps([GOOD]), "expected a JSON object, got an array")


def test_a_json_number_instead_of_an_object(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, "42", "expected a JSON object, got a number")


def test_v_missing(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, json.dumps({"operation_id": "op-3", "phase": "end"}), "'v' is missing")


def test_v_is_2(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, json.dumps(GOOD | {"v": 2}), "unsupported version: v is 2, expected 1")


@pytest.mark.parametrize("v", [True, "1"])
def test_v_equal_to_1_in_python_but_not_the_number_1(tmp_path: Path, v: Any) -> None:
    assert_third_line_bad(tmp_path, json.dumps(GOOD | {"v": v}), f"v is {json.dumps(v)}")


def test_v_written_1_0_is_1_as_javascript_reads_it(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [json.dumps(GOOD | {"v": 1.0})])
    assert validate_jsonl(path) == (1, None)
    assert encode(next(read_jsonl(path))).startswith('{"v":1,')


def test_operation_id_missing(tmp_path: Path) -> None:
    assert_third_line_bad(
        tmp_path,
        json.dumps({"v": 1, "phase": "end"}),
        "field 'operationId' (or Assay's 'operation_id') is missing",
    )


def test_operation_id_empty(tmp_path: Path) -> None:
    assert_third_line_bad(
        tmp_path,
        json.dumps(GOOD | {"operation_id": ""}),
        "'operation_id' must be a non-empty string, got an empty",
    )


def test_operation_id_not_a_string(tmp_path: Path) -> None:
    assert_third_line_bad(
        tmp_path, json.dumps(GOOD | {"operation_id": 7}), "'operation_id' must be a non-empty string, got 7"
    )


def test_phase_missing(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, json.dumps({"v": 1, "operation_id": "op-3"}), "'phase' is missing")


def test_unknown_phase(tmp_path: Path) -> None:
    assert_third_line_bad(
        tmp_path,
        json.dumps(GOOD | {"phase": "finish"}),
        'phase is "finish", expected one of "start", "attempt", "end"',
    )


def test_unknown_extra_field(tmp_path: Path) -> None:
    assert_third_line_bad(
        tmp_path, json.dumps(GOOD | {"modle": "gpt"}), "unknown field 'modle' (did you mean 'model'?)"
    )


def test_wrong_type_for_a_field(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, json.dumps(GOOD | {"trial": "x"}), "field 'trial'", 'got "x"')


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("trial", "3"),  # strict: no string for a number
        ("tokens_input", True),  # strict: no boolean for a number
        ("attempt", 0),
        ("http_status", 42),
        ("wire_ms", -1),
        ("kind", "chat"),
        ("started_at", "yesterday"),
        ("truncated", "no"),
        ("scorer", 5),
    ],
)
def test_each_field_is_checked(tmp_path: Path, field: str, value: Any) -> None:
    assert_third_line_bad(tmp_path, json.dumps(GOOD | {field: value}), f"field {field!r}")


def test_all_field_problems_on_the_bad_line_are_named(tmp_path: Path) -> None:
    message = assert_third_line_bad(tmp_path, json.dumps(GOOD | {"trial": "x", "modle": "m"}))
    assert "field 'trial'" in message and "unknown field 'modle'" in message


def test_a_line_over_4_mib(tmp_path: Path) -> None:
    record = GOOD | {"response": "x" * MAX_LINE_BYTES}
    line = json.dumps(record)
    message = assert_third_line_bad(tmp_path, line, f"{len(line):,} bytes, over the", "line limit")
    assert message == f"line 3: {len(line):,} bytes, over the {MAX_LINE_BYTES:,}-byte (4 MiB) line limit"


def test_a_line_of_exactly_4_mib_is_fine(tmp_path: Path) -> None:
    padding = MAX_LINE_BYTES - len(json.dumps(GOOD | {"response": ""}))
    line = json.dumps(GOOD | {"response": "x" * padding})
    assert len(line) == MAX_LINE_BYTES
    path = write_lines(tmp_path / "r.jsonl", [good_line(1), line], end=b"\r\n")
    assert validate_jsonl(path) == (2, None)


def test_encode_refuses_a_record_over_the_line_limit() -> None:
    with pytest.raises(ValueError, match="line limit: truncate"):
        encode(RequestRecord(operation_id="op-1", phase="end", response="x" * MAX_LINE_BYTES))


def test_the_model_refuses_a_payload_that_is_not_json() -> None:
    with pytest.raises(ValidationError, match="request"):
        RequestRecord(operation_id="op-1", phase="end", request={"sent": b"bytes"})


def test_encode_refuses_nan_in_a_payload() -> None:
    with pytest.raises(ValueError, match="op-1"):
        encode(RequestRecord(operation_id="op-1", phase="end", response={"score": float("nan")}))


def test_non_utf8_bytes(tmp_path: Path) -> None:
    line = b'{"v": 1, "operation_id": "op-\xff", "phase": "end"}'
    at = line.index(b"\xff") + 1
    assert_third_line_bad(tmp_path, line, f"not UTF-8 text (byte {at} of the line is b'\\xff')")


def test_blank_lines_anywhere_are_skipped_and_not_counted(tmp_path: Path) -> None:
    """As the seed: blank lines are skipped wherever they are, and "line N" counts the others
    (the file's own line number is added when it differs)."""
    path = write_lines(tmp_path / "r.jsonl", ["", good_line(1), "  \u00a0", good_line(2), "\t", good_line(3)])
    assert validate_jsonl(path) == (3, None)
    path = write_lines(tmp_path / "r.jsonl", [good_line(1), "", "   ", "[]"])
    assert validate_jsonl(path) == (1, "line 2 (file line 4): expected a JSON object, got an array")


def test_deep_nesting_is_reported_not_raised(tmp_path: Path) -> None:
    assert_third_line_bad(tmp_path, "[" * 200_000 + "]" * 200_000, "not valid JSON")


def test_the_first_bad_line_is_reported_and_reading_stops_there(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ["[]", good_line(2), "not json"])
    assert validate_jsonl(path) == (0, "line 1: expected a JSON object, got an array")
    path = write_lines(tmp_path / "r.jsonl", [good_line(1), good_line(2), good_line(3), "{", "["])
    count, message = validate_jsonl(path)
    assert count == 3 and message is not None and message.startswith("line 4: not valid JSON")


# --- bad files ----------------------------------------------------------------------------


def test_a_file_over_16_mib(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(good_line(1) + "\n")
    with path.open("r+b") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: fast to make, and never read
    size = f"{MAX_FILE_BYTES + 1:,}"
    assert validate_jsonl(path) == (0, f"the file is {size} bytes, over the 16,777,216-byte (16 MiB) limit")
    with pytest.raises(InputError, match="over the 16,777,216-byte"):
        read_jsonl(path)


def test_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.jsonl"
    assert validate_jsonl(path) == (0, "file not found")
    with pytest.raises(InputError) as raised:
        read_jsonl(path)
    assert str(raised.value) == f"{path}: file not found"


def test_a_directory(tmp_path: Path) -> None:
    count, message = validate_jsonl(tmp_path)
    assert count == 0 and message is not None and "directory" in message


# --- the model, as the capture module uses it -----------------------------------------------


def test_the_model_defaults_v_and_checks_assignments() -> None:
    record = RequestRecord(operation_id="op-1", phase="start")
    assert record.v == VERSION and record.truncated is False and record.request is None
    with pytest.raises(ValidationError):
        record.http_status = "500"  # type: ignore[assignment]
    with pytest.raises(ValidationError):
        RequestRecord(operation_id="", phase="start")
    with pytest.raises(ValidationError):
        RequestRecord(v=True, operation_id="op-1", phase="start")  # type: ignore[arg-type]
