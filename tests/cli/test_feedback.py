"""What a person at a terminal reads when things go wrong: failures grouped by reason, a scorer
that failed everywhere named with its first error, never an empty table without a reason, and a
target that refuses connections stopping the run early (issue 15, points 3 and 4)."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay import numbers
from assay.cli import main
from assay.errors import TargetUnreachable
from assay.report import build_report
from assay.run.breaker import CircuitBreaker
from assay.store import Store
from assay.testing.mock_openai import MockOpenAIServer
from tests.conftest import REPO, arithmetic_rows, only_run_id, run_assay, write_jsonl, write_spec
from tests.helpers.cli import assay_json


@pytest.fixture
def refusing() -> Iterator[socket.socket]:
    """A socket on 127.0.0.1 whose port refuses connections: bound (so nobody else takes it),
    never listening. Close it to free the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock


def refused_spec(folder: Path, port: int, n: int = 30) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    target = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "mock-1"}
    return write_spec(
        folder,
        name="refused",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target={**target, "prompt": "{question}", "max_retries": 0},
        scorers=[{"kind": "exact_match"}],
        concurrency=2,
    )


@pytest.mark.slow
def test_a_refusing_target_stops_the_run_early_and_resumes(tmp_path, refusing, capsys):
    refusing_port = refusing.getsockname()[1]
    spec, store = refused_spec(tmp_path, refusing_port), tmp_path / "store"
    assert main(["run", str(spec), "--store", str(store)]) == 1
    out = capsys.readouterr().out
    run_id = only_run_id(store)
    where = f"127.0.0.1:{refusing_port}"
    assert f"run {run_id}  status failed" in out
    assert (
        "stopped by: TargetUnreachable: 5 items in a row failed to connect to the target and none "
        f"succeeded (connection refused by {where}); stopped early, the rest cancelled "
        f"(`assay resume {run_id}` continues it)"
    ) in " ".join(out.split()), out
    record = Store(store).read_run(run_id)
    failed, cancelled = record["n_failed"], record["n_cancelled"]
    assert failed >= 5 and failed + cancelled == 30 and cancelled >= 20, (failed, cancelled)
    assert f"items: {failed} failed, {cancelled} cancelled of 30 planned" in out
    assert f"{failed} failed: connection refused by {where} ({failed})" in out
    assert "no scores: no item completed" in out and "┏" not in out, "no empty table"

    # A refused call was never sent: it cost $0, and that figure is complete.
    items = Store(store).run_items(run_id)
    assert items["cost_usd"].to_list() == [0.0] * failed
    assert items["cost_completeness"].to_list() == ["complete"] * failed
    assert items["operations"].to_list() == [1] * failed
    assert record["cost_completeness"] == "complete" and record["cost_usd"] == 0.0

    # Once the endpoint answers, `assay resume` runs the cancelled items, and the refused ones
    # (never sent) again.
    refusing.close()
    with MockOpenAIServer(port=refusing_port):
        summary = assay_json(capsys, "resume", run_id, "--store", store)
    assert summary["status"] == "completed" and summary["items"]["completed"] == 30


def test_the_breaker_trips_only_on_a_streak_of_connection_failures_before_any_success():
    def row(outcome: str, kind: str | None = None) -> dict[str, str | None]:
        return {"outcome": outcome, "failure_kind": kind, "error": f"{kind} error"}

    breaker = CircuitBreaker(threshold=3)
    breaker.observe(row("failed", "connection"))
    breaker.observe(row("failed", "connection"))
    breaker.observe(row("failed", "http"))  # the endpoint answered: the streak starts over
    breaker.observe(row("failed", "connection"))
    breaker.observe(row("failed", "connection"))
    with pytest.raises(
        TargetUnreachable, match=r"^3 items in a row failed to connect .*\(connection error\)"
    ):
        breaker.observe(row("failed", "connection"))

    disarmed = CircuitBreaker(threshold=2)
    disarmed.observe(row("completed"))  # once anything succeeded, failures are data
    for _ in range(5):
        disarmed.observe(row("failed", "connection"))


def test_a_scorer_failing_on_every_item_says_so_in_one_line(tmp_path, mock, capsys):
    write_jsonl(tmp_path / "data.jsonl", arithmetic_rows(3))
    mock.configure(answers={"*": "I would rather not grade this."})
    spec = write_spec(
        tmp_path,
        name="judged",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target={"kind": "openai", "base_url": mock.base_url, "model": "mock-1", "prompt": "{question}"},
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {
                "kind": "llm_judge",
                "name": "judge",
                "base_url": mock.base_url,
                "model": "mock-1",
                "rubric": "Is the answer correct?",
                "gold_check": False,  # the gold check would refuse the eval before it ran
            },
        ],
    )
    # A scorer failing everywhere fails the run's scorer error-rate gate (issue 30).
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("judge:")]
    assert lines == [
        (
            "judge: 3 of 3 failed — JudgeError: no score found in the judge's reply; the judge "
            "replied: 'I would rather not grade this.'"
        )
    ], out
    assert not any(line.startswith("exact:") for line in out.splitlines()), "exact never failed"


