"""`assay estimate`: calls, tokens and cost before a run, then checked against the run itself."""

from __future__ import annotations

import polars as pl
import pytest

from assay.analysis.estimate import count_tokens
from assay.cli import main
from assay.store import Store
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


def test_a_judges_estimate_is_its_template_before_a_run_and_its_measured_tokens_after(tmp_path, mock, capsys):
    """The judge's estimate against its real cost on the mock server: before any run its prompt is
    counted from its real template and its output is an upper bound (max_tokens), said so; once a
    run of the spec is stored, the tokens it measured give the run's real cost."""
    n = 10
    prices = {"mock-1": {"input": 10.0, "output": 30.0}, "mock-judge": {"input": 1.0, "output": 2.0}}
    judge = {"kind": "llm_judge", "name": "judge", "base_url": mock.base_url, "model": "mock-judge"}
    judge["rubric"] = "Is the answer the correct sum?"  # names no field: the standard grading template
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=n,
        prices=prices,
        target=mock_target(mock.base_url, max_tokens=20),
        scorers=[{"kind": "exact_match", "name": "exact"}, judge],
    )
    answers = {f"What is {i} + {i}?": str(2 * i) for i in range(n)}
    mock.configure(answers={**answers, "*": '{"score": 1, "explanation": "right"}'})
    before = assay_json(capsys, "estimate", spec, "--store", tmp_path / "s")
    assert mock.stats()["requests"] == 0
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--quiet"]) == 0
    store = Store(tmp_path / "s")
    (run_id,) = store.runs().collect()["run_id"]
    judged = store.run_scores(run_id).filter(pl.col("scorer") == "judge")
    real_in, real_out = judged["tokens_input"].sum(), judged["tokens_output"].sum()
    real = store.read_run(run_id)

    guessed = before["lines"][1]
    assert guessed["kind"] == "judging" and guessed["calls"] == n
    # The mock counts words, the estimate ~4 characters a token: the same prompt, not a third of it.
    assert 0.8 * real_in <= guessed["input_tokens"] <= 2 * real_in, (guessed["input_tokens"], real_in)
    assert guessed["output_tokens_expected"] == 512 * n and guessed["upper_bound"] is True
    assert "template" in guessed["note"] and "upper bound" in guessed["note"]
    assert before["cost_usd_expected_upper_bound"] is True and before["cost_usd_expected"] >= real["cost_usd"]
    assert main(["estimate", str(spec), "--store", str(tmp_path / "s")]) == 0  # (now with a stored run)
    capsys.readouterr()

    after = assay_json(capsys, "estimate", spec, "--store", tmp_path / "s")
    generation, measured = after["lines"]
    assert measured["input_tokens"] == real_in and measured["output_tokens_expected"] == real_out
    assert f"measured in stored run {run_id}" in measured["note"] and measured["upper_bound"] is False
    assert generation["input_tokens"] == store.run_items(run_id)["tokens_input"].sum()
    assert f"stored run {run_id}" in generation["note"]
    assert after["cost_usd_expected"] == pytest.approx(real["cost_usd"], rel=1e-6)
    assert after["cost_usd_expected_upper_bound"] is False


def test_the_estimate_says_when_its_expected_cost_is_an_upper_bound(tmp_path, mock, capsys):
    spec = openai_spec(
        tmp_path, mock.base_url, n=3, prices=PRICES, target=mock_target(mock.base_url, max_tokens=9)
    )
    assert main(["estimate", str(spec), "--store", str(tmp_path / "s")]) == 0
    assert (
        "(an upper bound: output at max_tokens, no stored run of this spec measured it)"
        in capsys.readouterr().out
    )
