"""The request sidecar is the seed's v1 interchange format (issue 14, point 7).

`seed_verdict` states @axlsdk/eval's `validateRequestSidecar` rules (read from its diff in
/work/shared/seeds/000_*.txt): blank lines (JavaScript `trim`) are dropped before counting, then
each line must be at most 4 MiB, JSON, an object, `v` === 1, a non-empty string `operationId`
and a `phase` of start | attempt | end; nothing else is checked. Assay must accept every file it
accepts, and refuse every file it refuses at the same line number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.calls.request_codec import MAX_LINE_BYTES, encode, read_jsonl, validate_jsonl
from assay.cli import main
from assay.store import Store
from tests.conftest import openai_spec

_JS_TRIM = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)


def _not_json(name: str) -> None:
    raise ValueError(name)


def seed_verdict(text: str) -> tuple[bool, int | None]:
    """(accepted, the 1-based line the seed names when it refuses)."""
    lines = [line for line in text.split("\n") if line.strip(_JS_TRIM) != ""]
    for number, line in enumerate(lines, 1):
        if len(line.encode("utf-8")) > MAX_LINE_BYTES:
            return False, number
        try:
            record = json.loads(line, parse_constant=_not_json)  # JSON.parse has no NaN
        except ValueError:
            return False, number
        if not isinstance(record, dict):
            return False, number
        v = record.get("v")
        if isinstance(v, bool) or not isinstance(v, int | float) or v != 1:
            return False, number
        operation_id = record.get("operationId")
        if not isinstance(operation_id, str) or operation_id == "":
            return False, number
        if record.get("phase") not in ("start", "attempt", "end"):
            return False, number
    return True, None


def v1(**fields: object) -> str:
    return json.dumps({"v": 1, "operationId": "op-1", "phase": "start", **fields})


SEED_RECORD = v1(
    phase="end",
    kind="llm",  # not one of Assay's spend kinds
    attempt=0,  # Assay counts attempts from 1
    itemId=7,  # not a string
    caseIndex=3,
    turn=1,
    status="ok",
    inputTokens=12,
    outputTokens=4,
    model="gpt-test",
)

FILES = {
    "minimal": v1() + "\n",
    "no final newline": v1(),
    "seed fields Assay reads, or does not": SEED_RECORD + "\n",
    "blank lines anywhere": "\n"
    + v1()
    + "\n   \n\u00a0\u2028\n"
    + v1(phase="attempt")
    + "\n\r\n"
    + v1(phase="end"),
    "crlf": v1() + "\r\n" + v1(phase="end") + "\r\n",
    "v written 1.0": '{"v": 1.0, "operationId": "a", "phase": "end"}\n',
    "empty": "",
    "only blank lines": "\n \n\t\n",
    # refused
    "not json after blanks": v1() + "\n\n\n" + v1() + "\n{oops\n" + v1(),
    "an array": v1() + "\n[1]\n",
    "a string": '"hello"\n',
    "v 2": v1() + "\n" + v1(v=2),
    "v true": v1(v=True),
    "v missing": '{"operationId": "a", "phase": "start"}',
    "no id at all": v1() + "\n" + '{"v": 1, "phase": "start"}',
    "empty id": v1(operationId=""),
    "numeric id": "\n\n" + v1(operationId=7),
    "unknown phase": v1() + "\n" + v1(phase="finish"),
    "phase missing": '{"v": 1, "operationId": "a"}',
    "NaN": v1() + "\n" + '{"v": 1, "operationId": "a", "phase": "end", "cost": NaN}',
    "a line over 4 MiB": v1() + "\n" + v1(request="x" * MAX_LINE_BYTES) + "\n",
}


@pytest.mark.parametrize("name", FILES)
def test_assay_agrees_with_the_seed(tmp_path: Path, name: str) -> None:
    text = FILES[name]
    path = tmp_path / "requests.jsonl"
    path.write_text(text, encoding="utf-8")
    accepted, line = seed_verdict(text)
    count, problem = validate_jsonl(path)
    if accepted:
        assert problem is None, problem
        assert count == len([line for line in text.split("\n") if line.strip(_JS_TRIM)])
    else:
        assert problem is not None, f"the seed refuses line {line}"
        assert problem.startswith((f"line {line}:", f"line {line} (file line ")), problem


def test_the_corpus_has_both_verdicts() -> None:
    verdicts = [seed_verdict(text)[0] for text in FILES.values()]
    assert verdicts.count(True) >= 8 and verdicts.count(False) >= 10


def test_a_seed_record_is_read_and_written_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(SEED_RECORD + "\n", encoding="utf-8")
    (record,) = read_jsonl(path)
    assert record.operation_id == "op-1" and record.phase == "end" and record.model == "gpt-test"
    assert (record.tokens_input, record.tokens_output) == (12, 4)
    assert record.item_id is None and record.kind is None and record.attempt is None
    back = json.loads(encode(record, v1=True))
    assert back == {**json.loads(SEED_RECORD), "truncated": False}
    assert "operation_id" not in back


def test_assay_lines_stay_strict(tmp_path: Path) -> None:
    """Assay's own spelling (`operation_id`) is every field checked; the seed refuses such a line
    anyway, so refusing a stray field in it contradicts nothing the seed accepts."""
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps({"v": 1, "operation_id": "a", "phase": "end", "modle": "m"}) + "\n")
    assert validate_jsonl(path) == (0, "line 1: unknown field 'modle' (did you mean 'model'?)")


def test_export_v1_writes_the_seeds_names_and_both_validators_accept_it(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=3, capture_requests=True)
    store = str(tmp_path / "store")
    assert main(["run", str(spec), "--store", store, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["requests", "export", run_id, "--store", store, "--format", "v1"]) == 0
    text = capsys.readouterr().out
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == Store(store).run_requests(run_id).height > 0
    assert all("operationId" in line and "operation_id" not in line for line in lines)
    assert all("itemId" in line and "item_id" not in line for line in lines)
    assert any("inputTokens" in line for line in lines)
    assert seed_verdict(text) == (True, None)
    path = tmp_path / "v1.jsonl"
    path.write_text(text, encoding="utf-8")
    assert main(["requests", "validate", str(path)]) == 0
    assert f"{len(lines)} valid records" in capsys.readouterr().out
    # Read back, the records are the stored ones.
    assert main(["requests", "export", run_id, "--store", store]) == 0
    assays = capsys.readouterr().out
    assert [encode(r) for r in read_jsonl(path)] == assays.splitlines()
