"""The scorers in `evaluators`: their verdicts, their validation at spec load, and `evaluate()`'s rules."""

from __future__ import annotations

import asyncio
import math
import sys
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError

from assay.calls.messages import ToolCall
from assay.evaluators import (
    SCORER_KINDS,
    ExactMatch,
    Includes,
    JsonSchema,
    JsonValid,
    Numeric,
    Regex,
    Sample,
    Score,
    Scorer,
    ScorerSpec,
    TokenF1,
    UserCode,
    evaluate,
)
from assay.evaluators._imports import import_callable
from assay.outcomes import ScorerOutcome

HELPERS = "tests.helpers.user_scorers"


class Spec(BaseModel):
    scorers: list[ScorerSpec]


class Returns(Scorer):
    """A scorer that returns (or raises) whatever it is given, for testing evaluate()."""

    kind: Literal["returns"] = "returns"
    value: Any = None
    raises: Any = None

    def score(self, sample: Sample) -> Any:
        if self.raises is not None:
            raise self.raises
        return self.value


def sample(output: Any, expected: Any = None, **kw: Any) -> Sample:
    return Sample(output=output, input=kw.pop("input", "q"), expected=expected, **kw)


def value(result: float | bool | Score) -> float:
    return float(result.value if isinstance(result, Score) else result)


def run(scorer: Scorer, s: Sample, **kw: Any):
    return asyncio.run(evaluate(scorer, s, **kw))


# --- the spec union ---------------------------------------------------------------------------


def test_spec_union_dispatches_on_kind_and_defaults_name() -> None:
    spec = Spec.model_validate(
        {
            "scorers": [
                {"kind": "exact_match", "case_insensitive": True},
                {"kind": "regex", "pattern": r"\d+", "name": "has_digits"},
                {"kind": "json_schema", "schema": {"type": "object"}},
            ]
        }
    )
    first, second, third = spec.scorers
    assert isinstance(first, ExactMatch) and first.case_insensitive and first.name == "exact_match"
    assert isinstance(second, Regex) and second.name == "has_digits"
    assert isinstance(third, JsonSchema) and third.schema_ == {"type": "object"}


def test_spec_round_trips_through_model_dump() -> None:
    spec = Spec.model_validate({"scorers": [{"kind": "json_schema", "schema": {"type": "array"}}]})
    dumped = spec.model_dump(mode="json")
    assert dumped["scorers"][0]["schema"] == {"type": "array"}
    assert Spec.model_validate(dumped) == spec


def test_scorer_kinds_lists_every_kind_sorted() -> None:
    assert SCORER_KINDS == [
        "code_exec",
        "exact_match",
        "includes",
        "json_schema",
        "json_valid",
        "llm_judge",
        "numeric",
        "regex",
        "remote",
        "token_f1",
        "tool_call",
        "trajectory",
        "user_code",
    ]