# --- numbers: one formatter for the terminal, the report and the Prefect artifacts (points 6, 7) ---


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (5.59e-05, "$0.000056"),
        (0.0, "$0"),
        (0.00123, "$0.0012"),
        (0.123456, "$0.1235"),
        (12.5, "$12.5"),
        (1234.5, "$1,234.50"),
        (-0.00005, "-$0.00005"),
        (None, "–"),
    ],
)
def test_money_is_plain_decimals(value, shown):
    assert numbers.usd(value) == shown


def test_milliseconds_are_rounded_and_ratios_are_percentages():
    assert [numbers.ms(v) for v in (8664.7, 12.0, 3.21, None)] == ["8,665 ms", "12 ms", "3.2 ms", "–"]
    assert [numbers.pct(v) for v in (0.0333, 1.0, None)] == ["3.3%", "100.0%", "–"]
    assert numbers.gauge("gauge.cost_usd", 5.59e-05) == "$0.000056"
    assert numbers.gauge("gauge.duration_ms", 1234.4) == "1,234 ms"
    assert numbers.gauge("gauge.steps", 3.0) == "3"


def priced_spec(folder: Path, base_url: str, **spec) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(3))
    target = {"kind": "openai", "base_url": base_url, "model": "mock-1", "prompt": "{question}"}
    return write_spec(
        folder,
        name="priced",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target={**target, **spec.pop("target", {})},
        scorers=[{"kind": "exact_match"}],
        **spec,
    )


def test_the_summary_shows_cost_with_its_completeness(tmp_path, mock, capsys):
    # Five words in, five out, at $1 / $2 per million tokens: $0.000015 an item.
    spec = priced_spec(tmp_path, mock.base_url, prices={"mock-1": {"input": 1.0, "output": 2.0}})
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "cost $0.000045 (complete)" in out.splitlines(), out
    assert "item duration: mean " in out and " ms · p50 " in out
    assert "e-0" not in out, "no scientific notation anywhere"

    (tmp_path / "unpriced").mkdir()
    unpriced = priced_spec(tmp_path / "unpriced", mock.base_url)
    assert main(["run", str(unpriced), "--store", str(tmp_path / "u")]) == 0
    out = capsys.readouterr().out
    assert "cost unknown: mock-1 is unpriced (add it to the spec's `prices`)" in out.splitlines(), out


