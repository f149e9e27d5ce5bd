"""The `llm_judge` scorer, through real HTTP to the mock server: reading verdicts, rendering
rubrics, failures kept as data, and the judge's spend accounted and budgeted in a whole run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from pydantic import BaseModel, ValidationError

from assay.cli import main
from assay.errors import SpecError
from assay.evaluators import LlmJudge, Sample, ScorerSpec, evaluate
from assay.run.identity import scorers_digest
from assay.spec import parse_spec
from assay.store import Store
from tests.conftest import write_jsonl, write_spec
from tests.helpers.cli import assay_json
from tests.helpers.wire_payloads import output_message, response, responses

PRICES = {"mock-judge": {"input": 1.0, "output": 2.0}}


class Spec(BaseModel):
    scorers: list[ScorerSpec]


def judge(base_url: str, **params: Any) -> LlmJudge:
    return LlmJudge(base_url=base_url, model="mock-judge", **params)


def sample(output: Any = "Paris", **kw: Any) -> Sample:
    return Sample(
        output=output,
        input=kw.pop("input", "What is the capital of France?"),
        expected=kw.pop("expected", "Paris"),
        **kw,
    )


def grade(scorer: LlmJudge, s: Sample):
    return asyncio.run(evaluate(scorer, s))


# --- reading the judge's verdict --------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "scale", "score", "explanation"),
    [
        ('{"score": 0.8, "explanation": "mostly right"}', "0-1", 0.8, "mostly right"),
        ('```json\n{"score": 1, "explanation": "exactly right"}\n```', "0-1", 1.0, "exactly right"),
        ('Here is my verdict: {"explanation": "fine", "score": "0.5"}. Thanks!', "0-1", 0.5, "fine"),
        ('{"Score": 4, "reasoning": "good"}', 5, 0.75, "good"),
        (
            "Score: 7/10\nThe answer is right but terse.",
            10,
            6 / 9,
            "Score: 7/10\nThe answer is right but terse.",
        ),
        ("The answer is correct. I'd give it 8 out of 10.", 10, 7 / 9, None),
        ("A score of 10 needs a citation.\n**Final score:** 6", 10, 5 / 9, None),
        ("Score: 6\n\nA score of 10 would need a citation.", 10, 5 / 9, None),
        ("score = 0.8", "0-1", 0.8, None),
        ("Rating: [[4]]", 5, 0.75, None),
        ("Rating (1-5): 2", "1-5", 0.25, None),
        ("0.25", "0-1", 0.25, "0.25"),
        ("Score: 70%", "0-1", 0.7, None),
        ("Score: 7/10", "0-1", 0.7, None),
        ("1", 3, 0.0, None),
    ],
)
def test_reads_the_verdict(mock, reply, scale, score, explanation):
    mock.configure(answers={"*": reply})
    record = grade(judge(mock.base_url, scale=scale), sample())
    assert record.outcome == "scored", record.error
    assert record.score == pytest.approx(score)
    if explanation is not None:
        assert record.explanation == explanation
    assert record.metadata == {"model": "mock-judge", "raw": reply}


@pytest.mark.parametrize(
    ("reply", "scale", "why"),
    [
        ("I cannot grade this answer.", "0-1", "no score found"),
        ("Score: 11", 10, "outside the 1-10 scale"),
        ("Score: 4/5", 10, "not on the 1-10 scale"),
        ('{"score": 1.5, "explanation": "great"}', "0-1", "outside the 0-1 scale"),
        ('{"score": "excellent"}', "0-1", "is not a number"),
        ("", "0-1", "no score found"),
    ],
)
def test_an_unreadable_verdict_fails_and_keeps_the_raw_reply(mock, reply, scale, why):
    mock.configure(answers={"*": reply})
    record = grade(judge(mock.base_url, scale=scale), sample())
    assert record.outcome == "failed" and record.score is None
    assert record.error.startswith("JudgeError: ") and why in record.error
    assert f"the judge replied: {reply!r}" in record.error
    assert record.metadata == {"model": "mock-judge", "raw": reply}


def test_a_long_reply_is_cut_in_the_error_and_the_metadata(mock):
    reply = "blah " * 1000
    mock.configure(answers={"*": reply})
    record = grade(judge(mock.base_url), sample())
    assert record.outcome == "failed"
    assert repr(reply[:497] + "...") in record.error and len(record.error) < 700
    assert record.metadata["raw"] == reply[:2000]


# --- what is sent -------------------------------------------------------------------------------


def test_request_renders_rubric_and_system_from_the_item(mock):
    mock.configure(answers={"*": '{"score": 1, "explanation": "ok"}'})
    scorer = judge(
        mock.base_url,
        rubric="Q={input} A={output} R={expected} lang={lang} meta={meta[level]} on {scale}",
        system="You grade {lang} answers.",
        scale=4,
        temperature=0.5,
        max_tokens=64,
    )
    s = sample(output={"city": "Paris"}, expected=None, annotations={"lang": "fr", "meta": {"level": 2}})
    assert grade(scorer, s).outcome == "scored"
    body = mock.stats()["bodies"][-1]
    assert body["model"] == "mock-judge" and body["temperature"] == 0.5 and body["max_tokens"] == 64
    assert body["messages"] == [
        {"role": "system", "content": "You grade fr answers."},
        {
            "role": "user",
            "content": 'Q=What is the capital of France? A={"city": "Paris"} R=(none) lang=fr meta=2 '
            "on a scale of whole numbers from 1 (worst) to 4 (best)",
        },
    ]


def test_default_request(mock):
    mock.configure(answers={"*": '{"score": 1, "explanation": "ok"}'})
    grade(judge(mock.base_url), sample())
    body = mock.stats()["bodies"][-1]
    assert body["temperature"] == 0 and body["max_tokens"] == 512
    [message] = body["messages"]
    rubric = message["content"]
    assert message["role"] == "user"
    assert "What is the capital of France?" in rubric and "[Model's answer]\nParis" in rubric
    assert "from 0 (worst) to 1 (best)" in rubric and '{"score": <number>' in rubric


def test_per_item_replies_match_the_rendered_rubric(mock):
    scorer = judge(mock.base_url, rubric="Grade {output} against {expected}.", scale=10)
    mock.configure(
        answers={"Grade Paris against Paris.": "Score: 10/10", "Grade Lyon against Paris.": "Score: 1/10"}
    )
    assert grade(scorer, sample("Paris")).score == 1.0
    assert grade(scorer, sample("Lyon")).score == 0.0


def test_a_rubric_naming_a_missing_field_fails_without_a_call(mock):
    record = grade(judge(mock.base_url, rubric="{output} vs {gold}"), sample())
    assert record.outcome == "failed"
    assert "rubric names {gold}, which this item lacks" in record.error and "expected" in record.error
    assert mock.stats()["requests"] == 0


def test_a_rubric_naming_no_field_is_the_criterion_of_the_grading_template(mock):
    """ "Is the answer correct?" alone would show the judge nothing to grade."""
    mock.configure(answers={"*": '{"score": 1, "explanation": "ok"}'})
    record = grade(judge(mock.base_url, rubric="Is the answer correct? Mind {{units}}."), sample("Lyon"))
    assert record.outcome == "scored", record.error
    [message] = mock.stats()["bodies"][-1]["messages"]
    text = message["content"]
    shown = [
        "[Question]\nWhat is the capital of France?",
        "[Reference answer]\nParis",
        "[Model's answer]\nLyon",
        "[Criterion]\nIs the answer correct? Mind {units}.",
        "from 0 (worst) to 1 (best)",
        '{"score": <number>',
    ]
    assert [text.find(part) for part in shown] == sorted(text.find(part) for part in shown)
    assert all(part in text for part in shown), text


def test_a_rubric_that_never_shows_the_output_is_a_spec_error(tmp_path, capsys):
    write_jsonl(tmp_path / "d.jsonl", [{"input": "a", "expected": "b"}])
    rubric = {"kind": "llm_judge", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
    spec = write_spec(
        tmp_path,
        name="x",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "m:f"},
        scorers=[{**rubric, "rubric": "Is {input} answered well, on {scale}?"}],
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err
    assert "scorers.0: rubric names {input}, {scale} but never {output}" in error, error
    assert "name no field at all to use the standard grading template" in error
    assert not (tmp_path / "s").exists()


def test_api_key_is_read_from_the_env(mock, monkeypatch):
    mock.configure(answers={"*": "1"})
    monkeypatch.setenv("ASSAY_JUDGE_KEY", "sk-judge-secret")
    scorer = judge(mock.base_url, api_key_env="ASSAY_JUDGE_KEY")
    assert grade(scorer, sample()).outcome == "scored"
    assert mock.stats()["last_authorization"] == "Bearer sk-judge-secret"
    assert "sk-judge-secret" not in scorer.model_dump_json()
    monkeypatch.delenv("ASSAY_JUDGE_KEY")
    record = grade(judge(mock.base_url, api_key_env="ASSAY_JUDGE_KEY"), sample())
    assert record.outcome == "failed" and "'ASSAY_JUDGE_KEY' is not set" in record.error


def test_an_http_failure_fails_the_scorer_with_a_clear_message(mock):
    # Retry-After 0: the retry is what counts here, not the backoff before it (0.5-1 s).
    mock.configure(faults=[{"status": 500, "times": -1, "retry_after": 0}])
    record = grade(judge(mock.base_url, max_retries=1), sample())
    assert record.outcome == "failed"
    assert record.error.startswith("JudgeError: judge 'mock-judge' call failed: HTTP 500")
    assert record.metadata["model"] == "mock-judge" and record.metadata["http_status"] == 500
    assert mock.stats()["requests"] == 2, "one retry"


def test_one_client_per_event_loop_closed_with_the_loop(mock):
    mock.configure(answers={"*": "1"})
    scorer = judge(mock.base_url)

    async def twice() -> list[float | None]:
        records = await asyncio.gather(evaluate(scorer, sample()), evaluate(scorer, sample()))
        assert len(scorer._clients.by_loop) == 1
        return [r.score for r in records]

    assert asyncio.run(twice()) == [1.0, 1.0]
    assert len(scorer._clients.by_loop) == 0, "asyncio.run closed and dropped the loop's client"
    assert asyncio.run(twice()) == [1.0, 1.0], "a new loop gets a new client"


# --- the spec -----------------------------------------------------------------------------------


def test_spec_defaults_and_round_trip():
    spec = Spec.model_validate(
        {
            "scorers": [
                {"kind": "llm_judge", "base_url": "http://127.0.0.1:1/v1", "model": "m", "scale": "1-10"}
            ]
        }
    )
    [scorer] = spec.scorers
    assert isinstance(scorer, LlmJudge) and scorer.name == "llm_judge" and scorer.scale == 10
    assert not LlmJudge.deterministic and LlmJudge.version == "1" and scorer.is_async()
    assert (
        scorer.temperature,
        scorer.max_tokens,
        scorer.timeout,
        scorer.max_retries,
        scorer.concurrency,
    ) == (
        0,
        512,
        60,
        4,
        16,
    )
    assert Spec.model_validate(spec.model_dump(mode="json")) == spec


@pytest.mark.parametrize(
    ("params", "field", "needle"),
    [
        ({"rubric": "Grade {output"}, "rubric", "bad rubric template 'Grade {output'"),
        ({"rubric": "Grade {} please"}, "rubric", "positional field"),
        ({"system": "You are {judge.name}"}, "system", "bad system template"),
        ({"scale": 1}, "scale", 'scale must be "0-1" or a whole number N'),
        ({"scale": "0-10"}, "scale", "got '0-10'"),
        ({"scale": True}, "scale", "got True"),
        ({"base_url": "ftp://x"}, "base_url", "must start with http:// or https://"),
        ({"model": ""}, "model", "at least 1 character"),
        ({"temperature": 3}, "temperature", "less than or equal to 2"),
    ],
)
def test_bad_params_name_the_field(params, field, needle):
    scorer = {"kind": "llm_judge", "base_url": "http://127.0.0.1:1/v1", "model": "m", **params}
    spec = {
        "name": "x",
        "dataset": {"path": "d.jsonl"},
        "target": {"kind": "python", "function": "m:f"},
        "scorers": [scorer],
    }
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    [problem] = caught.value.problems
    assert problem.startswith(f"scorers.0.{field}:") and needle in problem, problem


def test_unknown_param_is_refused():
    with pytest.raises(ValidationError, match="rubrik"):
        LlmJudge(base_url="http://x", model="m", rubrik="typo")


# --- whole runs: accounting, failures, budget ---------------------------------------------------


SOLVER = "import time\n\ndef solve(x):\n    time.sleep(SLEEP)\n    return x.upper()\n"


def judged_spec(
    folder: Path, base_url: str, *, n: int = 4, sleep: float = 0.0, judge: dict | None = None, **spec: Any
):
    """A python target (upper-cases its input) scored by exact_match and an llm_judge."""
    # Modules stay imported for the session: one module name per sleep.
    module = f"judged_solver_{int(sleep * 1000)}ms"
    (folder / f"{module}.py").write_text(SOLVER.replace("SLEEP", repr(sleep)))
    write_jsonl(
        folder / "data.jsonl",
        [{"id": f"q{i}", "input": f"say {i}", "expected": f"SAY {i}"} for i in range(n)],
    )
    return write_spec(
        folder,
        name="judged",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": f"{module}:solve"},
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {
                "kind": "llm_judge",
                "name": "judge",
                "base_url": base_url,
                "model": "mock-judge",
                "rubric": "Grade {output} for {input}.",
                "scale": 10,
                # The self-check (on by default) is tested in test_gold_check.py: here its one
                # extra call would blur the figures under test.
                "gold_check": False,
                **(judge or {}),
            },
        ],
        **spec,
    )


def test_a_run_accounts_the_judges_spend(tmp_path, mock, capsys):
    mock.configure(
        answers={"Grade SAY 1 for say 1.": "Score: 4/10 - terse", "*": '{"score": 10, "explanation": "ok"}'}
    )
    spec = judged_spec(tmp_path, mock.base_url, n=4, prices=PRICES, concurrency=2)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assert summary["items"]["completed"] == 4
    store = Store(tmp_path / "s")
    items = store.run_items(summary["run_id"])
    scores = store.run_scores(summary["run_id"])
    judged = scores.filter(pl.col("scorer") == "judge").sort("item_index")

    assert judged["outcome"].to_list() == ["scored"] * 4
    assert judged["score"].to_list() == pytest.approx([1.0, 3 / 9, 1.0, 1.0])
    assert judged["explanation"].to_list() == ["ok", "Score: 4/10 - terse", "ok", "ok"]
    assert judged["model"].to_list() == ["mock-judge"] * 4
    assert [json.loads(m)["raw"] for m in judged["metadata"]][1] == "Score: 4/10 - terse"
    for row in judged.iter_rows(named=True):
        assert row["tokens_input"] > 0 and row["tokens_output"] > 0
        assert row["cost_usd"] == (row["tokens_input"] * 1.0 + row["tokens_output"] * 2.0) / 1e6
        assert row["cost_completeness"] == "complete" and row["cost_reasons"] is None
        assert row["operations"] == 1
    # Deterministic scorers cost nothing and name no model.
    exact = scores.filter(pl.col("scorer") == "exact")
    assert exact["score"].to_list() == [1.0] * 4 and exact["cost_usd"].to_list() == [0.0] * 4
    assert exact["model"].to_list() == [None] * 4

    per_item = scores.group_by("item_id").agg(pl.col("cost_usd").sum().alias("judging"))
    joined = items.join(per_item, on="item_id")
    assert joined["cost_judging_usd"].to_list() == joined["judging"].to_list()
    assert joined["cost_usd"].to_list() == joined["judging"].to_list(), (
        "the python target's spend is not known"
    )
    assert joined["cost_generation_usd"].to_list() == [0.0] * 4
    # The item's completeness is the worst of generation (uninstrumented) and judging (complete).
    assert set(items["cost_completeness"]) == {"incomplete"}
    assert [json.loads(r) for r in items["cost_reasons"]] == [{"uninstrumented": 1}] * 4
    assert summary["cost"]["judging_usd"] == pytest.approx(judged["cost_usd"].sum(), rel=1e-12)
    assert mock.stats()["requests"] == 4


def test_an_unpriced_judge_is_incomplete_never_free(tmp_path, mock, capsys):
    mock.configure(answers={"*": "Score: 9"})
    spec = judged_spec(tmp_path, mock.base_url, n=2)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    judged = Store(tmp_path / "s").run_scores(summary["run_id"]).filter(pl.col("scorer") == "judge")
    assert judged["outcome"].to_list() == ["scored"] * 2
    assert judged["cost_usd"].to_list() == [0.0] * 2
    assert judged["cost_completeness"].to_list() == ["incomplete"] * 2
    assert [json.loads(r) for r in judged["cost_reasons"]] == [{"unpriced": 1}] * 2
    assert summary["cost"]["reasons"] == {"unpriced": 2, "uninstrumented": 2}


def test_a_failing_judge_fails_its_scorer_not_the_item(tmp_path, mock, capsys):
    mock.configure(faults=[{"status": 500, "times": -1}])
    spec = judged_spec(tmp_path, mock.base_url, n=3, prices=PRICES, judge={"max_retries": 0})
    # The items completed; the judge's failures fail the run's scorer error-rate gate (issue 30).
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s", code=1)
    assert summary["items"]["completed"] == 3 and summary["item_error_rate"] == 0
    assert [g["gate"] for g in summary["gates"] if not g["passed"]] == ["scorer_error_rate"]
    scores = Store(tmp_path / "s").run_scores(summary["run_id"])
    judged = scores.filter(pl.col("scorer") == "judge")
    assert judged["outcome"].to_list() == ["failed"] * 3 and judged["score"].null_count() == 3
    assert all(e.startswith("JudgeError: judge 'mock-judge' call failed: HTTP 500") for e in judged["error"])
    assert judged["model"].to_list() == ["mock-judge"] * 3, "kept from the failure's metadata"
    assert [json.loads(m)["http_status"] for m in judged["metadata"]] == [500] * 3
    # A refused request is a settled operation that cost nothing.
    assert judged["operations"].to_list() == [1] * 3 and judged["cost_usd"].to_list() == [0.0] * 3
    assert judged["cost_completeness"].to_list() == ["complete"] * 3
    exact = scores.filter(pl.col("scorer") == "exact")
    assert exact["outcome"].to_list() == ["scored"] * 3 and exact["score"].to_list() == [1.0] * 3
    judge_stats = next(s for s in summary["scorers"] if s["scorer"] == "judge")
    assert judge_stats["scored"] == 0
    assert mock.stats()["requests"] == 3


def test_the_judges_spend_closes_the_budget(tmp_path, mock, capsys):
    # Any judge call costs far more than $0.000001, so the first one closes the budget. At
    # concurrency 1 a shard's single worker scores an item before it takes the next, so every
    # later item is not started: the stop point is exact.
    mock.configure(answers={"*": '{"score": 10, "explanation": "ok"}'})
    spec = judged_spec(tmp_path, mock.base_url, n=6, prices=PRICES, budget="$0.000001", concurrency=1)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    store = Store(tmp_path / "s")
    items = store.run_items(summary["run_id"]).sort("item_index")
    scores = store.run_scores(summary["run_id"]).sort("item_index", "scorer")
    assert items["outcome"].to_list() == ["completed"] + ["budget_skipped"] * 5
    assert scores.select("item_id", "scorer", "outcome").rows() == [
        ("q0", "exact", "scored"),
        ("q0", "judge", "scored"),
    ]
    assert mock.stats()["requests"] == 1
    record = store.read_run(summary["run_id"])
    assert record["budget_status"] == "closed" and record["budget_closed_by"] == "case"
    spent = scores.filter(pl.col("item_id") == "q0", pl.col("scorer") == "judge")["cost_usd"][0]
    assert spent > 1e-6 and record["budget_spent_usd"] == pytest.approx(spent, rel=1e-12)
    assert record["n_budget_skipped"] == 5
    assert summary["budget"]["budget_status"] == "closed"


def test_a_judge_call_refused_by_the_budget_is_budget_interrupted(mock):
    from assay.calls.accounting import Budget, Ledger, PriceTable
    from assay.outcomes import SpendKind

    mock.configure(answers={"*": "1"})
    scorer = judge(mock.base_url)

    async def refused():
        with Ledger(SpendKind.JUDGING, PriceTable.shipped(), Budget(0.0)) as ledger:
            record = await evaluate(scorer, sample())
        return record, ledger.total()

    record, spend = asyncio.run(refused())
    assert record.outcome == "budget_interrupted" and "budget" in record.error
    assert spend.denied == 1 and spend.known_cost == 0
    assert mock.stats()["requests"] == 0


def test_on_a_closed_budget_deterministic_scorers_still_score(tmp_path, mock, capsys):
    # q0 finishes fast and its judge call closes the budget; q1's target, already running, ends later:
    # its judge is budget_skipped while its deterministic scorer still scores.
    mock.configure(answers={"*": '{"score": 10, "explanation": "ok"}'})
    spec = judged_spec(tmp_path, mock.base_url, n=2, prices=PRICES, budget="$0.000001", concurrency=2)
    (tmp_path / "uneven_solver.py").write_text(
        "import time\n\ndef solve(x):\n    time.sleep(0.05 if x == 'say 0' else 0.8)\n    return x.upper()\n"
    )
    spec.write_text(spec.read_text().replace("judged_solver_0ms:solve", "uneven_solver:solve"))
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    scores = Store(tmp_path / "s").run_scores(summary["run_id"]).sort("item_index", "scorer")
    assert scores.select("item_id", "scorer", "outcome").rows() == [
        ("q0", "exact", "scored"),
        ("q0", "judge", "scored"),
        ("q1", "exact", "scored"),
        ("q1", "judge", "budget_skipped"),
    ]
    assert Store(tmp_path / "s").read_run(summary["run_id"])["budget_closed_by"] == "scorer"


def test_a_judge_on_the_targets_model_shares_its_rate_window(tmp_path, mock, capsys):
    """Target and judge call one model on one endpoint: every attempt of both passes one adaptive
    controller, so a 429 answered to the judge halves the window the target's calls use too, and
    the run's stored `rate_control` counts the calls of both."""
    mock.configure(
        answers={"*": '{"score": 10, "explanation": "ok"}'},
        faults=[{"status": 429, "retry_after": 0.2, "match": "Grade"}],
    )
    spec = judged_spec(tmp_path, mock.base_url, n=6, concurrency=2)
    raw = yaml.safe_load(spec.read_text())
    raw["target"] = {"kind": "openai", "base_url": mock.base_url, "model": "mock-judge"}
    spec.write_text(yaml.safe_dump(raw))
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assert summary["items"]["completed"] == 6
    rate = json.loads(Store(tmp_path / "s").read_run(summary["run_id"])["rate_control"])
    assert rate["endpoint"] == f"{mock.base_url} mock-judge"
    assert rate["responses"] == 6 + 6 + 1 and rate["rate_limited"] == 1 and rate["paused_s"] >= 0.15
    assert mock.stats()["by_status"] == {"200": 12, "429": 1}


