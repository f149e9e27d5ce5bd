"""Sessions in containers, against a real Docker engine (agent-bench's core loop): a policy
drives the agent inside the attempt's live container with `start` / `resume`, runs checks
between prompts with `session.box.exec(argv)`, and each attempt gets a fresh container."""

from __future__ import annotations

import asyncio
import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.cli import main
from assay.store import Store
from assay.targets.atif import read_atif
from tests.conftest import write_jsonl, write_spec
from tests.helpers.sandbox_images import busybox_with, engine

pytestmark = [pytest.mark.docker]

SECRET = "sk-session-secret-5d1e8b"

# A stand-in for Claude Code: `--continue` needs the conversation an earlier prompt of this
# container started (kept in its $HOME); a prompt asking to repair writes the right answer.
# Each prompt replays a stream-json result with its own usage and the conversation's cost.
_FAKE_CLAUDE = b"""#!/bin/sh
[ "$1" = "--version" ] && { echo "1.0.99-fake (Claude Code)"; exit 0; }
[ -n "$ANTHROPIC_API_KEY" ] || { echo "no ANTHROPIC_API_KEY" >&2; exit 9; }
for arg; do prompt=$arg; done
case " $* " in
  *" --continue "*) [ -f "$HOME/.conversation" ] || { echo "no conversation to continue" >&2; exit 3; } ;;
  *) [ -f "$HOME/.conversation" ] && { echo "a second conversation" >&2; exit 4; } ;;
esac
echo "$*" >> "$HOME/.conversation"
echo "$*" >> argv.txt
case "$prompt" in *repair*) echo 42 > answer.txt ;; *) [ -f answer.txt ] || echo WRONG > answer.txt ;; esac
echo '{"type":"system","subtype":"init"}'
printf '{"type":"assistant","message":{"content":[{"type":"text","text":"did: %s"}]}}\\n' "$(cat answer.txt)"
printf '{"type":"result","subtype":"success","is_error":false,"result":"%s","num_turns":1,' "$(cat answer.txt)"
# As the real Claude Code: after --continue, total_cost_usd is the conversation's (0.02 a prompt).
printf '"usage":{"input_tokens":11,"output_tokens":3},"total_cost_usd":%s}\n' "$(awk "BEGIN{print 0.02 * $(wc -l < "$HOME/.conversation")}")"
"""

REPAIR = """
import json, os

async def policy(session):
    first = await session.start(session.prompt)
    check = await session.box.exec(["sh", "-c", "cat answer.txt; id -u; echo ${ANTHROPIC_API_KEY:-none}; [ -e /tmp/.assay-env ] && echo present || echo gone"])
    hung = await session.box.exec(["sleep", "30"])
    with open(os.environ["BOX_LOG"], "a") as log:
        log.write(json.dumps({
            "attempt": session.attempt, "first": first, "exit": check.exit_code,
            "stdout": check.stdout.decode(), "hung": [hung.timed_out, hung.exit_code, hung.duration_ms],
        }) + "\\n")
    if session.attempt >= NEEDED:
        await session.resume("working check failed: repair the missing branch")
    else:
        await session.resume("check again")
"""


def _repair(needed: int) -> str:
    """The policy that asks for the repair from attempt `needed` on (before it: "check again")."""
    return REPAIR.replace("NEEDED", str(needed))


@pytest.fixture(scope="module")
def fake_claude() -> str:
    return busybox_with("fake-claude-sessions", {"usr/local/bin/claude": (_FAKE_CLAUDE, 0o755)}, engine())


def _spec(tmp_path: Path, image: str, policy: str, attempts: int = 1) -> Path:
    write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "input": "fix the branch"}])
    checks = tmp_path / "checks"
    checks.mkdir(exist_ok=True)
    (checks / "test.sh").write_text("grep -qx 42 /workspace/answer.txt\n")
    module = f"policy_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(policy))
    return write_spec(
        tmp_path,
        name="container-sessions",
        dataset={"path": "data.jsonl", "id": "id"},
        target={
            "kind": "container",
            "image": image,
            "agent": {"adapter": "claude-code", "model": "claude-sonnet-4-20250514"},
            "checks": "checks",
            "output": "report",
            "deadlines": {"agent": 6},
        },
        scorers=[{"kind": "code_exec", "checks": ["sh /assay/checks/test.sh"]}],
        policy=f"{module}:policy",
        attempts=attempts,
        fail_on_item_error_rate=1,
    )


def _run(spec: Path, store: Path) -> tuple[str, Store]:
    from assay.flows.run import run_eval  # Prefect: imported by the test that needs it, not at collection
    from assay.orchestrate.run import RunRequest

    summary = asyncio.run(run_eval.fn(RunRequest(spec=str(spec), store=str(store))))
    return summary["run_id"], Store(store)