def test_estimate_leads_with_unknown_and_says_at_most_only_for_a_real_maximum(tmp_path, mock, capsys):
    spec = priced_spec(tmp_path, mock.base_url)
    assert main(["estimate", str(spec), "--store", str(tmp_path / "s")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "cost unknown: mock-1 is unpriced (add it to the spec's `prices`)", last

    uncapped = priced_spec(tmp_path, mock.base_url, prices={"mock-1": {"input": 1.0, "output": 2.0}})
    assert main(["estimate", str(uncapped), "--store", str(tmp_path / "s")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"cost expected \$0\.0000\d+, no upper bound \(a call without max_tokens\)", last), (
        last
    )

    capped = priced_spec(
        tmp_path,
        mock.base_url,
        prices={"mock-1": {"input": 1.0, "output": 2.0}},
        target={"max_tokens": 10},
    )
    assert main(["estimate", str(capped), "--store", str(tmp_path / "s")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    # 3 calls x 10 output tokens at $2 per million, plus the prompts' input tokens at $1.
    # Nothing measured the output yet: the expected cost is its maximum, and says so.
    upper = r" \(an upper bound: output at max_tokens, no stored run of this spec measured it\)"
    assert re.fullmatch(r"cost expected \$0\.0000\d+" + upper + r", at most \$0\.0000\d+", last), last


@pytest.mark.slow
def test_the_report_writes_tiny_costs_in_plain_decimals(tmp_path, mock, capsys):
    spec = priced_spec(tmp_path, mock.base_url, prices={"mock-1": {"input": 1.0, "output": 2.0}})
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    html = build_report(Store(tmp_path / "s"), run_id)
    gauges = re.search(r'<table class="gauges">.*?</table>', html, re.DOTALL)
    assert gauges is not None
    cost_row = re.search(r"<code>gauge\.cost_usd</code>.*?</tr>", gauges.group(0), re.DOTALL)
    assert cost_row is not None and cost_row.group(0).count("$0.000015") == 4, cost_row.group(0)
    assert "e-05" not in gauges.group(0)


def test_the_spec_reference_documents_every_field_of_the_scorers_that_take_fields():
    from assay.evaluators.code_exec import CodeExec
    from assay.evaluators.llm_judge import LlmJudge
    from assay.evaluators.remote import Remote
    from assay.evaluators.user import UserCode

    # The README's scorer table moved to docs/spec.md (generated), the mock's command to the quickstart.
    reference = (REPO / "docs" / "spec.md").read_text()
    common = {"kind", "name", "applies", "gold_check"}
    for scorer in (LlmJudge, UserCode, Remote, CodeExec):
        (kind,) = scorer.model_fields["kind"].annotation.__args__
        section = reference.split(f"### scorer `{kind}`\n", 1)[1].split("\n### ", 1)[0]
        rows = {line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| `")}
        fields = {f: scorer.model_fields[f].alias or f for f in scorer.model_fields if f not in common}
        missing = [f for f, shown in fields.items() if f"`{shown}`" not in rows]
        assert not missing, (kind, missing)
    assert "python -m assay.testing.mock_openai --port 8000" in (REPO / "docs" / "quickstart.md").read_text()


@pytest.mark.slow
def test_a_failed_item_says_how_many_retries_it_took(tmp_path, mock, capsys):
    mock.configure(faults=[{"status": 500, "times": -1}])
    spec = priced_spec(tmp_path, mock.base_url, target={"max_retries": 2}, fail_on_item_error_rate=1)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    items = Store(tmp_path / "s").run_items(run_id)
    assert items["outcome"].to_list() == ["failed"] * 3 and items["retries"].to_list() == [2] * 3


def test_a_rescore_is_labelled_as_one_in_show_and_ls(tmp_path, mock, capsys):
    spec, store = priced_spec(tmp_path, mock.base_url), str(tmp_path / "s")
    assert main(["run", str(spec), "--store", store, "--json"]) == 0
    source = json.loads(capsys.readouterr().out)["run_id"]
    assert (
        main(["rescore", source, "--scorer", "{kind: includes, value: '2'}", "--store", store, "--json"]) == 0
    )
    rescore = json.loads(capsys.readouterr().out)["run_id"]

    assert main(["show", rescore, "--store", store]) == 0
    assert f"run {rescore} (rescore of {source})  status completed" in capsys.readouterr().out
    assert main(["ls", "--store", store]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if rescore in line]
    assert f"rescore of {source}" in line


@pytest.mark.slow
def test_assay_ui_refuses_a_busy_port_before_starting_anything(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_assay("ui", "--port", str(port), "--logs", str(tmp_path / "logs"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: --port {port}: 127.0.0.1:{port} is already in use (another `assay ui` or Prefect "
        "server?); stop it, or pass another --port"
    )
    assert not (tmp_path / "logs").exists(), "nothing started, nothing written"


def test_a_failed_python_item_says_it_was_not_retried(tmp_path, capsys):
    """A python target's call is never retried: its failed items' `retries` is 0, not null."""
    (tmp_path / "broken.py").write_text("def answer(question):\n    raise ValueError('no')\n")
    write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "input": "x"}, {"id": "b", "input": "y"}])
    spec = write_spec(
        tmp_path,
        name="broken",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "broken:answer"},
        scorers=[{"kind": "exact_match"}],
        fail_on_item_error_rate=1,
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    items = Store(tmp_path / "s").run_items(run_id)
    assert items["outcome"].to_list() == ["failed"] * 2 and items["retries"].to_list() == [0, 0]


def test_logged_progress_says_each_tenth_and_every_few_seconds_between():
    """A flow run's progress lines (`assay.run.progress.Logged`): one at the start, one at each
    tenth of the run, and one at least every `every_s` seconds while items finish between tenths."""
    from assay.run.progress import Logged

    lines: list[str] = []
    now = [0.0]
    reporter = Logged(lines.append, every_s=5.0, clock=lambda: now[0])
    reporter.started(1000, 0)
    for _ in range(50):  # 5 % of the run, one item a second: a line every 5 s
        now[0] += 1.0
        reporter.item_done("completed")
    assert len(lines) == 1 + 10
    assert lines[0] == "progress: 0 of 1000 items (0.0%) · 0 failed · 0.0 s"
    assert lines[1] == "progress: 5 of 1000 items (0.5%) · 0 failed · 5.0 s · 1.0 items/s"
    assert lines[-1] == "progress: 50 of 1000 items (5.0%) · 0 failed · 50.0 s · 1.0 items/s"
    for _ in range(50):  # the next 5 %, at once: one line, at the tenth
        reporter.item_done("failed")
    assert lines[-2:] == [lines[10], "progress: 100 of 1000 items (10.0%) · 50 failed · 50.0 s · 2.0 items/s"]


def test_items_per_second_counts_only_the_items_run_here_once_it_means_something():
    """A resume's items done before are no part of the rate, and neither are its first seconds or
    first items (`334 items/s` at the start, `7,031 items/s` on a resume)."""
    from assay.run.progress import Logged

    lines: list[str] = []
    now = [0.0]
    reporter = Logged(lines.append, every_s=0.5, clock=lambda: now[0])
    reporter.started(1000, 900)  # a resume: 900 done before
    for _ in range(4):  # 4 items in 4 s: too few
        now[0] += 1.0
        reporter.item_done("completed")
    assert all("items/s" not in line for line in lines), lines
    now[0] += 1.0
    reporter.item_done("completed")
    assert lines[-1] == "progress: 905 of 1000 items (90.5%) · 0 failed · 5.0 s · 1.0 items/s"

    lines.clear()
    quick = Logged(lines.append, every_s=0.0, clock=lambda: now[0])
    quick.started(100, 0)
    for _ in range(10):  # 10 items in 1 s: too soon
        now[0] += 0.1
        quick.item_done("completed")
    assert all("items/s" not in line for line in lines), lines