@pytest.mark.parametrize(
    ("scorer", "needle"),
    [
        ({"kind": "regex", "pattern": "(unclosed"}, "(unclosed"),
        ({"kind": "regex", "pattern": "a{2,1}"}, "a{2,1}"),
        ({"kind": "json_schema", "schema": {"type": "nope"}}, "invalid JSON Schema"),
        ({"kind": "json_schema", "schema": {"properties": {"a": {"minimum": "zero"}}}}, "minimum"),
        ({"kind": "exact_match", "ignore_case": True}, "Extra inputs are not permitted"),
        ({"kind": "json_schema", "schema_": {}}, "Extra inputs are not permitted"),
        ({"kind": "user_code", "function": "no_colon"}, "no_colon"),
        ({"kind": "user_code", "function": "mod:fn; rm -rf /"}, "module:function"),
        ({"kind": "user_code"}, "function"),
        ({"kind": "regex", "pattern": "a", "flags": ["caseless"]}, "caseless"),
        ({"kind": "numeric", "abs_tol": -1}, "abs_tol"),
        ({"kind": "includes", "value": []}, "at least one"),
        ({"kind": "exact_match", "applies": "not a ref"}, "applies"),
        ({"kind": "nope"}, "nope"),
    ],
)
def test_invalid_specs_fail_at_load(scorer: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        Spec.model_validate({"scorers": [scorer]})
    assert needle in str(info.value)


def test_regex_flags_are_applied_when_validating() -> None:
    # In verbose mode "#(" is a comment, so this pattern is valid only with the flag.
    Regex(pattern="a #(", flags=["verbose"])
    with pytest.raises(ValidationError):
        Regex(pattern="a #(")


# --- exact_match ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "output", "expected", "matches"),
    [
        ({}, "Paris", "Paris", True),
        ({}, " Paris\n", "Paris", True),
        ({"strip": False}, " Paris\n", "Paris", False),
        ({}, "paris", "Paris", False),
        ({"case_insensitive": True}, "PARIS", "Paris", True),
        ({}, "Paris.", "Paris", False),
        ({"ignore_punctuation": True}, "Paris.", "Paris", True),
        ({"ignore_punctuation": True}, "¡Hola!", "Hola", True),
        ({"ignore_punctuation": True}, "Paris !", "Paris", True),
        ({}, "New  York", "New York", False),
        ({"collapse_whitespace": True}, "New \t York", "New York", True),
        ({}, "3.0", "3", False),
        ({"normalize_numbers": True}, "3.0", "3", True),
        ({"normalize_numbers": True}, "1e3", 1000, True),
        ({"normalize_numbers": True}, "costs 3.50 now", "costs 3.5 now", True),
        ({"normalize_numbers": True}, "-0.0", "0", True),
        ({"normalize_numbers": True}, "3.01", "3", False),
        ({"normalize_numbers": True}, "v1.20", "v1.2", False),
        ({"normalize_numbers": True, "ignore_punctuation": True}, "3.0.", "3", True),
        ({}, "42", 42, True),
        ({}, "Lyon", ["Paris", "Lyon"], True),
        ({}, "Nice", ["Paris", "Lyon"], False),
    ],
)
def test_exact_match(options: dict[str, Any], output: str, expected: Any, matches: bool) -> None:
    assert ExactMatch(**options).score(sample(output, expected)) is matches


def test_exact_match_without_expected_is_a_scorer_error() -> None:
    with pytest.raises(ValueError, match="expected"):
        ExactMatch().score(sample("Paris"))


# --- includes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "output", "expected", "found"),
    [
        ({}, "The capital is Paris.", "Paris", True),
        ({}, "The capital is Lyon.", "Paris", False),
        ({}, "the capital is paris", "Paris", False),
        ({"case_insensitive": True}, "THE CAPITAL IS PARIS", "Paris", True),
        ({}, "Paris and Lyon", ["Nice", "Lyon"], True),
        ({"mode": "all"}, "Paris and Lyon", ["Nice", "Lyon"], False),
        ({"mode": "all"}, "Paris and Lyon", ["Paris", "Lyon"], True),
        ({"value": "sorry"}, "I'm sorry, I can't", "ignored", True),
        ({"value": ["sorry", "cannot"], "mode": "all"}, "I'm sorry, I can't", None, False),
    ],
)
def test_includes(options: dict[str, Any], output: str, expected: Any, found: bool) -> None:
    assert Includes(**options).score(sample(output, expected)) is found


def test_includes_without_expected_or_value_is_a_scorer_error() -> None:
    with pytest.raises(ValueError, match="expected"):
        Includes().score(sample("x"))


# --- regex ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "output", "matches"),
    [
        ({"pattern": r"\d{3}"}, "call 555-1234", True),
        ({"pattern": r"\d{3}"}, "no digits", False),
        ({"pattern": r"\d{3}", "mode": "fullmatch"}, "call 555", False),
        ({"pattern": r"\d{3}", "mode": "fullmatch"}, "555", True),
        ({"pattern": "yes"}, "YES", False),
        ({"pattern": "yes", "flags": ["ignorecase"]}, "YES", True),
        ({"pattern": "^b"}, "a\nb", False),
        ({"pattern": "^b", "flags": ["multiline"]}, "a\nb", True),
        ({"pattern": "a.b"}, "a\nb", False),
        ({"pattern": "a.b", "flags": ["dotall"]}, "a\nb", True),
    ],
)
def test_regex(options: dict[str, Any], output: str, matches: bool) -> None:
    assert Regex(**options).score(sample(output)) is matches


