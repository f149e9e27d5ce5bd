"""Rescore: new scorers over a stored run, no target calls, failed items passed through."""

from __future__ import annotations

import json
import sys

import polars as pl
import pytest

from assay.cli import EXIT_GATE, main
from assay.store import Store
from tests.conftest import openai_spec, run_assay
from tests.helpers.cli import assay_json


@pytest.fixture
def source(tmp_path, mock, capsys):
    """A stored run of 6 items, one of which failed (HTTP 400)."""
    mock.configure(
        answers={"What is 1 + 1?": "2", "What is 2 + 2?": "The answer is 4"},
        faults=[{"status": 400, "times": -1, "match": "What is 5 + 5?"}],
    )
    spec = openai_spec(tmp_path, mock.base_url, n=6, fail_on_item_error_rate=1)
    store = str(tmp_path / "store")
    summary = assay_json(capsys, "run", str(spec), "--store", store)
    mock.reset()
    return store, summary["run_id"]


def test_rescore_scores_stored_outputs_without_calling_the_target(source, mock, capsys):
    store, source_id = source
    summary = assay_json(
        capsys,
        "rescore",
        source_id,
        "--store",
        store,
        "--scorer",
        "{kind: numeric, name: num}",
        "--scorer",
        "{kind: includes, name: has}",
    )
    assert mock.stats()["requests"] == 0, "a rescore never calls the target"
    record = Store(store).read_run(summary["run_id"])
    assert record["kind"] == "rescore" and record["source_run_id"] == source_id
    assert record["dataset_hash"] == Store(store).read_run(source_id)["dataset_hash"]

    scores = Store(store).run_scores(summary["run_id"])
    assert set(scores["scorer"]) == {"num", "has"}
    num = dict(scores.filter(pl.col("scorer") == "num").select("item_id", "score").iter_rows())
    # q2 answered "The answer is 4": exact would fail, numeric reads the 4.
    assert num["q2"] == 1.0 and num["q1"] == 1.0 and num["q0"] == 1.0 and num["q3"] == 0.0
    assert "q5" not in num, "a failed item gets no scores"

    items = Store(store).run_items(summary["run_id"])
    source_items = Store(store).run_items(source_id)
    failed = items.filter(pl.col("item_id") == "q5").to_dicts()[0]
    assert failed["outcome"] == "failed" and failed["failure_http_status"] == 400
    assert failed["error"] == source_items.filter(pl.col("item_id") == "q5")["error"][0]
    # Timing carried forward; spend is zero.
    joined = items.join(source_items, on=["item_id", "trial"], suffix="_src")
    assert (joined["duration_ms"] == joined["duration_ms_src"]).all()
    assert items["cost_usd"].to_list() == [0.0] * 6 and items["tokens_input"].sum() == 0
    assert summary["items"] == {**summary["items"], "completed": 5, "failed": 1}


def test_rescore_from_a_spec_file_and_resume(source, tmp_path, capsys):
    store, source_id = source
    (tmp_path / "rescore.yaml").write_text("scorers:\n  - {kind: token_f1, name: f1}\n")
    summary = assay_json(
        capsys, "rescore", source_id, "--store", store, "--spec", str(tmp_path / "rescore.yaml")
    )
    first = Store(store).run_scores(summary["run_id"])
    assert first["scorer"].unique().to_list() == ["f1"] and first.height == 5
    again = assay_json(capsys, "resume", summary["run_id"], "--store", store)
    assert again["run_id"] == summary["run_id"]
    assert Store(store).run_scores(summary["run_id"]).height == 5, "resuming a finished rescore adds nothing"


