"""Batch mode on `llm_judge`, against the OpenAI and Anthropic batch API mocks over real sockets:
the judge's calls gathered into batches at batch prices, recorded in the run's `batches/` as the
judge's, re-attached after a SIGKILL with no request submitted twice — in a run and in a rescore."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.calls.accounting import PriceTable, Usage
from assay.cli import main
from assay.store import Store
from tests.conftest import only_run_id, run_assay, start_assay, start_run, wait_for, write_jsonl, write_spec

BATCH = {"max_requests": 5, "max_wait_s": 0.2, "poll_s": 0.05}
GPT = "gpt-4o-mini-2024-07-18"
CLAUDE = "claude-sonnet-4-5-20250929"
VERDICT = '{"score": 1, "explanation": "right"}'
SOLVER = "def solve(x):\n    return x.upper()\n"


def judge(provider: str, base_url: str, **options: Any) -> dict[str, Any]:
    return {
        "kind": "llm_judge",
        "name": "quality",
        "provider": provider,
        "base_url": base_url,
        "model": GPT if provider == "openai" else CLAUDE,
        "max_tokens": 64,
        "gold_check": False,
        **options,
    }


def judged_spec(folder: Path, n: int, scorers: list[dict[str, Any]], **spec: Any) -> Path:
    """A python target (upper-cases its input: the same answer on every run) and `scorers`."""
    (folder / "upper_solver.py").write_text(SOLVER)
    write_jsonl(
        folder / "data.jsonl",
        [{"id": f"q{i}", "input": f"say {i}", "expected": f"SAY {i}"} for i in range(n)],
    )
    return write_spec(
        folder,
        name="batch-judged",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "upper_solver:solve"},
        scorers=scorers,
        concurrency=2,
        **spec,
    )


def test_a_responses_judge_grades_through_a_batch_of_responses_requests(tmp_path, mock, scripted, capsys):
    """`api: responses` with `batch`: the mock's batch workers answer at the scripted server, which
    checks each request against the SDK's `ResponseCreateParams` (the `scripted` fixture asserts
    it found no problem)."""
    from assay.testing.scripted import Reply
    from tests.helpers.wire_payloads import output_message, response

    scripted.script(*[Reply("responses", response([output_message(VERDICT)])) for _ in range(3)])
    mock.configure(batch_upstream=scripted.base_url.removesuffix("/v1"))
    spec = judged_spec(tmp_path, 3, [judge("openai", mock.base_url, api="responses", batch=BATCH)])
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "-q"]) == 0
    store, run_id = Store(tmp_path / "s"), only_run_id(tmp_path / "s")
    assert store.run_scores(run_id)["score"].to_list() == [1.0] * 3
    assert mock.batch_stats()["batch_submissions"] == 1
    assert [path for path, _ in scripted.requests] == ["/v1/responses"] * 3
    assert store.run_batches(run_id)["scorer"].to_list() == ["quality"]


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest, mock: Any, claude: Any) -> tuple[str, Any]:
    """Each provider's judge, with its mock answering every request with a verdict."""
    server = mock if request.param == "openai" else claude
    server.configure(answers={"*": VERDICT})
    return request.param, server


def batch_stats(server: Any) -> dict[str, Any]:
    return server.batch_stats() if hasattr(server, "batch_stats") else server.stats()


def online_requests(server: Any) -> int:
    """Chat requests made outside batches, once every batch has ended (the OpenAI mock answers a
    batch's requests through its own chat endpoint, counting them as requests)."""
    if hasattr(server, "batch_stats"):
        return server.stats()["requests"] - sum(server.batch_stats()["batch_requests"].values())
    return server.stats()["requests"]


def test_a_batched_judge_grades_through_batches_at_batch_prices(tmp_path, provider, capsys):
    name, server = provider
    spec = judged_spec(tmp_path, 12, [judge(name, server.base_url, batch=BATCH)])
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary, store = json.loads(capsys.readouterr().out), Store(tmp_path / "s")
    stats = batch_stats(server)
    assert online_requests(server) == 0, "no online judge call"
    # 12 requests, 5 at most a batch; `concurrency: 2` does not cap what the judge's batches gather.
    assert stats["batch_submissions"] == 3 and sorted(stats["batch_requests"].values()) == [1] * 12

    scores = store.run_scores(summary["run_id"])
    assert scores["outcome"].to_list() == ["scored"] * 12 and scores["score"].to_list() == [1.0] * 12
    assert store.run_items(summary["run_id"])["operations_batched"].to_list() == [1] * 12
    model = GPT if name == "openai" else CLAUDE
    shipped = PriceTable.shipped()
    online = sum(
        shipped.cost(model, Usage(input_tokens=row["tokens_input"], output_tokens=row["tokens_output"]))
        for row in scores.iter_rows(named=True)
    )
    assert scores["cost_usd"].sum() == pytest.approx(online / 2) and online > 0
    record = store.read_run(summary["run_id"])
    assert record["operations_batched"] == 12 and record["cost_judging_usd"] == pytest.approx(online / 2)

    batches = store.run_batches(summary["run_id"])
    assert sorted(batches["requests"].to_list()) == [2, 5, 5]
    assert batches["purpose"].to_list() == ["judging"] * 3 and batches["scorer"].to_list() == ["quality"] * 3
    assert batches["state"].to_list() == ["ended"] * 3


