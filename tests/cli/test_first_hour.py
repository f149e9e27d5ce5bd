"""Issue 30's terminal points, through the real `assay` command: a threshold in the spec with the
baseline on the command line, a reader that closes the pipe, ..."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assay.cli import main
from assay.testing.mock_openai import MockOpenAIServer
from tests.conftest import REPO, openai_spec, write_jsonl, write_spec

N = 40
SOLVERS = """
def right(x):
    return str(int(x) * 2)

def half_right(x):
    return str(int(x) * 2) if int(x) % 2 else "no idea"
"""


def _spec(folder: Path, function: str, **extra: object) -> Path:
    sub = folder / function
    sub.mkdir(exist_ok=True)
    (sub / f"solvers_{function}.py").write_text(SOLVERS)  # a module of its own: imports are cached
    write_jsonl(
        sub / "data.jsonl", [{"id": f"i{i}", "input": str(i), "expected": str(2 * i)} for i in range(N)]
    )
    return write_spec(
        sub,
        name="t30",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": f"solvers_{function}:{function}"},
        scorers=[{"kind": "exact_match", "name": "exact"}],
        **extra,
    )


def _run_ids(store: Path) -> set[str]:
    return {p.name.removeprefix("run_id=") for p in (store / "runs").glob("run_id=*")}


def _two_runs(folder: Path, store: Path) -> tuple[str, str]:
    """A run that is always right and one right half the time, of the same data, into `store`."""
    ids = []
    for function in ("right", "half_right"):
        before = _run_ids(store)
        assert main(["run", str(_spec(folder, function)), "--store", str(store), "--quiet"]) == 0
        (new,) = _run_ids(store) - before
        ids.append(new)
    return ids[0], ids[1]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A store with `_two_runs`, shared by the module's tests."""
    folder = tmp_path_factory.mktemp("two-runs")
    return folder / "store", *_two_runs(folder, folder / "store")


