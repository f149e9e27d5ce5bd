"""`assay estimate`: calls, tokens and cost before a run, then checked against the run itself."""

from __future__ import annotations

import pytest

from assay.analysis.estimate import count_tokens
from assay.cli import main
from tests.conftest import mock_target, openai_spec
from tests.helpers.cli import assay_json

PRICES = {"mock-1": {"input": 10.0, "output": 30.0}}


def test_estimate_before_and_after_a_run(tmp_path, mock, capsys):
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=20,
        prices=PRICES,
        target=mock_target(mock.base_url, max_tokens=50),
    )
    before = assay_json(capsys, "estimate", spec, "--store", tmp_path / "s")
    (line,) = before["lines"]
    assert line["calls"] == 20 and line["priced"] and line["model"] == "mock-1"
    assert line["input_tokens"] == sum(count_tokens(f"What is {i} + {i}?") for i in range(20))
    assert line["output_tokens_max"] == 50 * 20 and "max_tokens" in line["note"]
    assert before["cost_usd_max"] == pytest.approx((line["input_tokens"] * 10 + 1000 * 30) / 1e6)
    assert mock.stats()["requests"] == 0, "estimating spends nothing"

    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--quiet"]) == 0
    after = assay_json(capsys, "estimate", spec, "--store", tmp_path / "s")
    (line,) = after["lines"]
    # The mock echoes the prompt, five words: the stored run's mean output length is used now.
    assert line["output_tokens_expected"] == 5 * 20 and "stored run" in line["note"]
    assert after["cost_usd_expected"] < after["cost_usd_max"]


def test_unpriced_models_are_named(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    report = assay_json(capsys, "estimate", spec, "--store", tmp_path / "s")
    assert report["unpriced_models"] == ["mock-1"] and report["lines"][0]["cost_usd_expected"] is None
    assert main(["estimate", str(spec), "--store", str(tmp_path / "s")]) == 0
    assert "cost unknown: mock-1 is unpriced" in capsys.readouterr().out


def test_attempts_multiply_the_maximum_and_a_policy_is_noted(tmp_path, mock, capsys):
    (tmp_path / "policies.py").write_text(
        "async def twice(session):\n    await session.start(session.prompt)\n"
    )
    one = assay_json(
        capsys,
        "estimate",
        openai_spec(
            tmp_path, mock.base_url, n=4, prices=PRICES, target=mock_target(mock.base_url, max_tokens=10)
        ),
        "--store",
        tmp_path / "s",
    )["lines"][0]
    three = assay_json(
        capsys,
        "estimate",
        openai_spec(
            tmp_path,
            mock.base_url,
            n=4,
            prices=PRICES,
            target=mock_target(mock.base_url, max_tokens=10),
            attempts=3,
            policy="policies:twice",
        ),
        "--store",
        tmp_path / "s",
    )["lines"][0]
    assert three["calls"] == one["calls"] == 4 and three["calls_max"] == 12
    assert three["output_tokens_max"] == 3 * one["output_tokens_max"]
    assert three["cost_usd_max"] == pytest.approx(3 * one["cost_usd_max"])
    assert three["cost_usd_expected"] == pytest.approx(one["cost_usd_expected"])
    assert "up to 3 attempts" in three["note"] and "policy's further prompts" in three["note"]


def test_without_max_tokens_there_is_no_maximum_cost_not_the_expected_one(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=4, prices=PRICES)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--quiet"]) == 0  # an observed length
    report = assay_json(capsys, "estimate", spec, "--store", tmp_path / "s")
    (line,) = report["lines"]
    assert line["cost_usd_expected"] > 0 and line["output_tokens_expected"] == 5 * 4
    assert line["cost_usd_max"] is None and line["output_tokens_max"] is None and not line["bounded"]
    assert report["cost_usd_max"] is None and report["cost_usd_max_bounded"] is False
    assert report["cost_usd_expected"] == line["cost_usd_expected"]
    with_attempts = openai_spec(tmp_path, mock.base_url, n=4, prices=PRICES, attempts=2)
    assert (
        assay_json(capsys, "estimate", with_attempts, "--store", tmp_path / "s")["lines"][0]["cost_usd_max"]
        is None
    )

    assert main(["estimate", str(spec), "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    row = next(row for row in out.splitlines() if "mock-1" in row)
    assert row.split("│")[8].strip() == "–", row  # the table's max $: none
    assert out.strip().splitlines()[-1].endswith("no upper bound (a call without max_tokens)")


def _judged_spec(tmp_path, target: dict) -> object:
    """Three rows, one llm_judge scorer (priced), and `target`."""
    (tmp_path / "solver.py").write_text("def solve(question):\n    return question\n")
    return openai_spec(
        tmp_path,
        "http://127.0.0.1:9/v1",
        n=3,
        target=target,
        prices={"judge-1": {"input": 1.0, "output": 2.0}},
        scorers=[
            {"kind": "llm_judge", "base_url": "http://127.0.0.1:9/v1", "model": "judge-1", "max_tokens": 8}
        ],
    )


def test_an_unmeasured_targets_calls_are_counted_and_its_judges_estimated(tmp_path, capsys):
    report = assay_json(
        capsys,
        "estimate",
        _judged_spec(tmp_path, {"kind": "python", "function": "solver:solve"}),
        "--store",
        tmp_path / "s",
    )
    generation, judging = report["lines"]
    assert generation["kind"] == "generation" and generation["model"] is None and generation["calls"] == 3
    assert "python target: its spend is not measured" in generation["note"]
    # The judge's calls cost money whatever the target is.
    assert judging["kind"] == "judging" and judging["model"] == "judge-1" and judging["calls"] == 3
    assert judging["output_tokens_max"] == 8 * 3 and report["cost_usd_max"] == judging["cost_usd_max"] > 0


def test_an_http_agents_model_is_not_metered(tmp_path, capsys):
    # The harness runs the model and reports its own spend: there is no price to demand.
    target = {"kind": "http_agent", "base_url": "http://127.0.0.1:9", "model": "agent-model-1"}
    report = assay_json(capsys, "estimate", _judged_spec(tmp_path, target), "--store", tmp_path / "s")
    assert report["lines"][0]["model"] is None and report["unpriced_models"] == []
    assert "http_agent target: its spend is not measured" in report["lines"][0]["note"]