# --- json_valid -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "output", "valid"),
    [
        ({}, '{"a": [1, 2]}', True),
        ({}, "42", True),
        ({}, '```json\n{"a": 1}\n```', True),
        ({}, "  ```\n[1]\n```\n", True),
        ({"strip_fences": False}, '```json\n{"a": 1}\n```', False),
        ({}, 'Here you go:\n```json\n{"a": 1}\n```', False),
        ({}, "{'a': 1}", False),
        ({}, '{"a": NaN}', False),
        ({}, "", False),
        ({}, {"already": "decoded"}, True),
        ({}, [1, 2], True),
        ({}, {1, 2}, False),
    ],
)
def test_json_valid(options: dict[str, Any], output: Any, valid: bool) -> None:
    result = JsonValid(**options).score(sample(output))
    assert value(result) == float(valid)
    if not valid:
        assert result.explanation.startswith("not valid JSON")


# --- json_schema ------------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


def test_json_schema_accepts_a_valid_instance() -> None:
    assert JsonSchema(schema=PERSON).score(sample('```json\n{"name": "Ada", "age": 36}\n```')) == Score(1.0)


def test_json_schema_explains_the_first_error() -> None:
    result = JsonSchema(schema=PERSON).score(sample('{"name": "Ada", "age": "old"}'))
    assert result.value == 0.0
    assert result.explanation == "at $.age: 'old' is not of type 'integer'"


def test_json_schema_counts_further_errors() -> None:
    result = JsonSchema(schema=PERSON).score(sample({"name": 1, "age": -1}))
    assert result.value == 0.0
    assert result.explanation.endswith("(and 1 more)")


def test_json_schema_on_unparsable_output() -> None:
    result = JsonSchema(schema=PERSON).score(sample("not json"))
    assert result.value == 0.0 and result.explanation.startswith("not valid JSON")


def test_json_schema_honours_the_declared_draft() -> None:
    # Draft 4 spells an exclusive bound as a boolean beside `maximum`; 2020-12 would reject it.
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 5, "exclusiveMaximum": True}
    scorer = JsonSchema(schema=schema)
    assert scorer.score(sample("4")).value == 1.0
    assert scorer.score(sample("5")).value == 0.0


# --- numeric ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "output", "expected", "score"),
    [
        ({}, "The answer is 42.", "42", 1.0),
        ({}, "The answer is 42.", 41, 0.0),
        ({}, "3 apples plus 4 apples make 7", 7, 1.0),
        ({"extract": "first"}, "3 apples plus 4 apples make 7", 7, 0.0),
        ({"extract": "first"}, "3 apples plus 4 apples make 7", 3, 1.0),
        ({}, "Total: $1,234,567.89", 1234567.89, 1.0),
        ({}, "Total: 1,234", "1,234", 1.0),
        ({}, "It is -5 degrees", -5, 1.0),
        ({}, "It is +5 degrees", 5, 1.0),
        ({}, "so 8-3", 3, 1.0),
        ({}, "about 1.5e3 metres", 1500, 1.0),
        ({}, ".5", 0.5, 1.0),
        ({}, "3.14159", 3.14, 0.0),
        ({"abs_tol": 0.01}, "3.14159", 3.14, 1.0),
        ({"rel_tol": 0.01}, "1005", 1000, 1.0),
        ({"rel_tol": 0.001}, "1005", 1000, 0.0),
        ({}, 42, "42.0", 1.0),
    ],
)
def test_numeric(options: dict[str, Any], output: Any, expected: Any, score: float) -> None:
    assert value(Numeric(**options).score(sample(output, expected))) == score


def test_numeric_explains_a_mismatch() -> None:
    assert Numeric().score(sample("I get 12", 13)) == Score(0.0, explanation="read 12.0, expected 13.0")


def test_numeric_without_a_number_in_the_output_scores_zero() -> None:
    assert Numeric().score(sample("I don't know", 3)) == Score(0.0, explanation="no number in the output")


@pytest.mark.parametrize("expected", ["three", None, [1, 2]])
def test_numeric_with_unparsable_expected_is_a_scorer_error(expected: Any) -> None:
    with pytest.raises(ValueError, match="is not a number"):
        Numeric().score(sample("3", expected))


# --- token_f1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected", "score"),
    [
        ("Barack Obama", "barack obama", 1.0),
        ("the cat sat.", "A cat sat", 1.0),
        ("cat sat on mat", "cat sat", 2 * 0.5 * 1.0 / 1.5),
        ("cat cat", "cat", 2 * 0.5 * 1.0 / 1.5),
        ("dog", "cat", 0.0),
        ("the", "a", 1.0),
        ("the", "cat", 0.0),
        ("cat sat", ["dog", "the cat", "cat sat"], 1.0),
        ("cat sat", ["dog", "cat"], 2 * 0.5 * 1.0 / 1.5),
    ],
)
def test_token_f1(output: str, expected: Any, score: float) -> None:
    assert TokenF1().score(sample(output, expected)) == pytest.approx(score)