def test_rescore_bad_input(source, capsys):
    store, source_id = source
    assert main(["rescore", "nope", "--store", store, "--scorer", "exact_match"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["rescore", source_id, "--store", store]) == 2
    assert "--spec FILE or one or more --scorer" in capsys.readouterr().err
    assert main(["rescore", source_id, "--store", store, "--scorer", "{kind: regex, pattern: '('}"]) == 2
    assert "pattern" in capsys.readouterr().err
    unresolved = "{kind: user_code, function: 'no_such_module_s:score'}"
    assert main(["rescore", source_id, "--store", store, "--scorer", unresolved]) == 2
    assert (
        "error: --scorer: scorers.0.function: cannot import 'no_such_module_s:score'"
        in capsys.readouterr().err
    )
    assert len(list(Store(store).runs().collect()["run_id"])) == 1, "nothing written on bad input"


def test_a_crashing_rescore_ends_as_failed(source, tmp_path, capsys, monkeypatch):
    """A scorer that stops the rescore (not an Exception, so not a scorer's failure) ends it as
    `failed` with the error, not `running`."""
    store, source_id = source
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "crashing_scorer.py").write_text(
        "class Crash(BaseException):\n    pass\n\ndef score(output):\n    raise Crash('scorer host lost')\n"
    )
    (tmp_path / "rescore.yaml").write_text(
        "scorers:\n  - {kind: user_code, function: 'crashing_scorer:score'}\n"
    )
    with pytest.raises(BaseException) as crashed:
        main(["rescore", source_id, "--store", store, "--spec", str(tmp_path / "rescore.yaml"), "-q"])
    assert type(crashed.value).__name__ == "Crash"
    (rescore,) = Store(store).runs().filter(pl.col("kind") == "rescore").collect().to_dicts()
    assert rescore["status"] == "failed" and rescore["error"] == "Crash: scorer host lost"
    assert rescore["n_completed"] + rescore["n_failed"] + rescore["n_cancelled"] == rescore["n_planned"]


