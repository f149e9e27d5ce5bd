"""`assay show` says what a run's answers were beyond words: how many items answered with tool
calls (and how many calls), how many reasoned (and the reasoning tokens) — over the run of
tests/report/test_report_model_io.py (one item of tool calls, one of reasoning). A plain run says nothing."""

from __future__ import annotations

import json

from assay.cli import main
from assay.store import Store
from tests.conftest import openai_spec
from tests.report.test_report_model_io import run  # noqa: F401  (a fixture)


def test_show_counts_tool_call_answers_and_reasoning(run, capsys):  # noqa: F811
    assert main(["show", str(run["run"]), "--store", str(run["store"]), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["answers"] == {"tool_calls": 1, "calls": 1, "reasoned": 1}
    assert main(["show", str(run["run"]), "--store", str(run["store"])]) == 0
    assert "answers: 1 as tool calls (1 call) · 1 reasoned (25 reasoning tokens)" in capsys.readouterr().out


def test_a_plain_run_shows_no_answers_line(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=2)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "-q"]) == 0
    run_id = Store(tmp_path / "s").runs().collect()["run_id"][0]
    capsys.readouterr()
    assert main(["show", run_id, "--store", str(tmp_path / "s"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answers"] == {"tool_calls": 0, "calls": 0, "reasoned": 0}
    assert main(["show", run_id, "--store", str(tmp_path / "s")]) == 0
    assert "answers:" not in capsys.readouterr().out