# --- the judge on the Responses API -----------------------------------------------------------


def test_a_judge_on_the_responses_api_asks_in_its_words(scripted):
    """`api: responses`: the scripted server on uvicorn checks the request against the `openai`
    SDK's `ResponseCreateParams` and its reply against `Response`; the verdict is read as ever."""
    scripted.script(responses(response([output_message('{"score": 4, "explanation": "right"}')])))
    scorer = judge(scripted.base_url, api="responses", scale=5, system="You grade {input}.")
    result = grade(scorer, sample())
    assert (result.score, result.explanation) == (0.75, "right")
    [(path, body)] = scripted.requests
    assert path == "/v1/responses"
    assert body["instructions"] == "You grade What is the capital of France?."
    assert [m["role"] for m in body["input"]] == ["user"] and "Paris" in body["input"][0]["content"]
    assert (body["max_output_tokens"], body["temperature"], body["store"]) == (512, 0, False)
    assert "messages" not in body and "max_tokens" not in body


def test_a_judges_api_is_part_of_the_identity_only_when_it_is_not_the_default():
    def digest(**params: Any) -> str:
        return scorers_digest([LlmJudge(base_url="http://127.0.0.1:1/v1", model="m", **params)])

    assert digest(api="chat_completions") == digest()
    assert digest(api="responses") != digest()


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        (
            {"provider": "anthropic", "max_tokens": 64},
            "api: responses is provider openai's API, not provider anthropic's",
        ),
    ],
)
def test_what_a_responses_judge_cannot_take_is_a_spec_error(params, needle):
    scorer = {
        "kind": "llm_judge",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "api": "responses",
        **params,
    }
    spec = {
        "name": "x",
        "dataset": {"path": "d.jsonl"},
        "target": {"kind": "python", "function": "m:f"},
        "scorers": [scorer],
    }
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    [problem] = caught.value.problems
    assert problem.startswith("scorers.0") and needle in problem, problem