def test_a_spec_threshold_with_the_baseline_from_compare_to(tmp_path, capsys, two_runs) -> None:
    """8b: `compare_to: {threshold}` in the spec, its baseline given by `--compare-to`."""
    store, right, _ = two_runs
    spec = _spec(tmp_path, "half_right", compare_to={"threshold": 0.1, "stop": "never"})
    assert main(["run", str(spec), "--store", str(store), "--compare-to", right, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["compare_to"]["compare_baseline"] == right
    assert summary["compare_to"]["compare_threshold"] == 0.1
    assert summary["compare_to"]["compare_verdict"] == "regressed"


def test_a_spec_compare_to_without_any_baseline_is_refused(tmp_path, capsys, two_runs) -> None:
    store, _, _ = two_runs
    runs_before = sorted(p.name for p in (store / "runs").iterdir())
    spec = _spec(tmp_path, "half_right", compare_to={"threshold": 0.1})
    assert main(["run", str(spec), "--store", str(store)]) == 2
    assert "compare_to.baseline: no baseline run: name it in the spec or with `--compare-to RUN_ID`" in (
        capsys.readouterr().err
    )
    assert sorted(p.name for p in (store / "runs").iterdir()) == runs_before


def test_compare_json_into_a_closed_pipe_ends_without_a_traceback(two_runs) -> None:
    """8b: `assay compare --json | head`: the reader is gone before the document is written; the
    command says so by its exit status (4: the output did not all arrive), not by a traceback."""
    store, right, half = two_runs
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "assay.cli",
            "compare",
            right,
            "--candidate",
            half,
            "--store",
            str(store),
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # a reader that has read all it wanted, before the document is written
    err = process.stderr.read()
    assert process.wait(timeout=120) == 4, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_template_typo_is_one_line_with_the_fields_and_a_did_you_mean(tmp_path, capsys) -> None:
    """6: `prompt: "{qestion}"` over 30 rows is one problem, not 20 identical lines (and a silent
    stop at 20); a field only some rows lack names those rows, once."""
    rows = [{"id": f"q{i}", "question": f"{i} + {i}?", "answer": str(2 * i)} for i in range(30)]
    for row in rows[5:]:
        row["hint"] = "add"
    write_jsonl(tmp_path / "data.jsonl", rows)
    spec = write_spec(
        tmp_path,
        name="typo",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target={
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",  # never reached: the check comes first
            "model": "mock-1",
            "prompt": "{qestion}",
            "system": "Hint: {hint}",
        },
        scorers=[{"kind": "exact_match", "name": "exact"}],
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    problems = [line.removeprefix("  - ") for line in err.splitlines() if line.startswith("  - ")]
    assert problems == [
        (
            "target.prompt '{qestion}': {qestion} names no field of the dataset; did you mean 'question'? "
            "(the rows' fields: answer, hint, id, input, question)"
        ),
        (
            "target.system 'Hint: {hint}': {hint} is missing from 5 of 30 rows: line 1 (id 'q0'), "
            "line 2 (id 'q1'), line 3 (id 'q2') and 2 more"
        ),
    ], err
    assert not (tmp_path / "store" / "runs").exists()


def test_a_plain_resume_asks_again_the_items_a_dead_endpoint_refused(tmp_path, capsys) -> None:
    """2: the breaker stops a run whose endpoint refuses connections; once it answers, `assay
    resume ID` (no `--retry-failed`) asks the refused items too — they were never sent — and the
    run completes, instead of ending `failed_gate` on their failures."""
    with socket.socket() as refusing:  # bound, never listening: its port refuses connections
        refusing.bind(("127.0.0.1", 0))
        port = refusing.getsockname()[1]
        write_jsonl(tmp_path / "data.jsonl", [{"id": f"q{i}", "question": f"{i}?"} for i in range(30)])
        spec = write_spec(
            tmp_path,
            name="refused",
            dataset={"path": "data.jsonl", "id": "id", "input": "question"},
            target={
                "kind": "openai",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "model": "mock-1",
                "prompt": "{question}",
                "max_retries": 0,
            },
            scorers=[{"kind": "regex", "name": "any", "pattern": "."}],
            concurrency=2,
        )
        store = tmp_path / "store"
        assert main(["run", str(spec), "--store", str(store), "--json"]) == 1
        stopped = json.loads(capsys.readouterr().out)
        assert stopped["status"] == "failed" and stopped["items"]["failed"] >= 5, stopped["items"]
    with MockOpenAIServer(port=port):
        assert main(["resume", stopped["run_id"], "--store", str(store), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed", summary
    assert summary["items"]["completed"] == 30 and summary["items"]["failed"] == 0, summary["items"]


FLAKY_JUDGE = """
def flaky(output, input):
    if int(input) in (3, 17):  # 2 of 30 items: a 6.7 % scorer error rate
        raise RuntimeError("judge unavailable")
    return True
"""


def test_the_run_applies_the_scorer_error_rate_gate_compare_and_the_nightly_apply(tmp_path, capsys) -> None:
    """1: a scorer failing on 6.7 % of items fails the run's gate (exit 1), as it fails compare's
    and the nightly's; the summary lists every gate it applied; `fail_on_scorer_error_rate` is the
    run's own limit."""
    (tmp_path / "judges.py").write_text(FLAKY_JUDGE)
    write_jsonl(tmp_path / "data.jsonl", [{"id": f"i{i}", "input": str(i)} for i in range(30)])
    (tmp_path / "solvers_right.py").write_text(SOLVERS)
    common = {
        "dataset": {"path": "data.jsonl", "id": "id"},
        "target": {"kind": "python", "function": "solvers_right:right"},
        "scorers": [{"kind": "user_code", "name": "judge", "function": "judges:flaky"}],
    }
    spec = write_spec(tmp_path, name="gated", **common)
    store = str(tmp_path / "store")
    assert main(["run", str(spec), "--store", store, "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "failed_gate"
    assert [(g["gate"], g.get("scorer"), g["passed"]) for g in summary["gates"]] == [
        ("item_error_rate", None, True),
        ("scorer_error_rate", "judge", False),
    ]
    assert summary["gates"][1]["message"] == "scorer judge error rate 6.7% (2 failed of 30), limit 5.0%"

    assert main(["show", summary["run_id"], "--store", store]) == 1
    shown = " ".join(capsys.readouterr().out.split())
    assert (
        "gates: item error rate 0.0% (0 failed of 30 attempted), limit 5.0% passed; "
        "scorer judge error rate 6.7% (2 failed of 30), limit 5.0% FAILED"
    ) in shown, shown

    # The spec's own limit: at 10 % the same run passes; the nightly gates its comparison by the
    # same limit (not compare's default 5 %), so a second night of the same run passes too.
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(yaml.safe_dump({"name": "lenient", **common, "fail_on_scorer_error_rate": 0.1}))
    assert main(["run", str(lenient), "--store", store, "--json"]) == 0
    passed = json.loads(capsys.readouterr().out)
    assert passed["status"] == "completed" and all(g["passed"] for g in passed["gates"])
    assert passed["gates"][1]["limit"] == 0.1
    for night in (1, 2):
        assert main(["nightly", str(lenient), "--store", store, "--json"]) == 0, night
        report = json.loads(capsys.readouterr().out)
        assert report["passed"], report["failures"]
    (spec_report,) = report["specs"]
    scorer_gates = [g for g in spec_report["comparison"]["gates"] if g["gate"] == "scorer_error_rate"]
    assert scorer_gates and all(g["limit"] == 0.1 and g["passed"] for g in scorer_gates)


def test_runs_are_named_by_prefix_or_latest_and_listed_with_their_model(tmp_path, capsys, mock) -> None:
    """3: `assay ls` shows each run's model and tags; `show` and `compare` take a unique id
    prefix, `latest`, and `--name SPEC`; an ambiguous prefix lists the runs it could be (exit 2)."""
    store = tmp_path / "store"
    right, half = _two_runs(tmp_path, store)
    other = openai_spec(tmp_path, mock.base_url, n=3, name="other", tags=["smoke"])
    other.write_text(other.read_text().replace("model: mock-1", "model: mock-big"))
    before = _run_ids(store)
    assert main(["run", str(other), "--store", str(store), "--quiet"]) == 0
    (newest,) = _run_ids(store) - before

    assert main(["ls", "--store", str(store), "--json"]) == 0
    listed = {row["run_id"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed[newest]["model"] == "mock-big" and listed[newest]["tags"] == ["smoke"]
    assert main(["ls", "--store", str(store)]) == 0
    table = capsys.readouterr().out
    assert "model" in table and "mock-big" in table and "smoke" in table, table

    def shown(*args: str) -> str:
        assert main(["show", *args, "--store", str(store), "--json"]) == 0
        return json.loads(capsys.readouterr().out)["run_id"]

    assert shown("latest") == newest
    assert shown("latest", "--name", "t30") == half
    assert shown(half[:-1]) == half
    assert shown(newest) == newest

    common = newest[:9]  # the date: every run of the day starts so
    assert main(["show", common, "--store", str(store)]) == 2
    err = capsys.readouterr().err
    n_common = len([run for run in _run_ids(store) if run.startswith(common)])
    assert (
        n_common > 1 and f"{common!r} is the start of {n_common} run ids" in err and "(other mock-big)" in err
    ), err
    assert main(["show", "nosuchrun", "--store", str(store)]) == 2
    assert "no run 'nosuchrun'" in capsys.readouterr().err

    assert (
        main(["compare", right, "--candidate", "latest", "--name", "t30", "--store", str(store), "--json"])
        == 1
    )
    comparison = json.loads(capsys.readouterr().out)
    assert comparison["baseline"] == [right] and comparison["candidate"] == [half]
    assert comparison["runs"][half] == {"name": "t30", "model": None, "cell": None, "tags": []}
    # On a terminal each side's run is named with its model.
    assert main(["compare", newest, "--candidate", "latest", "--store", str(store)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.startswith(f"compare {newest} (mock-big, tags smoke) → {newest} (mock-big, tags smoke)"), (
        header
    )
    # The report takes the same names, and its baseline section names both models.
    out = tmp_path / "report.html"
    assert (
        main(["report", "latest", "--baseline", newest[:-1], "--out", str(out), "--store", str(store)]) == 0
    )
    capsys.readouterr()
    assert (
        f"Baseline <code>{newest}</code> (mock-big) → candidate <code>{newest}</code> (mock-big)"
        in out.read_text()
    )
    # 5: its figure's title names the intervals' own method (not always "bootstrap").
    assert "95 % paired CI (" in out.read_text() and "paired bootstrap CI" not in out.read_text()


def test_the_mock_says_in_its_help_how_to_give_it_answers_and_serves_a_file_of_them(tmp_path) -> None:
    """7: `python -m assay.testing.mock_openai --help` says how to set its answers (and so its
    accuracy) and names `POST /_mock/config`; `--answers FILE` serves them."""
    helped = subprocess.run(
        [sys.executable, "-m", "assay.testing.mock_openai", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert helped.returncode == 0, helped.stderr
    text = " ".join(helped.stdout.split())
    assert "--answers" in text and "POST /_mock/config" in text and "accuracy" in text, text
    assert 'Two "models" to compare: two mocks on two ports' in text

    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"What is 2 + 2?": "4", "*": "no idea"}))
    mock = subprocess.Popen(
        [sys.executable, "-m", "assay.testing.mock_openai", "--port", "0", "--answers", str(answers)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert mock.stdout is not None
        base_url = mock.stdout.readline().strip().removeprefix("listening on ")
        import httpx

        def ask(question: str) -> str:
            reply = httpx.post(
                f"{base_url}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": question}]},
                timeout=10,
            )
            return reply.json()["choices"][0]["message"]["content"]

        assert (ask("What is 2 + 2?"), ask("What is 3 + 3?")) == ("4", "no idea")
    finally:
        mock.terminate()
        mock.wait(timeout=10)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    refused = subprocess.run(
        [sys.executable, "-m", "assay.testing.mock_openai", "--answers", str(bad)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "--answers" in refused.stderr, refused.stderr


def test_the_judges_reply_format_is_in_the_spec_reference() -> None:
    """7: docs/spec.md's `llm_judge` section says what reply the judge must give."""
    doc = (REPO / "docs" / "spec.md").read_text(encoding="utf-8")
    section = doc[doc.index("### scorer `llm_judge`") :].split("\n### ", 1)[0]
    assert '`{"score": 4, "explanation": "..."}`' in " ".join(section.split())
    assert "no score found in the judge's reply" in section


def test_compare_prints_gauges_in_their_units(capsys, two_runs) -> None:
    """5: compare's gauge lines in the gauge's unit (`14 ms → 13 ms`), not raw floats."""
    store, right, half = two_runs
    assert main(["compare", right, "--candidate", half, "--store", str(store)]) == 1
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "gauge.duration_ms" in line]
    assert re.fullmatch(
        r"gauge\.duration_ms [\d,.]+ ms → [\d,.]+ ms( \([−+]?[\d.]+%\))? over 40 pairs", line.strip()
    ), line