# --- user_code --------------------------------------------------------------------------------


def user(fn: str) -> UserCode:
    return UserCode(function=f"{HELPERS}:{fn}")


def test_user_code_passes_the_arguments_it_names() -> None:
    assert user("equals_expected").score(sample("Paris", "Paris")) is True
    assert user("equals_expected").score(sample("Paris", "Lyon")) is False


def test_user_code_passes_everything_to_kwargs() -> None:
    result = user("reports_arguments").score(sample("o", "e", input="the input"))
    assert result == Score(
        1.0,
        "annotations,expected,fields,input,output,sandbox,tool_calls,trajectory,workspace",
        {"input": "the input"},
    )


def test_user_code_is_given_the_tool_calls_it_names() -> None:
    calls = [ToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_1")]
    assert user("names_the_calls").score(sample(calls, ["get_weather"], tool_calls=calls)) is True
    assert user("names_the_calls").score(sample(calls, ["lookup"], tool_calls=calls)) is False
    assert user("names_the_calls").score(sample("in words", ["get_weather"])) is False


def test_user_code_passes_the_sample_to_a_single_sample_parameter() -> None:
    assert user("takes_sample").score(sample("o")) == Score(0.25, explanation="Sample")


def test_user_code_takes_a_dotted_attribute() -> None:
    assert user("Namespace.nested").score(sample("yes")) is True


def test_user_code_calls_a_function_without_parameters() -> None:
    assert user("takes_nothing").score(sample("o")) == 1


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        ("dict_without_score", "without a 'score' key"),
        ("dict_with_typo", "unknown keys ['explanaton']"),
        ("needs_context", "requires parameter 'context'"),
        ("missing_function", "has no attribute 'missing_function'"),
    ],
)
def test_user_code_errors(fn: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        user(fn).score(sample("o"))


def test_user_code_async_function_via_evaluate() -> None:
    assert run(user("async_half"), sample("o")).score == 0.5
    record = run(user("async_dict"), sample("o"))
    assert (record.score, record.explanation) == (0.75, "async")


def test_user_code_imports_from_the_spec_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "spec_local_scorers.py").write_text("def short(output):\n    return len(output) < 5\n")
    record = run(UserCode(function="spec_local_scorers:short"), sample("tiny"), spec_dir=str(tmp_path))
    assert record.outcome is ScorerOutcome.SCORED and record.score == 1.0
    assert sys.path[0] == str(tmp_path)
    run(UserCode(function="spec_local_scorers:short"), sample("tiny"), spec_dir=str(tmp_path))
    assert sys.path.count(str(tmp_path)) == 1


# --- import_callable --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            "no_such_module_xyz:fn",
            "cannot import 'no_such_module_xyz:fn': No module named 'no_such_module_xyz'",
        ),
        (f"{HELPERS}:nope", f"cannot import '{HELPERS}:nope'"),
        (f"{HELPERS}:Namespace.nope", "has no attribute 'Namespace.nope'"),
        ("no_colon", "not a reference of the form"),
    ],
)
def test_import_callable_errors_name_the_ref(ref: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        import_callable(ref)
    assert message in str(info.value)


def test_import_callable_refuses_a_non_callable() -> None:
    with pytest.raises(TypeError, match=f"cannot use '{HELPERS}:NOT_CALLABLE': int object is not callable"):
        import_callable(f"{HELPERS}:NOT_CALLABLE")


def test_import_callable_reports_a_missing_dependency(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "needs_missing_dep.py").write_text("import missing_dependency_xyz\ndef fn(): ...\n")
    with pytest.raises(ValueError, match="No module named 'missing_dependency_xyz'"):
        import_callable("needs_missing_dep:fn", spec_dir=str(tmp_path))


# --- evaluate ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "score"),
    [(True, 1.0), (False, 0.0), (0, 0.0), (1, 1.0), (0.25, 0.25), (Score(0.5), 0.5), (Score(True), 1.0)],
)
def test_evaluate_accepts_scores_in_range(returned: Any, score: float) -> None:
    record = run(Returns(value=returned), sample("o"))
    assert record.outcome is ScorerOutcome.SCORED
    assert record.score == score and type(record.score) is float
    assert record.error is None


