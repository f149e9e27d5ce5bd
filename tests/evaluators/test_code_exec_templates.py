"""`code_exec` per item: checks, a `files` folder's path and a `files` mapping (the check program)
filled from the item's fields — HumanEval's `test` + `check(entry_point)` (examples/humaneval),
MBPP's asserts, a SWE-style test command — run on the real Docker engine; a placeholder no item
can fill is a spec error before anything runs, and the folders' content is the run's identity."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from assay.cli import main
from assay.run.checks import validate
from assay.run.identity import identity_of
from assay.store import Store
from tests.conftest import REPO, only_run_id, write_jsonl, write_spec

EXAMPLE = REPO / "examples" / "humaneval"


def _humaneval_copy(folder: Path, **scorer: object) -> Path:
    """The example in `folder`, its scorer's fields replaced by `scorer`."""
    shutil.copytree(EXAMPLE, folder, dirs_exist_ok=True)
    spec = yaml.safe_load((folder / "spec.yaml").read_text())
    spec["scorers"][0].update(scorer)
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "spec.yaml"


@pytest.mark.docker
def test_the_humaneval_example_checks_each_problem_with_its_own_tests(tmp_path, capsys):
    from tests.helpers.sandbox_images import python_image

    spec = _humaneval_copy(tmp_path / "eval", image=python_image())
    store = tmp_path / "store"
    assert main(["run", str(spec), "--store", str(store), "--json"]) == 0, capsys.readouterr().err
    run_id = only_run_id(store)
    scores = {row["item_id"]: row for row in Store(store).run_scores(run_id).to_dicts()}
    assert {item: row["score"] for item, row in scores.items()} == {
        "Mini/0": 1.0,
        "Mini/1": 1.0,
        "Mini/2": 1.0,
        "Mini/3": 1.0,
        "Mini/4": 0.0,  # the solver's wrong answer, caught by that problem's own check
    }
    (check,) = json.loads(scores["Mini/4"]["metadata"])["checks"]
    assert check["check"] == "python3 check.py" and check["exit_code"] == 1
    assert (
        "check(second_largest)" in check["stderr"]
        and "assert candidate([4, 1, 4, 3]) == 3" in check["stderr"]
    )


@pytest.mark.docker
def test_mbpp_asserts_a_test_command_and_a_folder_per_item(tmp_path, capsys):
    from tests.helpers.sandbox_images import python_image

    for suite, expected in (("add", "5"), ("mul", "6")):
        (tmp_path / "suites" / suite).mkdir(parents=True)
        (tmp_path / "suites" / suite / "want.txt").write_text(expected + "\n")
    (tmp_path / "gen.py").write_text("def generate(text):\n    return text\n")
    rows = [
        {
            "id": "add",
            "input": "def f(a, b):\n    return a + b\n",
            "suite": "add",
            "asserts": ["assert f(2, 3) == 5", "assert f(0, 0) == 0"],
            "command": "python3 -c 'from solution import f; print(f(2, 3))' > got.txt && cmp got.txt want.txt",
        },
        {
            "id": "mul",
            "input": "def f(a, b):\n    return a + b\n",  # wrong: the suite multiplies
            "suite": "mul",
            "asserts": ["assert f(2, 3) == 6", "assert f(1, 1) == 1"],
            "command": "python3 -c 'from solution import f; print(f(2, 3))' > got.txt && cmp got.txt want.txt",
        },
    ]
    write_jsonl(tmp_path / "data.jsonl", rows)
    spec = write_spec(
        tmp_path,
        name="per-item",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "gen:generate"},
        scorers=[
            {
                "kind": "code_exec",
                "name": "asserts",
                "where": "fresh",
                "image": python_image(),
                "files": {"test_{id}.py": "from solution import *\n{asserts[0]}\n{asserts[1]}\n"},
                "checks": ["python3 test_{id}.py"],
            },
            {
                "kind": "code_exec",
                "name": "suite",
                "where": "fresh",
                "image": python_image(),
                "files": "suites/{suite}",
                "checks": ["{command}", "test -f want.txt"],
            },
        ],
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "store"), "--json"]) == 0, (
        capsys.readouterr().err
    )
    scores = Store(tmp_path / "store").run_scores(only_run_id(tmp_path / "store")).to_dicts()
    by_key = {(row["item_id"], row["scorer"]): row for row in scores}
    assert by_key[("add", "asserts")]["score"] == 1.0 and by_key[("mul", "asserts")]["score"] == 0.0
    ran = json.loads(by_key[("mul", "asserts")]["metadata"])["checks"][0]
    assert ran["check"] == "python3 test_mul.py" and "assert f(2, 3) == 6" in ran["stderr"]
    # The add suite's folder (want.txt = 5) for add; the mul suite's (6) for mul: 1 of 2 fails.
    assert by_key[("add", "suite")]["score"] == 1.0 and by_key[("mul", "suite")]["score"] == 0.5


