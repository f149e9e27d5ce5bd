"""The request sidecar against the mock server: records, redaction, limits, export, carry-forward."""

from __future__ import annotations

import json

import polars as pl
import pytest

from assay.calls.capture import Redactor
from assay.cli import main
from assay.store import Store
from tests.conftest import openai_spec, run_assay
from tests.helpers.cli import assay_json

SECRET = "sk-test-0123456789abcdef-SECRET"


def judged(tmp_path, base_url, **extra):
    spec = openai_spec(tmp_path, base_url, n=4, capture_requests=True, fail_on_item_error_rate=1, **extra)
    text = spec.read_text().replace("prompt:", "api_key_env: ASSAY_CAPTURE_KEY\n  prompt:")
    text = text.replace(
        "scorers:\n",
        "scorers:\n- {kind: llm_judge, name: judge, base_url: '" + base_url + "', model: mock-judge, "
        "api_key_env: ASSAY_CAPTURE_KEY, rubric: 'Grade {output} for {input}'}\n",
    )
    spec.write_text(text)
    return spec


def test_every_call_is_captured_and_linked(tmp_path, mock, capsys, monkeypatch):
    monkeypatch.setenv("ASSAY_CAPTURE_KEY", SECRET)
    mock.configure(
        answers={"*": '{"score": 1, "explanation": "fine"}'},
        faults=[{"status": 429, "times": 1, "retry_after": 0, "match": "What is 1 + 1?"}],
    )
    spec = judged(tmp_path, mock.base_url)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    store = Store(tmp_path / "s")
    requests = store.run_requests(summary["run_id"])
    items = store.run_items(summary["run_id"])
    scores = store.run_scores(summary["run_id"])

    # 4 generation calls (one retried after a 429) and 4 judge calls: start + attempts + end each.
    ends = requests.filter(pl.col("phase") == "end")
    assert ends.group_by("kind").len().sort("kind").rows() == [("generation", 4), ("judging", 4)]
    retried = requests.filter(
        (pl.col("phase") == "attempt") & (pl.col("item_id") == "q1") & (pl.col("kind") == "generation")
    )
    assert retried.sort("attempt")["http_status"].to_list() == [429, 200]
    start = requests.filter(
        (pl.col("phase") == "start") & (pl.col("item_id") == "q0") & (pl.col("kind") == "generation")
    )
    assert json.loads(start["request"][0])["messages"][0]["content"] == "What is 0 + 0?"
    assert set(requests.filter(pl.col("kind") == "judging")["scorer"]) == {"judge"}

    # Items list their generation and judging operations; scores their own.
    for row in items.iter_rows(named=True):
        ops = set(requests.filter(pl.col("item_id") == row["item_id"])["operation_id"])
        assert set(row["operation_ids"]) == ops and len(ops) == 2
    judge_rows = scores.filter(pl.col("scorer") == "judge")
    for row in judge_rows.iter_rows(named=True):
        kinds = set(requests.filter(pl.col("operation_id").is_in(row["operation_ids"]))["kind"])
        assert kinds == {"judging"}
    (timing,) = summary["timing_by_model"]
    assert timing["model"] == "mock-1" and timing["calls"] == 4 and timing["rate_limit_retries"] == 1
    assert timing["retries"] == 1
    record = store.read_run(summary["run_id"])
    assert record["capture_status"] == "complete" and record["capture_records"] == requests.height
    assert record["capture_bytes"] == requests["bytes"].sum()

    # The API key never reaches a stored byte: not the store, not the export.
    for path in (tmp_path / "s").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert mock.stats()["last_authorization"] == f"Bearer {SECRET}"


def test_configured_patterns_and_bearer_tokens_are_redacted(tmp_path, mock, capsys):
    mock.configure(answers={"*": "reply mentions Bearer abcdefghijklmnop and ACCT-99881"})
    spec = openai_spec(tmp_path, mock.base_url, n=2, capture_requests=True, redact=[r"ACCT-\d+"])
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    responses = Store(tmp_path / "s").run_requests(summary["run_id"]).filter(pl.col("phase") == "attempt")
    text = " ".join(responses["response"])
    assert "ACCT-99881" not in text and "abcdefghijklmnop" not in text and "[REDACTED]" in text