@pytest.mark.slow
def test_rescore_in_a_subprocess_matches(source):
    store, source_id = source
    result = run_assay("rescore", source_id, "--store", store, "--scorer", "exact_match", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["scorers"][0]["scorer"] == "exact_match"


PRICES = {"mock-1": {"input": 10.0, "output": 30.0}, "mock-judge": {"input": 1.0, "output": 1.0}}
JUDGE = "{kind: llm_judge, name: judge, base_url: '%s', model: mock-judge, gold_check: false}"


@pytest.fixture
def captured_source(tmp_path, mock, capsys):
    """A priced run of 4 items with its requests captured."""
    mock.configure(answers={"*": '{"score": 1, "explanation": "ok"}'})
    spec = openai_spec(tmp_path, mock.base_url, n=4, prices=PRICES, capture_requests=True)
    store = str(tmp_path / "store")
    summary = assay_json(capsys, "run", str(spec), "--store", store)
    mock.reset()
    return store, summary["run_id"]


def test_a_rescore_whose_source_requests_are_gone_says_so_and_points_nowhere(captured_source, mock, capsys):
    """As the seed: capture `unavailable`, with a reason, and no reference to a record that is
    not there."""
    import shutil

    store, source_id = captured_source
    assert Store(store).run_items(source_id)["operation_ids"].list.len().min() > 0
    shutil.rmtree(f"{store}/requests/run_id={source_id}")
    summary = assay_json(capsys, "rescore", source_id, "--scorer", "exact_match", "--store", store)
    record = Store(store).read_run(summary["run_id"])
    assert record["capture_status"] == "unavailable"
    assert (
        record["capture_reason"] == f"the source run {source_id}'s captured requests are no longer available"
    )
    items = Store(store).run_items(summary["run_id"])
    assert items["operation_ids"].null_count() == items.height, "no dangling reference"


def test_a_rescore_without_capture_carries_no_references(captured_source, mock, capsys):
    store, source_id = captured_source
    summary = assay_json(
        capsys, "rescore", source_id, "--scorer", "exact_match", "--no-capture-requests", "--store", store
    )
    assert Store(store).read_run(summary["run_id"])["capture_status"] == "off"
    assert Store(store).run_requests(summary["run_id"]).is_empty()
    assert Store(store).run_items(summary["run_id"])["operation_ids"].null_count() == 4


def test_a_rescore_takes_its_own_budget_and_concurrency_and_records_the_source_generation(
    captured_source, mock, capsys
):
    store, source_id = captured_source
    source = Store(store).read_run(source_id)
    assert source["cost_generation_usd"] > 0 and source["cost_completeness"] == "complete"
    mock.configure(answers={"*": '{"score": 1, "explanation": "ok"}'})
    summary = assay_json(
        capsys,
        "rescore",
        source_id,
        "--scorer",
        JUDGE % mock.base_url,
        "--budget",
        "$0.000001",
        "--concurrency",
        "1",
        "--store",
        store,
    )
    record = Store(store).read_run(summary["run_id"])
    spec = json.loads(record["spec_json"])
    assert spec["budget"] == "$0.000001" and spec["concurrency"] == 1
    assert record["budget_limit_usd"] == 0.000001 and record["budget_status"] == "closed"
    scores = Store(store).run_scores(summary["run_id"])
    assert sorted(scores["outcome"].to_list()) == ["budget_skipped"] * 3 + ["scored"], (
        "one judge, then closed"
    )
    # The source's generation beside this run's own judging, never added to it.
    assert record["source_generation_usd"] == pytest.approx(source["cost_generation_usd"])
    assert record["source_generation_completeness"] == "complete"
    assert record["cost_generation_usd"] == 0 and record["cost_judging_usd"] > 0
    # A rescore of that rescore still knows the generation it stands on.
    again = assay_json(capsys, "rescore", summary["run_id"], "--scorer", "exact_match", "--store", store)
    assert Store(store).read_run(again["run_id"])["source_generation_usd"] == record["source_generation_usd"]
    # A bad setting is bad input, nothing written.
    runs = Store(store).runs().collect().height
    code = main(["rescore", source_id, "--scorer", "exact_match", "--concurrency", "0", "--store", store])
    assert code == 2 and "concurrency" in capsys.readouterr().err
    assert Store(store).runs().collect().height == runs


def test_keep_scores_carries_the_source_scores_so_the_rescore_compares_with_it(source, capsys):
    """`--keep-scores`: the scorers no new one replaces keep the source's rows (their spend zero),
    so `compare SOURCE --candidate RESCORE` shows the redone scorer's change beside no change."""
    store, source_id = source
    summary = assay_json(
        capsys,
        "rescore",
        source_id,
        "--store",
        store,
        "--scorer",
        "{kind: regex, name: exact, pattern: '.'}",  # `exact` redone: any answer passes
        "--scorer",
        "{kind: numeric, name: num}",
        "--keep-scores",
    )
    the = Store(store)
    rescore_id = summary["run_id"]
    assert the.read_run(rescore_id)["kept_scorers"] == ["digits"]
    scores = the.run_scores(rescore_id)
    assert set(scores["scorer"]) == {"exact", "num", "digits"}
    assert {row["scorer"] for row in summary["scorers"]} == {"exact", "num", "digits"}
    columns = ["item_id", "trial", "score", "outcome", "explanation"]
    kept = scores.filter(pl.col("scorer") == "digits").select(columns).sort("item_id")
    source_digits = (
        the.run_scores(source_id).filter(pl.col("scorer") == "digits").select(columns).sort("item_id")
    )
    assert kept.height == 5 and kept.equals(source_digits)
    assert scores.filter(pl.col("scorer") == "digits")["cost_usd"].to_list() == [0.0] * 5

    # The source's one failed item of 6 fails compare's item-error-rate gate (5%).
    comparison = assay_json(
        capsys, "compare", source_id, "--candidate", rescore_id, "--store", store, code=EXIT_GATE
    )
    verdicts = {row["scorer"]: (row["verdict"], row.get("n_pairs")) for row in comparison["scorers"]}
    assert verdicts["digits"] == ("unchanged", 5)
    assert verdicts["exact"] == ("improved", 5), comparison["scorers"]

    # A resume keeps the choice and adds nothing.
    assay_json(capsys, "resume", rescore_id, "--store", store)
    assert the.read_run(rescore_id)["kept_scorers"] == ["digits"]
    assert the.run_scores(rescore_id).height == scores.height


def test_without_keep_scores_a_rescore_holds_only_its_new_scores(source, capsys):
    store, source_id = source
    summary = assay_json(
        capsys, "rescore", source_id, "--store", store, "--scorer", "{kind: numeric, name: num}"
    )
    assert Store(store).read_run(summary["run_id"])["kept_scorers"] is None
    assert set(Store(store).run_scores(summary["run_id"])["scorer"]) == {"num"}