def _spec(folder: Path, scorer: dict, rows: list[dict] | None = None) -> Path:
    write_jsonl(
        folder / "data.jsonl",
        rows or [{"task_id": "t0", "prompt": "p", "test": "assert True", "entry_point": "f"}],
    )
    (folder / "gen.py").write_text("def generate(text):\n    return text\n")
    return write_spec(
        folder,
        name="templated",
        dataset={"path": "data.jsonl", "id": "task_id", "input": "prompt"},
        target={"kind": "python", "function": "gen:generate"},
        scorers=[{"kind": "code_exec", "where": "fresh", "image": "none:1", **scorer}],
    )


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        (
            {"files": {"check.py": "{test}\ncheck({entrypoint})"}, "checks": ["python3 check.py"]},
            "scorers.0.files.check.py: {entrypoint} names no field of the dataset; did you mean 'entry_point'?",
        ),
        (
            {"checks": ["pytest {tests}"]},
            "scorers.0.checks.0: {tests} names no field of the dataset; did you mean 'test'?",
        ),
        (
            {"files": "suites/{task}", "checks": ["true"]},
            "scorers.0.files: {task} names no field of the dataset; did you mean 'task_id'?",
        ),
        (
            {"checks": ["run {zzz}"]},
            (
                "scorers.0.checks.0: {zzz} names no field of the dataset; its fields: entry_point, "
                "expected, input, prompt, task_id, test"
            ),
        ),
    ],
)
def test_a_placeholder_no_item_can_fill_is_a_spec_error_with_the_nearest_field(
    scorer, message, tmp_path, capsys
):
    spec = _spec(tmp_path, scorer)
    assert main(["run", str(spec), "--store", str(tmp_path / "store")]) == 2
    assert capsys.readouterr().err == f"error: {spec}: {message}\n"
    assert not (tmp_path / "store").exists(), "nothing written"


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        ({"checks": ["python3 -c '{output}'"]}, "checks.0: a check cannot name {output}"),
        ({"checks": ["awk '{print $1}' x"]}, "write {{ and }} for a literal brace"),
        ({"checks": ["true"], "files": {"../escape.py": "x"}}, "is not a relative path below /workspace"),
        ({"checks": ["true"], "files": {"solution.py": "x"}}, "where the output goes (output_file)"),
    ],
)
def test_templates_that_cannot_work_are_refused_when_the_spec_loads(scorer, message, tmp_path, capsys):
    assert main(["run", str(_spec(tmp_path, scorer)), "--store", str(tmp_path / "store")]) == 2
    assert message in capsys.readouterr().err


def test_an_item_that_lacks_a_field_or_its_folder_is_named(tmp_path, capsys):
    (tmp_path / "suites" / "a").mkdir(parents=True)
    rows = [
        {"task_id": "t0", "prompt": "p", "suite": "a", "cmd": "true"},
        {"task_id": "t1", "prompt": "p", "suite": "b", "cmd": "true"},
        {"task_id": "t2", "prompt": "p", "suite": "a"},
    ]
    spec = _spec(tmp_path, {"files": "suites/{suite}", "checks": ["{cmd}"]}, rows)
    assert main(["run", str(spec), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert (
        f"item 1 (id 't1'): scorers.0.files: 'suites/{{suite}}' is '{tmp_path}/suites/b', which is no folder"
        in err
    )
    assert "item 2 (id 't2'): scorers.0.checks.0: this item has no field 'cmd'" in err
    assert "t0" not in err


def test_a_changed_file_in_an_items_folder_changes_the_runs_identity(tmp_path):
    for suite in ("a", "b"):
        (tmp_path / "suites" / suite).mkdir(parents=True)
        (tmp_path / "suites" / suite / "test.sh").write_text("true\n")
    rows = [{"task_id": "t0", "prompt": "p", "suite": "a"}, {"task_id": "t1", "prompt": "p", "suite": "b"}]
    spec_path = _spec(tmp_path, {"files": "suites/{suite}", "checks": ["sh test.sh"]}, rows)
    spec, items = validate(spec_path)
    before = identity_of(spec, items, tmp_path)
    (tmp_path / "suites" / "b" / "test.sh").write_text("false\n")
    after = identity_of(spec, items, tmp_path)
    assert after.differences(before) == ["the fixture files' content"]
