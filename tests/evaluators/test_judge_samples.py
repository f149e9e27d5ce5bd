"""`judge_samples: K`: a judge asked K times per item through the real mock server, whose answers
vary per request; the item's score is the mean of the K, its judge variance stored."""

from __future__ import annotations

import json
import statistics

import polars as pl
import pytest

from assay.errors import SpecError
from assay.evaluators import LlmJudge
from assay.run.identity import scorers_digest
from assay.spec import parse_spec
from assay.store import Store
from tests.evaluators.test_llm_judge import judged_spec
from tests.helpers.cli import assay_json


def test_a_judge_asked_k_times_stores_the_mean_and_the_variance(tmp_path, mock, capsys):
    # Each item's prompt gets its own answers in turn: q0 always 10, q1 varies 1, 10, 4 (on 1..10).
    mock.configure(
        answers={
            "Grade SAY 0 for say 0.": "Score: 10",
            "Grade SAY 1 for say 1.": ["Score: 1", "Score: 10", "Score: 4"],
        }
    )
    spec = judged_spec(tmp_path, mock.base_url, n=2, judge={"judge_samples": 3, "temperature": 1.0})
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    judged = Store(tmp_path / "s").run_scores(summary["run_id"]).filter(pl.col("scorer") == "judge")
    judged = judged.sort("item_index")

    # On the 1..10 scale 1, 10, 4 are 0, 1, 1/3: mean 4/9, sample variance ((4/9)^2 + (5/9)^2 +
    # (1/9)^2) / 2 = 42/162 = 7/27.
    assert judged["score"].to_list() == pytest.approx([1.0, 4 / 9])
    assert judged["judge_variance"].to_list() == pytest.approx([0.0, 7 / 27])
    assert statistics.variance([0, 1, 1 / 3]) == pytest.approx(7 / 27)
    assert sorted(json.loads(judged["metadata"][1])["samples"]) == pytest.approx([0, 1 / 3, 1])
    assert judged["judge_samples"].to_list() == [3, 3]
    assert judged["operations"].to_list() == [3, 3]
    assert mock.stats()["requests"] == 6


def test_a_judge_asked_once_stores_no_variance(tmp_path, mock, capsys):
    mock.configure(answers={"*": "Score: 10"})
    spec = judged_spec(tmp_path, mock.base_url, n=2)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    judged = Store(tmp_path / "s").run_scores(summary["run_id"]).filter(pl.col("scorer") == "judge")
    assert judged["judge_variance"].to_list() == [None, None]
    assert judged["judge_samples"].to_list() == [None, None]
    assert mock.stats()["requests"] == 2


def test_judge_samples_is_part_of_the_identity_only_when_set():
    def digest(**params) -> str:
        return scorers_digest([LlmJudge(base_url="http://127.0.0.1:1/v1", model="m", **params)])

    assert digest(judge_samples=None) == digest()
    assert "judge_samples" not in LlmJudge(base_url="http://127.0.0.1:1/v1", model="m").identity()
    assert digest(judge_samples=3) != digest()
    assert digest(judge_samples=3) != digest(judge_samples=4)


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"judge_samples": 3, "cache": "always"}, "judge_samples cannot be combined with cache"),
        ({"judge_samples": 1}, "greater than or equal to 2"),
    ],
)
def test_what_judge_samples_cannot_take_is_a_spec_error(params, needle):
    spec = {
        "name": "x",
        "dataset": {"path": "d.jsonl"},
        "target": {"kind": "python", "function": "m:f"},
        "scorers": [{"kind": "llm_judge", "base_url": "http://127.0.0.1:1/v1", "model": "m", **params}],
    }
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    [problem] = caught.value.problems
    assert problem.startswith("scorers.0") and needle in problem, problem


def test_in_batch_mode_each_of_the_k_asks_is_its_own_request(tmp_path, mock, capsys):
    # The mock answers a batch's requests through its chat endpoint: in turn 1, 0, 1, 0, ...
    mock.configure(answers={"*": ['{"score": 1}', '{"score": 0}']})
    batch = {"max_requests": 4, "max_wait_s": 0.2, "poll_s": 0.05}
    judge = {"judge_samples": 2, "batch": batch, "max_tokens": 64, "scale": "0-1", "temperature": 1.0}
    spec = judged_spec(tmp_path, mock.base_url, n=3, judge=judge)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    judged = Store(tmp_path / "s").run_scores(summary["run_id"]).filter(pl.col("scorer") == "judge")

    stats = mock.batch_stats()
    # 3 items x 2 asks: 6 requests of distinct custom ids, none online.
    assert sorted(stats["batch_requests"].values()) == [1] * 6
    assert judged["outcome"].to_list() == ["scored"] * 3 and judged["judge_samples"].to_list() == [2] * 3
    # Three of the six answers were 1: the means, each of two asks, sum to 3 / 2.
    assert judged["score"].sum() == pytest.approx(1.5)
    for row in judged.iter_rows(named=True):
        assert row["judge_variance"] == pytest.approx(
            statistics.variance(json.loads(row["metadata"])["samples"])
        )


def test_one_failed_ask_fails_the_items_judge_not_the_run(tmp_path, mock, capsys):
    mock.configure(
        answers={"*": "Score: 10"},
        faults=[{"status": 400, "match": "SAY 1", "message": "bad request"}],
    )
    judge = {"judge_samples": 3, "temperature": 1.0}
    spec = judged_spec(tmp_path, mock.base_url, n=3, judge=judge, fail_on_scorer_error_rate=1)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    judged = Store(tmp_path / "s").run_scores(summary["run_id"]).filter(pl.col("scorer") == "judge")
    judged = judged.sort("item_index")
    assert judged["outcome"].to_list() == ["scored", "failed", "scored"]
    assert "bad request" in judged["error"][1]
    assert judged["judge_variance"].to_list() == [0.0, None, 0.0]
