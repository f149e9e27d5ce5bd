"""The `trajectory` scorer: the tools an agent called against an expected sequence, in each mode,
read from trajectory steps (the harness protocol's and ATIF's) or from `Sample.tool_calls`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from assay.calls.messages import ToolCall
from assay.evaluators import Sample, ScorerSpec, TrajectoryMatch, evaluate
from assay.outcomes import ScorerOutcome
from assay.targets.atif import atif_steps, read_atif


def _steps(*calls: str | tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """An agent's steps: a user turn, then one assistant step per call (each with its tool result)."""
    steps: list[dict[str, Any]] = [{"role": "user", "content": "go", "tool_calls": []}]
    for n, call in enumerate(calls):
        name, arguments = (call, {}) if isinstance(call, str) else call
        steps.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{n}", "name": name, "arguments": arguments}],
            }
        )
        steps.append({"role": "tool", "content": "ok", "tool_calls": [], "tool_call_id": f"c{n}"})
    return steps


def _score(
    expected: list[Any], calls: list[dict[str, Any]], **options: Any
) -> tuple[float | None, str | None]:
    record = asyncio.run(
        evaluate(
            TrajectoryMatch(**options), Sample(output="done", input="", expected=expected, trajectory=calls)
        )
    )
    assert record.outcome == ScorerOutcome.SCORED, record.error
    return record.score, record.explanation


SEARCH_OPEN_ANSWER = _steps("search", "open", "answer")


@pytest.mark.parametrize(
    ("mode", "expected", "verdict", "why"),
    [
        ("exact", ["search", "open", "answer"], 1.0, None),
        ("exact", ["search", "answer"], 0.0, "call 2: function 'open', expected 'answer'"),
        ("exact", ["search", "open"], 0.0, "1 call(s) after the expected 2: answer"),
        ("exact", ["search", "open", "answer", "cite"], 0.0, "expected 4 calls, the model made 3"),
        ("exact", ["open", "search", "answer"], 0.0, "call 1: function 'search', expected 'open'"),
        ("in_order", ["search", "answer"], 1.0, None),
        ("in_order", ["search", "open", "answer"], 1.0, None),
        ("in_order", ["answer", "search"], 0.0, "expected step 2 (search) not called after call 3"),
        (
            "in_order",
            ["search", "cite"],
            0.0,
            "expected step 2 (cite) not called after call 1 (the calls: search, open, answer)",
        ),
        ("any_order", ["answer", "open", "search"], 1.0, None),
        ("any_order", ["answer", "search"], 0.0, "calls beyond the expected: open"),
        ("any_order", ["answer", "search", "open", "open"], 0.0, "not called: open"),
        ("subset", ["answer", "search"], 1.0, None),
        ("subset", ["cite", "search"], 0.0, "not called: cite"),
        ("subset", ["search", "search"], 0.0, "not called: search"),
        ("subset", [], 1.0, None),
    ],
)
def test_modes(mode: str, expected: list[str], verdict: float, why: str | None):
    score, explanation = _score(expected, SEARCH_OPEN_ANSWER, mode=mode)
    assert score == verdict, explanation
    if why is None:
        assert explanation is None
    else:
        assert explanation is not None and why in explanation, explanation


@pytest.mark.parametrize(
    ("mode", "expected", "share"),
    [
        ("in_order", ["search", "cite", "answer"], 2 / 3),
        ("subset", ["cite", "answer", "search", "fetch"], 2 / 4),
        ("exact", ["search", "answer"], 2 / 3),  # an extra call counts against exact and any_order
        ("any_order", ["answer", "search"], 2 / 3),
        ("any_order", ["answer", "open", "search"], 1.0),
    ],
)
def test_partial_credit_is_the_share_matched(mode: str, expected: list[str], share: float):
    score, _ = _score(expected, SEARCH_OPEN_ANSWER, mode=mode, partial_credit=True)
    assert score == pytest.approx(share)


def test_expected_calls_with_arguments_use_the_tool_call_matcher():
    steps = _steps(("search", {"query": "Eiffel Tower height"}), ("open", {"url": "https://x.test/a"}))
    expected = [{"name": "search", "arguments": {"query": "eiffel tower height"}}, "open"]
    assert _score(expected, steps) == (1.0, None)
    score, why = _score(expected, steps, argument_mode="exact")
    assert score == 0.0 and 'expected step 1 (search(query="eiffel tower height")) not called' in why
    wrong = [{"name": "open", "arguments": {"url": "https://x.test/b"}}]
    assert _score(wrong, steps)[0] == 0.0


def test_expected_steps_may_be_written_in_the_spec():
    spec = _Spec.model_validate(
        {
            "scorers": [
                {
                    "kind": "trajectory",
                    "mode": "exact",
                    "expected": ["search", {"name": "open", "arguments": {"url": "u"}}],
                }
            ]
        }
    )
    [scorer] = spec.scorers
    sample = Sample(output=None, input="", trajectory=_steps("search", ("open", {"url": "U"})))
    assert scorer.score(sample).value == 1.0
    assert scorer.score(Sample(output=None, input="", trajectory=_steps("search"))).value == 0.0


def test_the_calls_come_from_every_step_then_from_tool_calls():
    parallel = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}],
        },
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "c", "arguments": "{}"}}]},
    ]
    assert _score(["a", "b", "c"], parallel, mode="exact") == (1.0, None)
    from_calls = Sample(
        output=None, input="", expected=["b", "a"], tool_calls=[ToolCall(name="a"), ToolCall(name="b")]
    )
    assert TrajectoryMatch(mode="any_order").score(from_calls).value == 1.0
    assert TrajectoryMatch(mode="exact").score(from_calls).value == 0.0
    no_calls = Sample(output="words", input="", expected=["a"])
    assert TrajectoryMatch().score(no_calls).explanation == "expected step 1 (a) not called (the calls: none)"


def test_an_atif_trajectory_scores_through_its_converted_steps():
    doc = {
        "schema_version": "ATIF-v1.6",
        "session_id": "s1",
        "agent": {"name": "bot", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "find it"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {"tool_call_id": "t1", "function_name": "grep", "arguments": {"pattern": "TODO"}}
                ],
                "observation": {"results": [{"source_call_id": "t1", "content": "a.py:3"}]},
            },
            {
                "step_id": 3,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {"tool_call_id": "t2", "function_name": "edit", "arguments": {"path": "a.py"}}
                ],
            },
        ],
    }
    trajectory, _, problem = read_atif(doc)
    assert trajectory is not None, problem
    steps = atif_steps(trajectory)
    expected = ["grep", {"name": "edit", "arguments": {"path": "A.py"}}]
    assert _score(expected, steps, mode="exact") == (1.0, None)
    assert _score(["edit", "grep"], steps, mode="in_order")[0] == 0.0


class _Spec(BaseModel):
    scorers: list[ScorerSpec]


def test_a_bad_expected_step_is_refused_at_load_and_from_a_row_when_scored():
    with pytest.raises(ValidationError, match="trajectory"):
        _Spec.model_validate({"scorers": [{"kind": "trajectory", "expected": [{"nam": "search"}]}]})
    with pytest.raises(ValidationError, match="mode"):
        _Spec.model_validate({"scorers": [{"kind": "trajectory", "mode": "sorted"}]})
    scorer = TrajectoryMatch()
    with pytest.raises(ValueError, match="step 2: a tool's name or a call"):
        scorer.score(Sample(output=None, input="", expected=["search", 3], trajectory=[]))
    with pytest.raises(ValueError, match="needs the expected calls"):
        scorer.score(Sample(output=None, input="", trajectory=[]))
