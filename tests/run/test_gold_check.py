"""The judge self-check: a scorer declaring `gold_check` must pass the gold answer before anything runs."""

from __future__ import annotations

import json

from assay.cli import main
from assay.store import Store
from tests.conftest import write_jsonl, write_spec


def spec_with_judge(tmp_path, base_url):
    rows = [{"input": f"say {i}", "expected": f"SAY {i}"} for i in range(5)]
    return judge_spec(tmp_path, base_url, rows, [{"kind": "exact_match"}], gold_check=True)


def test_a_judge_that_fails_the_gold_answer_makes_the_eval_unavailable(tmp_path, mock, capsys):
    mock.configure(answers={"*": '{"score": 0, "explanation": "wrong"}'})
    spec = spec_with_judge(tmp_path, mock.base_url)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 2
    captured = capsys.readouterr()
    assert "unavailable, nothing ran" in captured.err and "gold check" in captured.err
    summary = json.loads(captured.out)
    record = Store(tmp_path / "s").read_run(summary["run_id"])
    assert (
        record["status"] == "unavailable" and "'judge' failed its gold check" in record["unavailable_reason"]
    )
    assert Store(tmp_path / "s").run_items(summary["run_id"]).height == 0, "nothing ran"
    assert mock.stats()["requests"] == 1, "only the self-check's judge call"


def test_a_judge_that_passes_the_gold_answer_lets_the_run_go(tmp_path, mock, capsys):
    mock.configure(answers={"*": '{"score": 1, "explanation": "right"}'})
    spec = spec_with_judge(tmp_path, mock.base_url)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed" and summary["items"]["completed"] == 5
    assert mock.stats()["requests"] == 1 + 5


def judge_spec(tmp_path, base_url, rows, others=(), **judge):
    """A spec whose judge mentions gold_check only if `judge` does, beside the `others` scorers."""
    (tmp_path / "gold_solver.py").write_text("def solve(x):\n    return x.upper()\n")
    write_jsonl(tmp_path / "d.jsonl", rows)
    judge_scorer = {
        "kind": "llm_judge",
        "name": "judge",
        "base_url": base_url,
        "model": "mock-judge",
        **judge,
    }
    return write_spec(
        tmp_path,
        name="gold",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "gold_solver:solve"},
        scorers=[*others, judge_scorer],
    )


ROWS = [{"input": f"say {i}", "expected": f"SAY {i}"} for i in range(3)]


def test_the_gold_check_is_on_by_default_for_a_judge(tmp_path, mock, capsys):
    """As agent-bench's verifyJudge: on unless turned off."""
    mock.configure(answers={"*": '{"score": 0, "explanation": "wrong"}'})
    spec = judge_spec(tmp_path, mock.base_url, ROWS)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 2
    assert "'judge' failed its gold check" in capsys.readouterr().err
    assert mock.stats()["requests"] == 1


def test_gold_check_false_turns_it_off(tmp_path, mock, capsys):
    mock.configure(answers={"*": '{"score": 0, "explanation": "wrong"}'})
    spec = judge_spec(tmp_path, mock.base_url, ROWS, gold_check=False)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"]["completed"] == 3
    assert mock.stats()["requests"] == 3, "no self-check call"


def test_without_an_expected_answer_the_default_check_is_left_out(tmp_path, mock, capsys):
    mock.configure(answers={"*": '{"score": 1, "explanation": "fine"}'})
    rows = [{"input": r["input"]} for r in ROWS]
    spec = judge_spec(tmp_path, mock.base_url, rows)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    assert mock.stats()["requests"] == 3
    capsys.readouterr()
    # Asked for in so many words, it cannot be made: bad input.
    spec = judge_spec(tmp_path, mock.base_url, rows, gold_check=True)
    assert main(["run", str(spec), "--store", str(tmp_path / "s2"), "--json"]) == 2
    assert "gold_check (judge): the dataset has no expected answer" in capsys.readouterr().err
