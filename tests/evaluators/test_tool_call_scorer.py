"""The `tool_call` scorer: the BFCL-style suite in tests/data/tool_calls (each case's verdict and
the explanation of its first mismatch), its validation at spec and dataset load, and a whole run
whose python target answers with calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from assay.calls.messages import ToolCall
from assay.cli import main
from assay.evaluators import Sample, ScorerSpec, ToolCallMatch, evaluate
from assay.outcomes import ScorerOutcome
from assay.store import Store
from tests.conftest import write_jsonl, write_spec

SUITE = Path(__file__).parents[1] / "data" / "tool_calls"
TOOLS: dict[str, dict[str, Any]] = json.loads((SUITE / "tools.json").read_text())
CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", "type_tolerance")


def _cases() -> list[Any]:
    cases = []
    for category in CATEGORIES:
        for line in (SUITE / f"{category}.jsonl").read_text().splitlines():
            case = json.loads(line)
            cases.append(pytest.param(case, id=case["id"]))
    return cases


CASES = _cases()


def _sample(case: dict[str, Any], **fields: Any) -> Sample:
    calls = case["calls"]
    return Sample(
        output=case.get("output"),
        input="",
        expected=case["expected"],
        fields=fields,
        tool_calls=None if calls is None else [ToolCall(**call) for call in calls],
    )


def test_the_suite_has_at_least_fifty_cases_in_bfcl_categories():
    counts = {c: len((SUITE / f"{c}.jsonl").read_text().splitlines()) for c in CATEGORIES}
    assert sum(counts.values()) >= 50 and all(counts.values()), counts
    ids = [case.values[0]["id"] for case in CASES]
    assert len(ids) == len(set(ids)), "case ids are unique"
    verdicts = [case.values[0]["verdict"] for case in CASES]
    assert verdicts.count(0) >= 20 and verdicts.count(1) >= 20, "both verdicts well represented"


@pytest.mark.parametrize("case", CASES)
def test_suite_case(case: dict[str, Any]):
    scorer = ToolCallMatch(tools=[TOOLS[name] for name in case["tools"]], **case.get("scorer", {}))
    record = asyncio.run(evaluate(scorer, _sample(case)))
    assert record.outcome == ScorerOutcome.SCORED, record.error
    assert record.score == case["verdict"], record.explanation
    if case["verdict"] == 0:
        assert record.explanation is not None and case["why"] in record.explanation, record.explanation
    else:
        assert record.explanation is None


def test_expected_calls_come_from_the_spec_or_a_dataset_field():
    call = [ToolCall(name="get_weather", arguments={"city": "Paris"})]
    from_spec = ToolCallMatch(expected=[{"name": "get_weather", "arguments": {"city": "Paris"}}])
    assert from_spec.score(Sample(output=None, input="", tool_calls=call)).value == 1.0
    from_field = ToolCallMatch(expected={"field": "gold_calls"})
    sample = Sample(
        output=None,
        input="",
        expected="ignored",
        fields={"gold_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
        tool_calls=call,
    )
    assert (
        from_field.score(sample).explanation
        == 'call 1 (get_weather): argument \'city\': got "Paris", expected "Oslo"'
    )


def test_an_output_that_is_a_list_of_calls_is_read_when_there_are_no_tool_calls():
    scorer = ToolCallMatch(expected=[{"name": "add", "arguments": {"a": 1, "b": 2}}])
    as_dicts = Sample(output=[{"name": "add", "arguments": {"a": 1, "b": 2.0}}], input="")
    assert scorer.score(as_dicts).value == 1.0
    # OpenAI's wire shape, arguments still JSON text.
    openai_shaped = Sample(
        output=[{"type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}], input=""
    )
    assert scorer.score(openai_shaped).value == 1.0
    words = Sample(output="add(1, 2)", input="")
    assert (
        scorer.score(words).explanation
        == "expected add(a=1, b=2); the model made no call (it answered in words)"
    )


class _Spec(BaseModel):
    scorers: list[ScorerSpec]


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        ({"expected": [{"name": "f", "argument": {}}]}, "call 1: argument: Extra inputs are not permitted"),
        ({"expected": [{"name": "f"}, [{"name": "g"}]]}, "not both"),
        (
            {"expected": [{"name": "f", "arguments": {"a": 1}, "one_of": {"a": [1, 2]}}]},
            "both arguments and one_of",
        ),
        ({"expected": [{"name": "f", "optional": ["a"]}]}, "optional names 'a'"),
        ({"expected": [{"f": {"a": 1}}], "format": "bfcl"}, "BFCL lists a parameter's acceptable values"),
        (
            {"tools": [{"type": "function", "function": {"parameters": {}}}]},
            "tools.0: a tool definition needs a `name`",
        ),
        ({"mode": "fuzzy"}, "mode"),
    ],
)
def test_a_bad_scorer_spec_is_refused_at_load(scorer: dict[str, Any], message: str):
    with pytest.raises(ValidationError, match="tool_call") as caught:
        _Spec.model_validate({"scorers": [{"kind": "tool_call", **scorer}]})
    assert message in str(caught.value)


def _caller_spec(folder: Path, rows: list[dict[str, Any]], scorer: dict[str, Any]) -> Path:
    """A spec whose python target answers a weather question with a call and anything else in words."""
    (folder / "caller.py").write_text(
        "def call(question):\n"
        "    if 'weather' not in question:\n"
        "        return 'I cannot help with that.'\n"
        "    city = question.rsplit(' ', 1)[-1]\n"
        "    return [{'name': 'get_weather', 'arguments': {'city': city.lower()}}]\n"
    )
    write_jsonl(folder / "d.jsonl", rows)
    return write_spec(
        folder,
        name="tools",
        dataset={"path": "d.jsonl", "id": "id", "input": "question"},
        target={"kind": "python", "function": "caller:call"},
        scorers=[{"kind": "tool_call", **scorer}],
    )


def test_a_run_scores_a_python_target_that_answers_with_calls(tmp_path: Path, capsys):
    rows = [
        {
            "id": "paris",
            "question": "weather in Paris",
            "calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        },
        {
            "id": "rome",
            "question": "weather in Rome",
            "calls": [{"name": "get_weather", "arguments": {"city": "Milan"}}],
        },
        {"id": "poem", "question": "write a poem", "calls": []},
        {"id": "nocall", "question": "a poem about weather in Oslo", "calls": []},
    ]
    spec = _caller_spec(tmp_path, rows, {"expected": {"field": "calls"}, "tools": [TOOLS["get_weather"]]})
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    scores = Store(tmp_path / "s").run_scores(run_id)
    verdicts = {row["item_id"]: (row["score"], row["explanation"]) for row in scores.iter_rows(named=True)}
    assert verdicts == {
        "paris": (1.0, None),
        "rome": (0.0, 'call 1 (get_weather): argument \'city\': got "rome", expected "Milan"'),
        "poem": (1.0, None),
        "nocall": (0.0, 'expected no call; the model called get_weather(city="oslo")'),
    }


def test_a_dataset_row_whose_expected_calls_are_unreadable_is_refused_before_the_run(tmp_path: Path, capsys):
    rows = [
        {"id": "ok", "question": "weather in Paris", "calls": []},
        {
            "id": "bad",
            "question": "weather in Rome",
            "calls": [{"name": "get_weather", "args": {"city": "Rome"}}],
        },
    ]
    spec = _caller_spec(tmp_path, rows, {"expected": {"field": "calls"}})
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "item 1 (id 'bad'): scorers.0.expected: call 1: args: Extra inputs are not permitted" in err
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").rglob("*.parquet")), "nothing written"


def test_a_field_no_row_has_is_a_spec_error(tmp_path: Path, capsys):
    rows = [{"id": "a", "question": "weather in Paris", "calls": []}]
    spec = _caller_spec(tmp_path, rows, {"expected": {"field": "cals"}})
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert "scorers.0.expected.field: 'cals' names no field of the dataset" in capsys.readouterr().err


EXAMPLE = Path(__file__).parents[2] / "examples" / "tool_calls" / "spec.yaml"


def _verdicts(store: Path, run_id: str) -> dict[tuple[str, str], float | None]:
    scores = Store(store).run_scores(run_id)
    return {(row["item_id"], row["scorer"]): row["score"] for row in scores.iter_rows(named=True)}


def test_the_example_runs_and_a_rescore_reads_the_stored_calls(tmp_path: Path, capsys):
    store = tmp_path / "s"
    assert main(["run", str(EXAMPLE), "--store", str(store), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    verdicts = _verdicts(store, run_id)
    assert {item: v for (item, scorer), v in verdicts.items() if scorer == "tool_call"} == {
        "paris": 1.0,
        "tokyo-time": 1.0,  # "asia/tokyo", one of the acceptable values once normalised
        "both": 1.0,
        "fahrenheit": 0.0,  # left out: the schema's default, celsius
        "haiku": 1.0,  # no call expected, a reply in words
    }
    assert verdicts["both", "weather_before_time"] == 1.0, "the trajectory of a python target's calls"
    # A rescore scores the stored outputs: the calls come back from the store, not the target.
    strict = "{kind: tool_call, name: strict, mode: exact}"
    assert main(["rescore", run_id, "--store", str(store), "--scorer", strict, "--json"]) == 0
    rescored = _verdicts(store, json.loads(capsys.readouterr().out)["run_id"])
    assert {item: v for (item, scorer), v in rescored.items() if scorer == "strict"} == {
        "paris": 1.0,
        "tokyo-time": 0.0,
        "both": 1.0,
        "fahrenheit": 0.0,
        "haiku": 1.0,
    }