def test_evaluate_fills_the_record() -> None:
    scorer = Returns(name="mine", value=Score(0.5, explanation="why", metadata={"k": 1}))
    record = run(scorer, sample("o"))
    assert (record.scorer, record.scorer_kind, record.scorer_version) == ("mine", "returns", "1")
    assert (record.explanation, record.metadata) == ("why", {"k": 1})
    assert record.duration_ms >= 0


@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        (1.5, "1.5"),
        (-1, "-1"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        ("0.5", "'0.5'"),
        (None, "None"),
        (Score(2.0), "2.0"),
        (10**400, None),
    ],
)
def test_evaluate_fails_scores_out_of_range(returned: Any, shown: str | None) -> None:
    record = run(Returns(value=returned), sample("o", input="What is 2+2?"))
    assert record.outcome is ScorerOutcome.FAILED and record.score is None
    if shown is not None:
        assert record.error == (
            f"scorer 'returns' returned {shown} for input 'What is 2+2?': "
            "scores must be finite numbers in [0, 1]"
        )


def test_evaluate_cuts_long_inputs_to_200_characters() -> None:
    record = run(Returns(value=2), sample("o", input="x" * 1000))
    shown = "'" + "x" * 196 + "..."
    assert len(shown) == 200
    assert (
        record.error
        == f"scorer 'returns' returned 2 for input {shown}: scores must be finite numbers in [0, 1]"
    )


def test_evaluate_records_a_raising_scorer_as_failed() -> None:
    record = run(Returns(raises=RuntimeError("kaboom")), sample("o"))
    assert record.outcome is ScorerOutcome.FAILED
    assert record.error == "RuntimeError: kaboom"
    assert record.score is None


def test_evaluate_records_user_code_failures() -> None:
    assert run(user("boom"), sample("o")).error == "RuntimeError: kaboom"
    assert run(user("returns_text"), sample("o")).error.startswith("scorer 'user_code' returned 'good'")
    assert run(user("dict_without_score"), sample("o")).error.startswith("ValueError: user_code function")
    missing = run(UserCode(function="no_such_module_xyz:fn"), sample("o"))
    assert missing.outcome is ScorerOutcome.FAILED
    assert "'no_such_module_xyz:fn'" in missing.error


def test_evaluate_records_a_scorer_error_from_a_builtin() -> None:
    record = run(Numeric(), sample("3", expected="three"))
    assert record.outcome is ScorerOutcome.FAILED
    assert record.error == "ValueError: numeric: expected value 'three' is not a number"


def test_evaluate_lets_cancellation_through() -> None:
    with pytest.raises(asyncio.CancelledError):
        run(Returns(raises=asyncio.CancelledError()), sample("o"))


def test_evaluate_skips_when_applies_is_falsy() -> None:
    scorer = Returns(applies=f"{HELPERS}:is_english", raises=RuntimeError("must not run"))
    record = run(scorer, sample("o", annotations={"lang": "fr"}))
    assert record.outcome is ScorerOutcome.SKIPPED
    assert (record.score, record.error) == (None, None)


def test_evaluate_scores_when_applies_is_truthy() -> None:
    record = run(Returns(applies=f"{HELPERS}:is_english", value=1), sample("o", annotations={"lang": "en"}))
    assert record.outcome is ScorerOutcome.SCORED and record.score == 1.0


def test_evaluate_fails_when_applies_cannot_be_imported() -> None:
    record = run(Returns(applies=f"{HELPERS}:nope", value=1), sample("o"))
    assert record.outcome is ScorerOutcome.FAILED
    assert record.error.startswith(f"ValueError: cannot import '{HELPERS}:nope'")


@pytest.mark.parametrize(
    ("scorer", "expected"),
    [
        (ExactMatch(name="s"), "None"),
        (Includes(name="s"), "None"),
        (Regex(name="s", pattern="None"), None),
        (Numeric(name="s"), "0"),
        (TokenF1(name="s"), "None"),
    ],
    ids=["exact_match", "includes", "regex", "numeric", "f1"],
)
def test_a_null_output_is_no_answer_to_compare_not_the_text_none(scorer, expected):
    # `str(None)` once made a null output match an expected "None" (issue 25): no answer, no score.
    record = asyncio.run(evaluate(scorer, Sample(output=None, input="q", expected=expected)))
    assert record.outcome is ScorerOutcome.FAILED and record.score is None
    assert "the output is null" in record.error