def _stored(store: Path) -> bytes:
    out = []
    for path in sorted(store.rglob("*")):
        out.append(path.relative_to(store).as_posix().encode())
        if path.suffix == ".parquet":
            out.append(json.dumps(pl.read_parquet(path).to_dicts(), default=str).encode())
        elif path.is_file():
            out.append(path.read_bytes())
    return b"\n".join(out)


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_policy_drives_the_agent_in_its_live_container_and_checks_between_prompts(
    tmp_path: Path, fake_claude: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("BOX_LOG", str(tmp_path / "box.jsonl"))
    run_id, store = _run(_spec(tmp_path, fake_claude, _repair(needed=1)), tmp_path / "store")
    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert json.loads(row["output"]) == "42"
    (score,) = store.run_scores(run_id).to_dicts()
    assert score["score"] == 1.0, score["error"]  # the checks saw the repaired workspace
    # Both prompts ran in one container: the second continued the conversation the first began.
    turns = store.run_turns(run_id).sort("index").to_dicts()
    assert [(t["method"], t["outcome"]) for t in turns] == [("start", "completed"), ("resume", "completed")]
    assert json.loads(turns[1]["prompt"]) == "working check failed: repair the missing branch"
    assert len({t["session_id"] for t in turns}) == 1
    folder = store.artifacts_dir(run_id, "a", 0) / "attempt-1"
    argv = (folder / "workspace" / "argv.txt").read_text().splitlines()
    assert "--continue" not in argv[0] and "--continue" in argv[1]
    assert {"transcript-0.txt", "transcript-1.txt", "stderr-0.txt", "stderr-1.txt"} <= {
        p.name for p in folder.iterdir()
    }
    # The agent's own figures over both prompts, kept apart from measured ones.
    assert row["caller_cost_usd"] == pytest.approx(0.04)
    assert json.loads(row["caller_reserved"]) == {"tokens": {"input": 22, "output": 6}}
    # box.exec ran between the prompts, as the agent's user, without the agent's secrets, and
    # no longer than the agent stage's deadline.
    (box,) = _log(tmp_path / "box.jsonl")
    assert box["first"] == "WRONG" and box["exit"] == 0
    assert box["stdout"].splitlines() == ["WRONG", "1000", "none", "gone"]
    timed_out, exit_code, duration_ms = box["hung"]
    assert timed_out and exit_code is None and 5500 <= duration_ms < 20000
    assert SECRET.encode() not in _stored(tmp_path / "store")
    # Both prompts' steps, kept with the attempt, export as one ATIF trajectory.
    capsys.readouterr()
    assert main(["trajectories", "export", run_id, "--store", str(tmp_path / "store")]) == 0
    (atif,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert read_atif(atif)[1] == "valid"
    assert atif["agent"] == {
        "name": "claude-code", "version": "1.0.99-fake (Claude Code)", "model_name": "claude-sonnet-4-20250514"
    }  # fmt: skip
    assert [s["message"] for s in atif["steps"]] == ["did: WRONG", "did: 42"]
    assert not [c for c in engine().containers.list(all=True) if c.labels.get("assay.run_id") == run_id]


def test_each_attempt_gets_a_fresh_container(
    tmp_path: Path, fake_claude: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("BOX_LOG", str(tmp_path / "box.jsonl"))
    run_id, store = _run(_spec(tmp_path, fake_claude, _repair(needed=2), attempts=3), tmp_path / "store")
    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert (row["attempt"], row["attempts_made"]) == (2, 2)
    turns = store.run_turns(run_id).sort("attempt", "index").to_dicts()
    assert [(t["attempt"], t["index"], t["method"]) for t in turns] == [
        (1, 0, "start"),
        (1, 1, "resume"),
        (2, 0, "start"),
        (2, 1, "resume"),
    ]
    assert [t["attempt_passed"] for t in turns] == [False, False, True, True]
    # The second attempt started over: its first answer is WRONG again, and the fake agent (which
    # refuses a second conversation in one container) started without complaint.
    assert [b["first"] for b in _log(tmp_path / "box.jsonl")] == ["WRONG", "WRONG"]
    root = store.artifacts_dir(run_id, "a", 0)
    assert sorted(p.name for p in root.iterdir()) == ["attempt-1", "attempt-2"]
    assert (root / "attempt-1" / "workspace" / "answer.txt").read_text() == "WRONG\n"
    assert (root / "attempt-2" / "workspace" / "answer.txt").read_text() == "42\n"
    assert row["caller_cost_usd"] == pytest.approx(0.08)


MID_PROMPT = """
import json, os

async def policy(session):
    pending = session.start(session.prompt)
    try:
        await session.box.exec(["cat", "answer.txt"])
    except Exception as exc:
        with open(os.environ["BOX_LOG"], "a") as log:
            log.write(json.dumps({"refused": type(exc).__name__, "why": str(exc)}) + "\\n")
    await pending
"""


def test_box_exec_is_refused_while_a_prompt_is_in_flight(
    tmp_path: Path, fake_claude: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("BOX_LOG", str(tmp_path / "box.jsonl"))
    run_id, store = _run(_spec(tmp_path, fake_claude, MID_PROMPT), tmp_path / "store")
    (row,) = store.run_items(run_id).to_dicts()
    # Even caught by the policy, the misuse fails the attempt: its prompt raced a check.
    assert (row["outcome"], row["failure_kind"]) == ("failed", "protocol")
    assert "sequential" in row["error"]
    (refused,) = _log(tmp_path / "box.jsonl")
    assert refused["refused"] == "SessionError" and "sequential" in refused["why"]
    assert not [c for c in engine().containers.list(all=True) if c.labels.get("assay.run_id") == run_id]