@pytest.mark.slow  # a killed `assay run` process, then a resume waiting out the batches: seconds
def test_a_sigkill_with_judge_batches_in_flight_then_resume_submits_nothing_twice(tmp_path, provider):
    name, server = provider
    n = 15
    server.configure(batch_delay_ms=3000)
    store = tmp_path / "s"
    spec = judged_spec(tmp_path, n, [judge(name, server.base_url, batch={**BATCH, "poll_s": 0.1})])
    process = start_run(spec, store)
    wait_for(
        lambda: len(list((store / "batches").glob("run_id=*/*-in_progress.parquet"))) == 3,
        "3 judge batches were recorded in flight",
        process,
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store)
    assert batch_stats(server)["batch_submissions"] == 3
    assert Store(store).run_items(run_id).height == 0, "killed before any batch ended"

    resumed = run_assay("resume", run_id, "--store", str(store), "--json")
    assert resumed.returncode == 0, resumed.stderr
    stats = batch_stats(server)
    assert stats["batch_submissions"] == 3, "re-attached to the 3 batches, none submitted again"
    assert sorted(stats["batch_requests"].values()) == [1] * n, "0 requests submitted twice"
    scores = Store(store).run_scores(run_id)
    assert scores.height == n and scores["outcome"].to_list() == ["scored"] * n
    assert Store(store).run_items(run_id)["operations_batched"].sum() == n
    batches = Store(store).run_batches(run_id)
    assert batches["state"].to_list() == ["ended"] * 3 and batches["purpose"].to_list() == ["judging"] * 3
    shown = run_assay("show", run_id, "--store", str(store))
    assert "judge quality: 3 batches (0 in progress, 3 ended) holding 15 requests" in shown.stdout, (
        shown.stdout
    )


def test_a_batched_judge_and_a_batched_target_keep_their_batches_apart(tmp_path, claude, capsys):
    """One provider, one run: the target's batches and the judge's, each re-attachable as its own."""
    claude.configure(answers={"*": VERDICT})
    write_jsonl(tmp_path / "data.jsonl", [{"id": f"q{i}", "question": f"q {i}"} for i in range(6)])
    spec = write_spec(
        tmp_path,
        name="both-batched",
        dataset={"path": "data.jsonl", "id": "id", "input": "question"},
        target={
            "kind": "anthropic",
            "base_url": claude.base_url,
            "model": CLAUDE,
            "prompt": "{question}",
            "max_tokens": 64,
            "batch": BATCH,
        },
        scorers=[judge("anthropic", claude.base_url, batch=BATCH)],
        concurrency=2,
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    batches = Store(tmp_path / "s").run_batches(summary["run_id"])
    by_purpose = dict(batches.group_by("purpose").agg(pl.col("requests").sum()).rows())
    assert by_purpose == {"generation": 6, "judging": 6}
    assert batches.filter(pl.col("purpose") == "generation")["scorer"].null_count() == 2
    assert online_requests(claude) == 0 and claude.stats()["batch_submissions"] == 4
    assert [row["label"] for row in summary["batches"]["by_purpose"]] == ["target", "judge quality"]


def test_the_gold_check_of_a_batched_judge_is_one_online_call(tmp_path, mock, capsys):
    mock.configure(answers={"*": VERDICT})
    spec = judged_spec(tmp_path, 4, [judge("openai", mock.base_url, batch=BATCH, gold_check=True)])
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    capsys.readouterr()
    assert online_requests(mock) == 1, "the gold check, before the run"
    assert sum(mock.batch_stats()["batch_requests"].values()) == 4


def test_budget_counts_a_submitted_judge_request_at_its_maximum_cost(tmp_path, mock, capsys):
    # Each judge request's maximum at gpt-4o-mini's batch prices ($0.075/M in, $0.30/M out): ~500
    # bytes in and 64 tokens out, ~$0.00006; its real cost is ~$0.00001. A $0.0002 budget admits
    # requests while their maxima fit (3 of them); counted at their real cost it would admit all 8.
    mock.configure(answers={"*": VERDICT}, batch_delay_ms=300)
    spec = judged_spec(tmp_path, 8, [judge("openai", mock.base_url, batch=BATCH)], budget="$0.0002")
    main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    submitted = sum(mock.batch_stats()["batch_requests"].values())
    assert 1 <= submitted < 8, submitted
    scores = Store(tmp_path / "s").run_scores(summary["run_id"])
    outcomes = dict(scores["outcome"].value_counts().rows())
    assert outcomes["scored"] == submitted and set(outcomes) <= {
        "scored",
        "budget_interrupted",
        "budget_skipped",
    }
    assert Store(tmp_path / "s").read_run(summary["run_id"])["budget_spent_usd"] < 0.0002


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cache": True}, "batch cannot be combined with cache"),
        ({"max_tokens": None}, "batch needs max_tokens"),
    ],
)
def test_a_batched_judge_spec_that_cannot_work_is_refused(tmp_path, mock, options, message, capsys):
    spec = judged_spec(tmp_path, 2, [judge("openai", mock.base_url, batch=True, **options)])
    code, err = main(["run", str(spec), "--store", str(tmp_path / "s")]), capsys.readouterr().err
    assert code == 2 and message in err and "scorers" in err, err
    assert not (tmp_path / "s" / "runs").exists(), "nothing written"


