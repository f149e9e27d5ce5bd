"""`assay labels import | export | sample` and `assay agreement` against a real store: bad label
files name their lines and write nothing (exit 2), labels are revisions, a changed output makes a
label stale while a rescore keeps it, and a sample is the same list for the same seed."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from assay import _schema
from assay.cli import EXIT_INPUT
from assay.store import Store
from assay.store.labels import read_labels, run_labels
from tests.helpers.cli import REPO, assay_json, assay_out


def _write_run(
    store: Store,
    run_id: str,
    judge: list[float],
    *,
    outputs: list[str] | None = None,
    source: str | None = None,
    retry: int = 0,
    part: str = "a",
) -> None:
    """A finished run whose scorer `judge` gave these scores, item i's output `out<i>`."""
    record: dict = {
        "kind": "run",
        "name": "judged",
        "status": "completed",
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
        "trials": 1,
        "spec_json": "{}",
        "fail_on_item_error_rate": 0.05,
        "n_planned": len(judge),
    }
    if source:
        record |= {"kind": "rescore", "source_run_id": source}
    store.write_run(run_id, record)
    outputs = outputs or [f"out{i}" for i in range(len(judge))]
    items = [
        {
            "item_id": f"i{i:03d}",
            "item_index": i,
            "trial": 0,
            "outcome": "completed",
            "retry": retry,
            "output": json.dumps(outputs[i]),
            "output_text": outputs[i],
            "input": json.dumps(f"q{i}"),
            "annotations": json.dumps({"topic": "a" if i % 2 else "b"}),
        }
        for i in range(len(judge))
    ]
    scores = [
        {
            "item_id": r["item_id"],
            "item_index": r["item_index"],
            "trial": 0,
            "kind": "score",
            "scorer": "judge",
            "scorer_kind": "llm_judge",
            "score": s,
            "value": s,
            "outcome": "scored",
        }
        for r, s in zip(items, judge, strict=True)
    ]
    store.commit_batch(
        run_id,
        f"part-00000-{part}",
        pa.Table.from_pylist(items, schema=_schema.ITEMS),
        pa.Table.from_pylist(scores, schema=_schema.SCORES),
    )


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    _write_run(Store(path), "r1", [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
    return path


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_bad_label_file_names_each_bad_line_and_writes_nothing(store_path, tmp_path, capsys):
    bad = tmp_path / "labels.csv"
    bad.write_text(
        "item_id,value,labeller,trial\n"
        "i000,1,ann,0\n"  # line 2: good
        "i001,1.5,ann,0\n"  # line 3: value out of range
        "nope,1,ann,0\n"  # line 4: no such item
        "i002,1,,0\n"  # line 5: no labeller
        "i003,yes,ann,x\n"  # line 6: value and trial
    )
    printed = assay_out(
        capsys,
        "labels",
        "import",
        bad,
        "--run",
        "r1",
        "--scorer",
        "judge",
        "--store",
        store_path,
        code=EXIT_INPUT,
    )
    assert "line 3: value '1.5' is not a number in [0, 1]" in printed.err
    assert "line 4: run 'r1' has no item 'nope' trial 0" in printed.err
    assert "line 5: labeller is missing" in printed.err
    assert "line 6: value 'yes'" in printed.err and "line 6: trial 'x'" in printed.err
    assert "line 2" not in printed.err
    assert read_labels(Store(store_path), "r1").is_empty()
    assert not (store_path / "labels").exists()


def test_an_unknown_scorer_column_or_file_kind_is_refused(store_path, tmp_path, capsys):
    rows = [
        {"run_id": "r1", "item_id": "i000", "value": 1, "labeller": "ann", "scorer": "jugde"},
        {"run_id": "r1", "item_id": "i001", "vaule": 1, "labeller": "ann", "scorer": "judge"},
    ]
    printed = assay_out(
        capsys, "labels", "import", _jsonl(tmp_path / "l.jsonl", rows), "--store", store_path, code=EXIT_INPUT
    )
    assert "line 1: run 'r1' has no scorer 'jugde'" in printed.err
    assert "line 2: unknown column 'vaule'" in printed.err
    (tmp_path / "l.txt").write_text("x")
    printed = assay_out(
        capsys, "labels", "import", tmp_path / "l.txt", "--store", store_path, code=EXIT_INPUT
    )
    assert "is .csv, .jsonl or .parquet" in printed.err


def test_imports_are_revisions_and_export_gives_the_current_labels(store_path, tmp_path, capsys):
    first = [{"item_id": "i000", "value": 0}, {"item_id": "i001", "value": 0}]
    args = ("--run", "r1", "--scorer", "judge", "--labeller", "ann", "--store", store_path)
    done = assay_json(capsys, "labels", "import", _jsonl(tmp_path / "a.jsonl", first), *args)
    assert done == {"runs": {"r1": {"revision": 1, "labels": 2}}}
    done = assay_json(
        capsys, "labels", "import", _jsonl(tmp_path / "b.jsonl", [{"item_id": "i000", "value": 1}]), *args
    )
    assert done["runs"]["r1"]["revision"] == 2
    exported = [
        json.loads(line)
        for line in assay_out(capsys, "labels", "export", "r1", "--store", store_path).out.splitlines()
    ]
    assert {(r["item_id"], r["value"], r["revision"]) for r in exported} == {
        ("i000", 1.0, 2),
        ("i001", 0.0, 1),
    }
    assert len(read_labels(Store(store_path), "r1", history=True)) == 3


def test_a_changed_output_makes_a_label_stale_and_a_rescore_keeps_it(store_path, tmp_path, capsys):
    store = Store(store_path)
    args = ("--run", "r1", "--scorer", "judge", "--labeller", "ann", "--store", store_path)
    assay_json(
        capsys,
        "labels",
        "import",
        _jsonl(tmp_path / "a.jsonl", [{"item_id": "i000", "value": 1}, {"item_id": "i001", "value": 0}]),
        *args,
    )
    _write_run(store, "r2", [1.0] * 10, source="r1")  # a rescore: the same outputs, scored again
    assert run_labels(store, "r2")["stale"].to_list() == [False, False]
    # The same labels (with the outputs they judged) imported for a new run of the spec, whose
    # item i000 answered otherwise: that label is stale there, i001's still holds.
    exported = assay_out(capsys, "labels", "export", "r1", "--store", store_path).out
    outputs = [f"out{i}" if i else "a new answer" for i in range(10)]
    _write_run(store, "r3", [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], outputs=outputs)
    moved = tmp_path / "moved.jsonl"
    moved.write_text(
        "".join(
            json.dumps({k: v for k, v in json.loads(line).items() if k not in ("revision", "run_id")}) + "\n"
            for line in exported.splitlines()
        )
    )
    assay_json(capsys, "labels", "import", moved, "--run", "r3", "--store", store_path)
    stale = dict(run_labels(store, "r3").select("item_id", "stale").iter_rows())
    assert stale == {"i000": True, "i001": False}
    report = assay_json(capsys, "agreement", "r3", "--scorer", "judge", "--store", store_path)
    assert report["n_stale"] == 1 and report["n_labelled"] == 1


def test_a_sample_is_reproducible_and_records_its_chances(store_path, tmp_path, capsys):
    base = ("labels", "sample", "r1", "--scorer", "judge", "--n", "4", "--store", store_path)
    one = assay_out(capsys, *base, "--seed", "7").out
    assert one == assay_out(capsys, *base, "--seed", "7").out
    tasks = [json.loads(line) for line in one.splitlines()]
    assert len(tasks) == 4 and {t["inclusion_probability"] for t in tasks} == {0.4}
    stratified = [
        json.loads(line) for line in assay_out(capsys, *base, "--strategy", "stratified").out.splitlines()
    ]
    # 3 zeros and 7 ones: two each, so chances 2/3 and 2/7
    assert sorted({round(t["inclusion_probability"], 4) for t in stratified}) == [0.2857, 0.6667]
    out = tmp_path / "tasks.csv"
    assert assay_json(capsys, *base, "--out", out) == {"path": str(out), "tasks": 4}
    # the task list, filled in, imports as it is
    with out.open(newline="") as handle:
        filled = [row | {"value": "1", "labeller": "ann"} for row in csv.DictReader(handle)]
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(filled[0]))
        writer.writeheader()
        writer.writerows(filled)
    assert assay_json(capsys, "labels", "import", out, "--store", store_path)["runs"]["r1"]["labels"] == 4
    with pytest.raises(SystemExit) as exited:
        assay_out(capsys, *base, "--strategy", "guess")
    assert exited.value.code == EXIT_INPUT


def test_compare_with_labels_gates_on_the_corrected_delta_and_shows_the_raw_one(tmp_path, capsys):
    store_path = tmp_path / "store"
    store = Store(store_path)
    # The judge passes everything on both runs; people pass all 20 labelled items of the
    # baseline and half of the candidate's: the judge sees no change, people a regression.
    _write_run(store, "base", [1.0] * 40)
    _write_run(store, "cand", [1.0] * 40)
    labelled = [f"i{i:03d}" for i in range(20)]
    args = ("--scorer", "judge", "--labeller", "ann", "--store", store_path)
    assay_json(
        capsys,
        "labels",
        "import",
        _jsonl(tmp_path / "b.jsonl", [{"item_id": i, "value": 1} for i in labelled]),
        "--run",
        "base",
        *args,
    )
    assay_json(
        capsys,
        "labels",
        "import",
        _jsonl(tmp_path / "c.jsonl", [{"item_id": i, "value": n % 2} for n, i in enumerate(labelled)]),
        "--run",
        "cand",
        *args,
    )
    raw = assay_json(capsys, "compare", "base", "--candidate", "cand", "--store", store_path)
    assert raw["passed"] is True and raw["scorers"][0]["verdict"] == "unchanged"
    gated = assay_json(
        capsys, "compare", "base", "--candidate", "cand", "--labels", "--store", store_path, code=1
    )
    found = gated["labels"]["corrected"]["judge"]
    assert found["verdict"] == "regressed" and found["judge_verdict"] == "unchanged"
    assert found["corrected_delta"]["estimate"] == pytest.approx(-0.5)
    assert found["corrected_delta"]["n_labelled"] == 20 and found["n_pairs"] == 40
    assert any("corrected by 20 labels" in line and "raw judge" in line for line in gated["lines"])
    assert not gated["passed"] and any("corrected by 20 labels" in m for m in gated["failed_gates"])
    # the stored comparison holds the corrected figures too
    folder = store_path / "comparisons" / f"comparison_id={gated['comparison_id']}"
    stored = json.loads((folder / "comparison.json").read_text())
    assert stored["labels"]["corrected"]["judge"]["verdict"] == "regressed"
    # no labels on a run: refused, exit 2
    _write_run(store, "bare", [1.0] * 40)
    printed = assay_out(
        capsys, "compare", "base", "--candidate", "bare", "--labels", "--store", store_path, code=EXIT_INPUT
    )
    assert "no scorer has labels to correct with" in printed.err


def test_show_puts_the_corrected_mean_beside_the_raw_judges(store_path, tmp_path, capsys):
    # Judge passes 7 of 10; people fail two of the five labelled passes.
    labels = [{"item_id": f"i{i:03d}", "value": v} for i, v in ((0, 1), (1, 0), (2, 0), (3, 0), (4, 0))]
    args = ("--run", "r1", "--scorer", "judge", "--labeller", "ann", "--store", store_path)
    assay_json(capsys, "labels", "import", _jsonl(tmp_path / "a.jsonl", labels), *args)
    summary = assay_json(capsys, "show", "r1", "--store", store_path)
    found = summary["labels"]["judge"]
    assert found["judge_mean"]["estimate"] == pytest.approx(0.7)
    assert found["corrected_mean"]["n_labelled"] == 5 and found["corrected_mean"]["method"] == "ppi++"
    printed = assay_out(capsys, "show", "r1", "--store", store_path).out
    assert "judge: raw judge 0.7" in printed and "corrected by 5 labels" in printed
    bare = tmp_path / "bare"
    _write_run(Store(bare), "r9", [1.0, 0.0])
    assert "labels" not in assay_json(capsys, "show", "r9", "--store", bare)


def test_the_worked_example_corrects_its_judge(tmp_path, capsys):
    folder = REPO / "examples" / "judge_labels"
    store_path = tmp_path / "store"
    assay_json(capsys, "run", folder / "spec.yaml", "--store", store_path)
    assay_json(
        capsys,
        "labels",
        "import",
        folder / "labels.csv",
        "--run",
        "latest",
        "--scorer",
        "judge",
        "--store",
        store_path,
    )
    report = assay_json(capsys, "agreement", "latest", "--scorer", "judge", "--store", store_path)
    assert report["agreement"]["accuracy"]["value"] == 0.7 and report["agreement"]["confusion"]["fn"] == 5
    assert report["judge_mean"]["estimate"] == 0.75
    assert report["corrected_mean"]["estimate"] == pytest.approx(0.95)