def test_limits_are_hard_and_said(tmp_path, mock, capsys):
    mock.configure(answers={"*": "x" * 5000})
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=10,
        concurrency=1,
        capture_requests={"max_record_bytes": 2048, "max_run_bytes": 6000, "max_queue_bytes": 1_000_000},
    )
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    store = Store(tmp_path / "s")
    requests = store.run_requests(summary["run_id"])
    record = store.read_run(summary["run_id"])
    assert requests["bytes"].max() <= 2048
    assert requests.filter(pl.col("phase") == "attempt")["truncated"].to_list()[0] is True
    assert requests["bytes"].sum() <= 6000
    assert record["capture_status"] == "truncated" and "max_run_bytes" in record["capture_reason"]
    assert record["capture_dropped"] > 0
    listed = {op for ops in store.run_items(summary["run_id"])["operation_ids"].drop_nulls() for op in ops}
    assert listed <= set(requests["operation_id"]), "no item lists an operation whose records were dropped"


@pytest.mark.slow
def test_export_validate_and_rescore_carry_forward(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=3, capture_requests=True)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    exported = run_assay("requests", "export", summary["run_id"], "--store", str(tmp_path / "s"))
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    assert len(lines) == 9 and all(json.loads(line)["v"] == 1 for line in lines)
    (tmp_path / "calls.jsonl").write_text(exported.stdout)
    assert main(["requests", "validate", str(tmp_path / "calls.jsonl")]) == 0
    (tmp_path / "bad.jsonl").write_text(
        lines[0] + "\n" + '{"v": 1, "operation_id": "x", "phase": "middle"}\n'
    )
    assert main(["requests", "validate", str(tmp_path / "bad.jsonl")]) == 2
    assert "line 2" in capsys.readouterr().err

    mock.configure(answers={"*": '{"score": 0.5}'})
    (tmp_path / "judge.yaml").write_text(
        "scorers:\n  - {kind: llm_judge, name: judge, base_url: '" + mock.base_url + "', model: mock-judge}\n"
        "capture_requests: true\n"
    )
    assert (
        main(
            [
                "rescore",
                summary["run_id"],
                "--spec",
                str(tmp_path / "judge.yaml"),
                "--store",
                str(tmp_path / "s"),
                "--json",
            ]
        )
        == 0
    )
    rescore = json.loads(capsys.readouterr().out)
    carried = Store(tmp_path / "s").run_requests(rescore["run_id"])
    source = Store(tmp_path / "s").run_requests(summary["run_id"])
    assert set(source["operation_id"]) <= set(carried["operation_id"]), "the source's ids stay as they were"
    assert carried.filter(pl.col("kind") == "judging").height == 3 * 3


def test_paths_holding_a_secret_are_renamed_to_unique_names() -> None:
    redactor = Redactor(["tok-123"], [r"pw=\w+"])
    paths = [
        "plain.txt",
        "notes-tok-123.txt",
        "notes-[REDACTED].txt",  # already there: the renamed one must not overwrite it
        "dir-tok-123/a.txt",
        "dir-[REDACTED]/a.txt",
        "tok-123",  # would become a file where a folder `[REDACTED]` is
        "[REDACTED]/q",
        "x/pw=hunter2",
        "tok-123tok-123/../.",
    ]
    stored = redactor.paths(paths)
    assert stored == {
        "plain.txt": "plain.txt",
        "notes-[REDACTED].txt": "notes-[REDACTED].txt",
        "dir-[REDACTED]/a.txt": "dir-[REDACTED]/a.txt",
        "[REDACTED]/q": "[REDACTED]/q",
        "dir-tok-123/a.txt": "dir-[REDACTED]/a~2.txt",
        "notes-tok-123.txt": "notes-[REDACTED]~2.txt",
        "tok-123": "[REDACTED]~2",
        "tok-123tok-123/../.": "[REDACTED][REDACTED]",
        "x/pw=hunter2": "x/[REDACTED]",
    }
    assert len(set(stored.values())) == len(paths)
