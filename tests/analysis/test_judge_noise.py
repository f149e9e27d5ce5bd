"""The judge's own noise through whole runs on the real mock server, whose answers vary per
request: `assay show`'s noise floor and flakiest items, and `assay compare`'s judge-noise share of
the delta's variance."""

from __future__ import annotations

import math

import pytest

from tests.evaluators.test_llm_judge import judged_spec
from tests.helpers.cli import assay_json, assay_out

PROMPTS = [f"Grade SAY {i} for say {i}." for i in range(4)]
# Asked twice per item on the 0-1 scale: the baseline's means 1, .5, 1, .5 (variances 0, .5, 0,
# .5), the candidate's .5, 0, .5, 1 (variances .5, 0, .5, 0).
BASE_TWICE = [["1", "1"], ["1", "0"], ["1", "1"], ["0", "1"]]
CAND_TWICE = [["0", "1"], ["0", "0"], ["1", "0"], ["1", "1"]]
# The same means, asked once.
BASE_ONCE = ["1", "0.5", "1", "0.5"]
CAND_ONCE = ["0.5", "0", "0.5", "1"]


def judged_run(tmp_path, mock, capsys, answers, **judge) -> str:
    mock.configure(answers=dict(zip(PROMPTS, answers, strict=True)))
    spec = judged_spec(tmp_path, mock.base_url, judge={"scale": "0-1", "temperature": 1.0, **judge})
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    return summary["run_id"]


def test_show_gives_the_judges_noise_floor_and_its_flakiest_items(tmp_path, mock, capsys):
    run_id = judged_run(tmp_path, mock, capsys, BASE_TWICE, judge_samples=2)
    shown = assay_json(capsys, "show", run_id, "--store", tmp_path / "s")
    noise = shown["judge_noise"]["judge"]
    # Variances 0, .5, 0, .5: mean .25, sd sqrt(4 * .25^2 / 3) = sqrt(1/12).
    assert noise["n_items"] == 4 and noise["judge_samples"] == 2
    assert noise["noise_floor"] == pytest.approx(0.25)
    assert noise["noise_sd"] == pytest.approx(math.sqrt(1 / 12))
    assert [(row["item_id"], row["judge_variance"]) for row in noise["flakiest"]] == [
        ("q1", 0.5),
        ("q3", 0.5),
        ("q0", 0.0),
        ("q2", 0.0),
    ]
    assert "exact" not in shown["judge_noise"]
    printed = assay_out(capsys, "show", run_id, "--store", tmp_path / "s").out
    assert (
        "judge: judge noise floor 0.250 (sd 0.289) over 4 items asked 2 times; flakiest q1 0.500, q3 0.500"
        in printed
    )


def test_a_judge_asked_once_has_no_noise_floor(tmp_path, mock, capsys):
    run_id = judged_run(tmp_path, mock, capsys, BASE_ONCE)
    assert "judge_noise" not in assay_json(capsys, "show", run_id, "--store", tmp_path / "s")


def test_compare_reports_the_judges_share_of_the_interval_without_counting_it_twice(tmp_path, mock, capsys):
    """Each item's score is a mean of K asks, so the paired interval already carries the judge's
    noise: compare reports its standard error beside the interval and leaves the interval as the
    bootstrap gives it (adding it again over-covers: benchmarks/judge_noise.py)."""
    once = [judged_run(tmp_path, mock, capsys, answers) for answers in (BASE_ONCE, CAND_ONCE)]
    twice = [judged_run(tmp_path, mock, capsys, a, judge_samples=2) for a in (BASE_TWICE, CAND_TWICE)]
    compared = {}
    for name, (base, cand) in {"once": once, "twice": twice}.items():
        doc = assay_json(capsys, "compare", base, "--candidate", cand, "--store", tmp_path / "s")
        compared[name] = {row["scorer"]: row for row in doc["scorers"]}["judge"]
        lines = doc["lines"]
    plain, noisy = compared["once"], compared["twice"]
    # The same paired scores, so the same bootstrap interval.
    assert noisy["delta"] == plain["delta"] == pytest.approx(-0.25)
    assert plain["judge_noise_se"] is None
    # Each pair's judge variance of its delta: .5/2 on one side, 0 on the other: sum 1, se 1/4.
    assert noisy["judge_noise_se"] == pytest.approx(0.25)
    assert (noisy["ci_low"], noisy["ci_high"]) == (plain["ci_low"], plain["ci_high"])
    assert noisy["verdict"] == plain["verdict"]
    assert any("of it judge noise ±25.0 pts se" in line for line in lines)
    printed = assay_out(capsys, "compare", twice[0], "--candidate", twice[1], "--store", tmp_path / "s").out
    assert "(judge noise se 0.250)" in printed and "of it judge noise ±25.0 pts se" in printed, printed
