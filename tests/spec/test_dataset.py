"""Datasets: JSONL, CSV and Parquet rows mapped to items with stable ids; bad rows named by line.

The requirement: a bad dataset row gets exit status 2 and one message per problem naming the line
and the bad value; nothing is written to the store.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.cli import main
from assay.errors import DatasetError, InputError
from assay.spec import DatasetSpec
from assay.spec.dataset import Item, dataset_hash, load_items
from tests.conftest import write_jsonl, write_spec

ROWS = [
    {"id": "a", "question": "What is 1 + 1?", "answer": "2", "topic": "add", "level": "easy"},
    {"id": "b", "question": "What is 2 * 3?", "answer": "6", "topic": "mul", "level": "easy"},
    {"id": "c", "question": "What is 9 - 4?", "answer": "5", "topic": "sub", "level": "hard"},
]


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    pl.DataFrame(rows).write_parquet(path)
    return path


def load(folder: Path, **dataset: Any) -> list[Item]:
    return load_items(DatasetSpec(**dataset), folder)


def problems(folder: Path, **dataset: Any) -> list[str]:
    with pytest.raises(DatasetError) as caught:
        load(folder, **dataset)
    assert isinstance(caught.value, InputError)
    return caught.value.problems


def one_problem(folder: Path, **dataset: Any) -> str:
    found = problems(folder, **dataset)
    assert len(found) == 1, found
    return found[0]


# -- formats and mapping ---------------------------------------------------------------------------


@pytest.mark.parametrize("with_id", [True, False])
def test_jsonl_csv_and_parquet_give_the_same_items(tmp_path, with_id):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    write_csv(tmp_path / "d.csv", ROWS)
    write_parquet(tmp_path / "d.parquet", ROWS)
    mapping = {"id": "id" if with_id else None, "input": "question", "expected": "answer"}

    loaded = {name: load(tmp_path, path=name, **mapping) for name in ("d.jsonl", "d.csv", "d.parquet")}

    assert loaded["d.jsonl"] == loaded["d.csv"] == loaded["d.parquet"]
    items = loaded["d.jsonl"]
    assert [i.input for i in items] == [r["question"] for r in ROWS]
    assert [i.expected for i in items] == ["2", "6", "5"]
    assert [i.item_index for i in items] == [0, 1, 2]
    if with_id:
        assert [i.item_id for i in items] == ["a", "b", "c"]


def test_field_mapping_and_default_annotations(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    (first, *_) = load(tmp_path, path="d.jsonl", id="id", input="question", expected="answer")
    assert first == Item(
        item_id="a",
        item_index=0,
        input="What is 1 + 1?",
        expected="2",
        annotations={"topic": "add", "level": "easy"},  # every field not mapped to id / input / expected
        fields=ROWS[0],
    )


def test_explicit_annotations(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    items = load(
        tmp_path, path="d.jsonl", id="id", input="question", expected="answer", annotations=["level"]
    )
    assert [i.annotations for i in items] == [{"level": "easy"}, {"level": "easy"}, {"level": "hard"}]
    assert load(tmp_path, path="d.jsonl", input="question", annotations="topic")[0].annotations == {
        "topic": "add"
    }
    assert load(tmp_path, path="d.jsonl", input="question", annotations=[])[0].annotations == {}


def test_default_mapping_input_and_expected(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"input": "hi", "expected": "hello", "x": 1}, {"input": "bye"}])
    first, second = load(tmp_path, path="d.jsonl")
    assert (first.input, first.expected, first.annotations) == ("hi", "hello", {"x": 1})
    assert (second.input, second.expected) == ("bye", None), "the default `expected` field may be absent"


def test_no_expected_field(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"input": "hi", "expected": "kept as an annotation"}])
    (item,) = load(tmp_path, path="d.jsonl", expected=None)
    assert item.expected is None and item.annotations == {"expected": "kept as an annotation"}


def test_json_values_keep_their_types(tmp_path):
    row = {"id": 7, "input": {"messages": ["hi"]}, "expected": [1, 2], "score": 0.5, "ok": True}
    write_jsonl(tmp_path / "d.jsonl", [row])
    (item,) = load(tmp_path, path="d.jsonl", id="id")
    assert item.item_id == "7" and item.input == {"messages": ["hi"]} and item.expected == [1, 2]
    assert item.annotations == {"score": 0.5, "ok": True}


def test_limit(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    items = load(tmp_path, path="d.jsonl", id="id", input="question", limit=2)
    assert [i.item_id for i in items] == ["a", "b"]
    assert len(load(tmp_path, path="d.jsonl", id="id", input="question", limit=100)) == 3


def test_blank_lines_are_skipped_and_line_numbers_still_count_them(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"input": "a"}\n\n   \n{"input": "b"}\n{"nope": 1}\n')
    assert one_problem(tmp_path, path="d.jsonl").startswith("line 5:")
    path.write_text('{"input": "a"}\n\n{"input": "b"}\n')
    assert [i.input for i in load(tmp_path, path="d.jsonl")] == ["a", "b"]


def test_path_is_relative_to_the_spec_dir(tmp_path):
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "d.jsonl", [{"input": "a"}])
    assert load(tmp_path, path="data/d.jsonl")[0].input == "a"


def test_byte_order_mark_is_not_part_of_the_first_field(tmp_path):
    (tmp_path / "d.csv").write_bytes(b"\xef\xbb\xbfid,input\r\nq1,hello\r\n")
    (tmp_path / "d.jsonl").write_bytes(b'\xef\xbb\xbf{"id": "q1", "input": "hello"}\n')
    for name in ("d.csv", "d.jsonl"):
        (item,) = load(tmp_path, path=name, id="id")
        assert (item.item_id, item.input) == ("q1", "hello")


def test_csv_quoted_field_spanning_lines(tmp_path):
    (tmp_path / "d.csv").write_text('id,input\nq1,"two\nlines"\nq2,\n')
    items = load(tmp_path, path="d.csv", id="id")
    assert [i.input for i in items] == ["two\nlines", ""]


def test_csv_lines_are_counted_as_an_editor_shows_them(tmp_path):
    # The first row spans lines 2-3, a blank line 4 is skipped, so the duplicate is on line 5.
    (tmp_path / "d.csv").write_text('id,input\nq1,"two\nlines"\n\nq1,x\n')
    message = one_problem(tmp_path, path="d.csv", id="id")
    assert message.startswith("line 5:") and "first at line 2" in message


# -- ids ------------------------------------------------------------------------------------------


def test_ids_from_the_id_field(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    assert [i.item_id for i in load(tmp_path, path="d.jsonl", id="id", input="question")] == ["a", "b", "c"]


def test_content_hash_ids_are_stable(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    once = load(tmp_path, path="d.jsonl", input="question")
    twice = load(tmp_path, path="d.jsonl", input="question")
    ids = [i.item_id for i in once]
    assert ids == [i.item_id for i in twice]
    assert len(set(ids)) == 3
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids)


def test_content_hash_ids_follow_the_row_when_rows_are_reordered(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    before = {i.input: i.item_id for i in load(tmp_path, path="d.jsonl", input="question")}
    write_jsonl(tmp_path / "d.jsonl", list(reversed(ROWS)))
    after = load(tmp_path, path="d.jsonl", input="question")
    assert [i.input for i in after] == [r["question"] for r in reversed(ROWS)]
    assert {i.input: i.item_id for i in after} == before


def test_content_hash_ids_ignore_key_order(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"input": "x", "y": 1}])
    write_jsonl(tmp_path / "b.jsonl", [{"y": 1, "input": "x"}])
    assert load(tmp_path, path="a.jsonl")[0].item_id == load(tmp_path, path="b.jsonl")[0].item_id


def test_content_hash_ids_change_with_the_content(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"input": "x", "expected": "1"}])
    write_jsonl(tmp_path / "b.jsonl", [{"input": "x", "expected": "2"}])
    assert load(tmp_path, path="a.jsonl")[0].item_id != load(tmp_path, path="b.jsonl")[0].item_id


def test_identical_rows_get_distinct_ids(tmp_path):
    row = {"input": "same", "expected": "same"}
    write_jsonl(tmp_path / "d.jsonl", [row, {"input": "other"}, row, row])
    items = load(tmp_path, path="d.jsonl")
    ids = [i.item_id for i in items]
    assert len(set(ids)) == 4
    assert ids[2] == f"{ids[0]}-2" and ids[3] == f"{ids[0]}-3"
    assert [i.item_id for i in load(tmp_path, path="d.jsonl")] == ids, "stable from load to load"


# Stored runs are matched by these: a faster reader or hash must give the same values, digit for digit.
_VARIED_JSONL = (
    '{"input": "What is 1 + 1?", "expected": "2", "tags": ["a", "b"], "w": 0.1}\r\n'
    '{"expected": 3.0, "input": {"q": "nested", "n": [1, 2.5, -0.0, 1e300]}, "big": 123456789012345678901234567890}\n'
    "\n"
    '{"input": "caf\\u00e9 \\ud83d\\ude00 \\u2028", "expected": null, "x": NaN, "y": -Infinity}\n'
    '{"input": "dup", "input": "last wins", "expected": true, "z": {"b": 1, "a": [{}, []]}}\n'
    '  {"input": "\\"quoted\\" \\\\ \\/ \\t", "expected": "é", "n": 4.9e-324}  \n'
    '{"input": "same", "expected": "same"}\n'
    '{"input": "same", "expected": "same"}\n'
    # Deeper than some parsers go (Python's json reads it): still one row.
    '{"input": "deep", "deep": ' + "[" * 300 + "]" * 300 + "}\n"
)


def test_item_ids_and_dataset_hash_are_pinned(tmp_path):
    (tmp_path / "d.jsonl").write_text(_VARIED_JSONL, encoding="utf-8")
    items = load(tmp_path, path="d.jsonl")
    assert [i.item_id for i in items] == [
        "a60f7feb16c94f88",
        "4f24cb8d346901bd",
        "7487b801b698175d",
        "e00e895934e6b2ca",
        "ea49054bb2187485",
        "8d0c799ea129779d",
        "8d0c799ea129779d-2",
        "1bc44569f71f2ffa",
    ]
    assert dataset_hash(items) == "17a25241ece586581b68e222191a9caf00e8042eee44cdb2fa7d53da380d12c1"
    assert [i.item_index for i in items] == list(range(8))
    assert items[3].input == "last wins" and items[2].input == "caf\u00e9 \U0001f600 \u2028"


# -- problems, named by line ----------------------------------------------------------------------


def test_invalid_json_line_names_the_line_and_the_text(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"input": "a"}\n{"input": "b",}\n{"input": "c"}\n')
    message = one_problem(tmp_path, path="d.jsonl")
    assert message.startswith("line 2: not valid JSON")
    assert '{"input": "b",}' in message


def test_unpaired_surrogate_names_the_line_and_the_escape(tmp_path):
    # JSON lets `\ud800` be written alone; it is no Unicode text (it cannot be hashed or stored).
    (tmp_path / "d.jsonl").write_text('{"input": "a"}\n{"input": "x\\ud800y"}\n{"input": "\\ud83d\\ude00"}\n')
    message = one_problem(tmp_path, path="d.jsonl")
    assert message.startswith("line 2:") and "unpaired surrogate" in message and "\\ud800" in message


def test_json_line_that_is_not_an_object(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"input": "a"}\n["input", "b"]\n')
    message = one_problem(tmp_path, path="d.jsonl")
    assert message.startswith("line 2:") and "object" in message and "list" in message


def test_missing_input_field(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"question": "a"}, {"qestion": "b"}])
    message = one_problem(tmp_path, path="d.jsonl", input="question")
    assert message.startswith("line 2:")
    assert "'question'" in message and "dataset.input" in message
    assert "'qestion'" in message, "shows the fields the row does have"


def test_duplicate_id_names_both_lines(tmp_path):
    write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": "x", "input": "a"}, {"id": "y", "input": "b"}, {"id": "x", "input": "c"}],
    )
    message = one_problem(tmp_path, path="d.jsonl", id="id")
    assert message.startswith("line 3:")
    assert "duplicate id 'x'" in message and "line 1" in message


def test_duplicate_id_in_csv_counts_the_header_line(tmp_path):
    write_csv(tmp_path / "d.csv", [{"id": "x", "input": "a"}, {"id": "x", "input": "b"}])
    message = one_problem(tmp_path, path="d.csv", id="id")
    assert message.startswith("line 3:") and "line 2" in message


@pytest.mark.parametrize("value", [None, ""])
def test_missing_or_empty_id(tmp_path, value):
    rows = [{"id": "x", "input": "a"}, {"id": value, "input": "b"}, {"input": "c"}]
    write_jsonl(tmp_path / "d.jsonl", rows)
    found = problems(tmp_path, path="d.jsonl", id="id")
    # The same problem on two lines is one problem naming both.
    assert found == ["lines 2, 3 (2 rows): field 'id' (dataset.id) is missing or empty"]


def test_missing_expected_when_explicitly_mapped(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"input": "a", "expected": "1"}, {"input": "b"}])
    message = one_problem(tmp_path, path="d.jsonl", expected="expected")
    assert message.startswith("line 2:") and "'expected'" in message and "dataset.expected" in message


def test_missing_explicit_annotation(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"input": "a", "topic": "t"}, {"input": "b"}])
    message = one_problem(tmp_path, path="d.jsonl", annotations=["topic"])
    assert message.startswith("line 2:") and "'topic'" in message and "dataset.annotations" in message


def test_every_bad_row_is_reported(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        '{"id": "1", "input": "a"}\n'
        '{"id": "2"}\n'  # no input
        '{"id": "3", "input": "c"}\n'
        '{"id": "4", "input": \n'  # not JSON
        '{"id": "1", "input": "e"}\n'  # duplicate id
    )
    found = problems(tmp_path, path="d.jsonl", id="id")
    assert len(found) == 3, found
    assert [p.split(":", 1)[0] for p in found] == ["line 2", "line 4", "line 5"]
    assert "dataset.input" in found[0] and "not valid JSON" in found[1] and "duplicate id '1'" in found[2]


def test_parquet_rows_are_named_by_row(tmp_path):
    write_parquet(tmp_path / "d.parquet", [{"id": "x", "input": "a"}, {"id": "x", "input": "b"}])
    message = one_problem(tmp_path, path="d.parquet", id="id")
    assert message.startswith("row 2:") and "row 1" in message


@pytest.mark.parametrize(
    ("name", "content"),
    [("d.jsonl", ""), ("d.jsonl", "\n\n"), ("d.csv", ""), ("d.csv", "id,input\n")],
)
def test_empty_file(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    assert "no rows" in one_problem(tmp_path, path=name)


def test_empty_parquet(tmp_path):
    pl.DataFrame({"input": []}, schema={"input": pl.String}).write_parquet(tmp_path / "d.parquet")
    assert "no rows" in one_problem(tmp_path, path="d.parquet")


def test_unsupported_extension(tmp_path):
    (tmp_path / "d.xlsx").write_text("x")
    message = one_problem(tmp_path, path="d.xlsx")
    assert "'.xlsx'" in message and ".jsonl" in message and ".csv" in message and ".parquet" in message


def test_missing_file(tmp_path):
    message = one_problem(tmp_path, path="nope.jsonl")
    assert message.startswith("dataset.path:") and "'nope.jsonl'" in message and "not found" in message


def test_file_that_is_not_utf8(tmp_path):
    (tmp_path / "d.csv").write_bytes(b"input\ncaf\xe9\n")
    assert "UTF-8" in one_problem(tmp_path, path="d.csv")


def test_file_that_is_not_parquet(tmp_path):
    (tmp_path / "d.parquet").write_text('{"input": "a"}\n')
    assert "Parquet" in one_problem(tmp_path, path="d.parquet")


def test_csv_rows_with_too_many_or_too_few_fields(tmp_path):
    (tmp_path / "d.csv").write_text("id,input,expected\nq1,a,1\nq2,b,2,surplus\nq3,c\n")
    found = problems(tmp_path, path="d.csv", id="id")
    assert len(found) == 2, found
    assert found[0].startswith("line 3:") and "'surplus'" in found[0]
    assert found[1].startswith("line 4:") and "'expected'" in found[1]


def test_csv_repeated_column_names(tmp_path):
    (tmp_path / "d.csv").write_text("input,input\na,b\n")
    message = one_problem(tmp_path, path="d.csv")
    assert message.startswith("line 1:") and "'input'" in message


# -- through the command line --------------------------------------------------------------------


def spec_over(folder: Path, dataset: dict[str, Any], prompt: str = "{question}") -> Path:
    return write_spec(
        folder,
        name="ds",
        dataset=dataset,
        target={"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "prompt": prompt},
        scorers=[{"kind": "exact_match"}],
    )


def run_cli(capsys: pytest.CaptureFixture[str], spec: Path, store: Path) -> tuple[int, list[str]]:
    code = main(["run", str(spec), "--store", str(store), "-q"])
    return code, capsys.readouterr().err.strip().splitlines()


def test_cli_bad_row_exits_2_naming_the_line_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "data.jsonl"
    path.write_text(
        '{"id": "a", "question": "q"}\n{"id": "b", "question": "r"}\n{"id": "c", "qustion": "s"}\n'
    )
    spec = spec_over(tmp_path, {"path": "data.jsonl", "id": "id", "input": "question"})
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path}: line 3:")
    assert "'question'" in lines[0] and "'qustion'" in lines[0]
    assert not store.exists()


def test_cli_several_bad_rows_one_line_each(tmp_path, capsys):
    path = tmp_path / "data.jsonl"
    path.write_text('{"id": "a", "question": "q"}\n{"id": "b"}\nnot json\n{"id": "a", "question": "s"}\n')
    spec = spec_over(tmp_path, {"path": "data.jsonl", "id": "id", "input": "question"})
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2
    assert lines[0] == f"error: {path}: 3 problems"
    assert [line.split(":", 1)[0] for line in lines[1:]] == ["  - line 2", "  - line 3", "  - line 4"]
    assert "'not json'" in lines[2] and "duplicate id 'a'" in lines[3]
    assert not store.exists()


def test_cli_missing_dataset_file(tmp_path, capsys):
    spec = spec_over(tmp_path, {"path": "missing.jsonl", "input": "question"})
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2 and len(lines) == 1 and "missing.jsonl" in lines[0]
    assert not store.exists()


def test_cli_prompt_naming_a_missing_field(tmp_path, capsys):
    write_jsonl(
        tmp_path / "data.jsonl", [{"id": "a", "question": "q", "topic": "t"}, {"id": "b", "question": "r"}]
    )
    spec = spec_over(
        tmp_path, {"path": "data.jsonl", "id": "id", "input": "question"}, prompt="{topic}: {question}"
    )
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2
    assert len(lines) == 1, lines
    assert "line 2 (id 'b')" in lines[0], "names the row"
    assert "target.prompt" in lines[0] and "'{topic}: {question}'" in lines[0], "names the template"
    assert "topic" in lines[0]
    assert not store.exists()


def test_the_same_problem_on_many_rows_is_one_line_and_a_cut_list_says_what_it_left_out(tmp_path, capsys):
    rows = [{"id": f"q{i}", "q": "x"} for i in range(40)] + [{"id": "z", "question": "3"}]
    write_jsonl(tmp_path / "data.jsonl", rows)
    spec = write_spec(
        tmp_path,
        name="bad",
        dataset={"path": "data.jsonl", "id": "id", "input": "question"},
        target={"kind": "python", "function": "m:f"},
        scorers=[{"kind": "exact_match"}],
    )
    (tmp_path / "m.py").write_text("def f(x):\n    return x\n")
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'data.jsonl'}: lines 1, 2, 3, 4, 5 and 35 more (40 rows): field 'question' "
        "(dataset.input) is missing; the row has 'id', 'q'\n"
    )

    # Sixty different problems: fifty shown, then how many were not.
    write_jsonl(tmp_path / "data.jsonl", [{"id": f"q{i}", f"f{i}": "x"} for i in range(60)])
    with pytest.raises(DatasetError) as caught:
        load_items(DatasetSpec(path="data.jsonl", id="id", input="question"), tmp_path)
    assert len(caught.value.problems) == 51
    assert caught.value.problems[-1] == "... and 10 more problems not shown"