# -- the nightly re-grading case: a rescore with a batched judge -----------------------------------


@pytest.mark.slow  # a killed `assay rescore` process, then a resume waiting out the batches: seconds
def test_a_rescore_with_a_batched_judge_killed_and_resumed_submits_nothing_twice(tmp_path, mock, capsys):
    n = 15
    mock.configure(answers={"*": VERDICT})
    spec = judged_spec(tmp_path, n, [{"kind": "exact_match", "name": "exact"}])
    store = tmp_path / "s"
    assert main(["run", str(spec), "--store", str(store), "--json"]) == 0
    source_id = json.loads(capsys.readouterr().out)["run_id"]

    mock.configure(batch_delay_ms=3000)
    scorer = json.dumps(judge("openai", mock.base_url, batch={**BATCH, "poll_s": 0.1}))
    process = start_assay("rescore", source_id, "--store", str(store), "--scorer", scorer)
    rescore_batches = lambda: [
        path
        for path in (store / "batches").glob("run_id=*/*-in_progress.parquet")
        if source_id not in str(path)
    ]
    wait_for(lambda: len(rescore_batches()) == 3, "3 judge batches of the rescore were recorded", process)
    process.send_signal(signal.SIGKILL)
    process.wait()
    rescore_id = rescore_batches()[0].parent.name.removeprefix("run_id=")
    assert mock.batch_stats()["batch_submissions"] == 3

    resumed = run_assay("resume", rescore_id, "--store", str(store), "--json")
    assert resumed.returncode == 0, resumed.stderr
    stats = mock.batch_stats()
    assert stats["batch_submissions"] == 3 and sorted(stats["batch_requests"].values()) == [1] * n
    assert online_requests(mock) == 0
    scores = Store(store).run_scores(rescore_id)
    assert scores["outcome"].to_list() == ["scored"] * n
    assert Store(store).run_items(rescore_id)["operations_batched"].sum() == n
    record = Store(store).read_run(rescore_id)
    assert record["kind"] == "rescore" and record["operations_batched"] == n


# -- progress: the live bar shows each batcher's batches ---------------------------------------------


def run_in_a_terminal(*args: str, timeout: float = 120) -> tuple[int, str]:
    """`assay <args>` with its stderr on a pseudo-terminal (so the live progress bar draws), and
    everything drawn there."""
    import os
    import pty
    import subprocess
    import sys

    from tests.conftest import REPO

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", *args],
        cwd=REPO,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    drawn = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer of the terminal has closed it
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    return process.wait(timeout), drawn.decode("utf-8", "replace")


@pytest.mark.slow  # an `assay run` process on a pseudo-terminal, waiting out 1 s batches: seconds
def test_the_progress_bar_shows_the_judges_batches_in_flight_and_done(tmp_path, mock):
    mock.configure(answers={"*": VERDICT}, batch_delay_ms=1000)
    spec = judged_spec(tmp_path, 12, [judge("openai", mock.base_url, batch=BATCH)])
    code, drawn = run_in_a_terminal("run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 0, drawn
    assert re.search(r"judge quality batches: [1-3] in flight \((5|10|12) requests\)", drawn), drawn
    assert "judge quality batches: 0 in flight (0 requests), 3 done (12 requests)" in drawn, drawn
