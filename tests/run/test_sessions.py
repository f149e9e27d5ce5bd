"""Managed sessions and attempts, for real: policies driving the mock OpenAI server and the
reference harness over HTTP, the `turns` dataset, and resume."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.cli import main
from assay.errors import SessionError, TargetFailure
from assay.outcomes import RowKind
from assay.run.sessions import Session, drive
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets import SessionState, TargetResult
from assay.testing.harness import DEFAULT_CAPABILITIES, HarnessServer
from tests.conftest import (
    arithmetic_rows,
    mock_target,
    only_run_id,
    run_assay,
    start_run_until_committed,
    write_jsonl,
    write_spec,
)
from tests.helpers.cli import assay_run

SCORERS = [{"kind": "exact_match", "name": "exact"}]


def write_policy(folder: Path, source: str, name: str = "policy") -> str:
    """A policy module in `folder` under a fresh name (modules are cached per process)."""
    module = f"policy_{uuid.uuid4().hex[:10]}"
    (folder / f"{module}.py").write_text("import asyncio\n\n" + textwrap.dedent(source))
    return f"{module}:{name}"


def module_of(ref: str) -> Any:
    return sys.modules[ref.split(":")[0]]


def session_spec(folder: Path, target: dict[str, Any], n: int = 1, **overrides: Any) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    spec: dict[str, Any] = {
        "name": "sessions",
        "dataset": {"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        "target": target,
        "scorers": SCORERS,
        "concurrency": 4,
        "fail_on_item_error_rate": 1,
    }
    spec.update(overrides)
    return write_spec(folder, **spec)


THREE_PROMPTS = """
async def policy(session):
    await session.start(session.prompt)
    await session.resume("Are you sure?")
    await session.resume("Final answer?")
"""


def test_a_policy_continues_one_conversation_with_an_openai_target(tmp_path, mock, capsys):
    mock.configure(answers={"Are you sure?": "yes", "Final answer?": "4"})
    policy = write_policy(tmp_path, THREE_PROMPTS)
    target = mock_target(mock.base_url, system="Be brief.")
    spec = session_spec(tmp_path, target, n=3, policy=policy)
    summary, store = assay_run(capsys, spec, tmp_path / "s")

    bodies = [b for b in mock.stats()["bodies"] if b["messages"][1]["content"] == "What is 2 + 2?"]
    assert [b["messages"] for b in bodies][-1] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "What is 2 + 2?"},
        {"role": "user", "content": "Are you sure?"},
        {"role": "assistant", "content": "yes"},
        {"role": "user", "content": "Final answer?"},
    ]
    assert [len(b["messages"]) for b in bodies] == [2, 4, 6], "each prompt carries the conversation so far"

    items = store.run_items(summary["run_id"]).sort("item_index")
    turns = store.run_turns(summary["run_id"]).sort("item_index", "index")
    assert items["output_text"].to_list() == ["4", "4", "4"]
    assert items["attempt"].to_list() == [1, 1, 1] and items["attempts_made"].to_list() == [1, 1, 1]
    assert turns.height == 9
    first = turns.filter(pl.col("item_id") == "q2")
    assert first["method"].to_list() == ["start", "resume", "resume"]
    assert first["index"].to_list() == [0, 1, 2]
    assert [json.loads(p) for p in first["prompt"]] == ["What is 2 + 2?", "Are you sure?", "Final answer?"]
    assert first["outcome"].to_list() == ["completed"] * 3 and first["tokens_known"].all()
    assert first["session_id"].n_unique() == 1 and first["best"].all()
    # Usage is summed across the session's prompts (the mock counts every message's words).
    q2 = items.filter(pl.col("item_id") == "q2").row(0, named=True)
    assert q2["tokens_input"] == first["tokens_input"].sum() == 7 + 15 + 18
    assert q2["tokens_output"] == first["tokens_output"].sum() == 5 + 1 + 1
    assert q2["operations"] == 3 and q2["cost_completeness"] == "incomplete"  # mock-1 is unpriced
    assert store.read_run(summary["run_id"])["policy"] == policy
    assert summary["items"]["completed"] == 3


def test_a_plain_run_writes_no_turns(tmp_path, mock, capsys):
    spec = session_spec(tmp_path, mock_target(mock.base_url), n=2)
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    assert store.run_turns(summary["run_id"]).height == 0
    assert not (tmp_path / "s" / "turns").exists()
    assert store.run_items(summary["run_id"])["attempt"].null_count() == 2
    assert mock.stats()["requests"] == 2


def test_an_http_agent_session_continues_on_the_harness(tmp_path, capsys):
    policy = write_policy(
        tmp_path,
        """
        async def policy(session):
            await session.start(session.prompt)
            await session.resume("now check it")
            return await session.resume("final")
        """,
    )
    with HarnessServer() as harness:
        harness.configure(behaviors={"*": {"answer_history": True}})
        target = {"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01}
        spec = session_spec(tmp_path, target, n=2, policy=policy)
        summary, store = assay_run(capsys, spec, tmp_path / "s")
        stats = harness.stats()

    items = store.run_items(summary["run_id"]).sort("item_index")
    assert items["output_text"].to_list() == [
        "What is 0 + 0? > now check it > final",
        "What is 1 + 1? > now check it > final",
    ]
    turns = store.run_turns(summary["run_id"])
    sessions = dict(zip(turns["session_id"], turns["item_id"], strict=True))
    assert len(sessions) == 2 and set(stats["sessions"]) == set(sessions)
    for session_id, inputs in stats["sessions"].items():
        assert inputs[1:] == ["now check it", "final"] and sessions[session_id] in ("q0", "q1")
    assert {b["session_id"] for b in stats["bodies"]} == set(sessions)
    # An agent's tokens are not measured: not known, and the item's token columns are null.
    assert not turns["tokens_known"].any() and items["tokens_input"].null_count() == 2


def test_a_harness_without_sessions_can_start_but_not_resume(tmp_path, capsys):
    policy = write_policy(tmp_path, THREE_PROMPTS)
    with HarnessServer() as harness:
        caps = {**DEFAULT_CAPABILITIES, "accepts": {**DEFAULT_CAPABILITIES["accepts"], "sessions": False}}
        harness.configure(capabilities=caps)
        target = {"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01}
        summary, store = assay_run(capsys, session_spec(tmp_path, target, policy=policy), tmp_path / "s")
        assert "session_id" not in harness.stats()["bodies"][0]
    item = store.run_items(summary["run_id"]).row(0, named=True)
    assert item["outcome"] == "failed" and item["failure_kind"] == "protocol"
    assert "does not accept sessions" in item["error"]
    assert store.run_turns(summary["run_id"])["outcome"].to_list() == ["completed", "failed"]


def test_overlapping_calls_fail_the_attempt(tmp_path, mock, capsys):
    policy = write_policy(
        tmp_path,
        """
        SEEN = []

        async def policy(session):
            first = session.start(session.prompt)
            try:
                session.resume("too soon")
            except Exception as exc:  # caught, and still the attempt fails
                SEEN.append(str(exc))
            await first
        """,
    )
    summary, store = assay_run(
        capsys, session_spec(tmp_path, mock_target(mock.base_url), policy=policy), tmp_path / "s"
    )
    assert "requires sequential start/resume calls" in module_of(policy).SEEN[0]
    item = store.run_items(summary["run_id"]).row(0, named=True)
    assert item["outcome"] == "failed" and item["failure_kind"] == "protocol"
    assert "requires sequential start/resume calls" in item["error"]
    assert store.run_turns(summary["run_id"])["method"].to_list() == ["start"]
    assert mock.stats()["requests"] == 1


def test_a_call_after_the_policy_returned_is_refused_as_settled(tmp_path, mock, capsys):
    policy = write_policy(
        tmp_path,
        """
        KEPT = []

        async def policy(session):
            KEPT.append(session)
            session.start(session.prompt)  # not awaited: the session awaits it before settling
        """,
    )
    summary, store = assay_run(
        capsys, session_spec(tmp_path, mock_target(mock.base_url), policy=policy), tmp_path / "s"
    )
    item = store.run_items(summary["run_id"]).row(0, named=True)
    assert item["outcome"] == "completed" and item["output_text"] == "What is 0 + 0?"
    with pytest.raises(SessionError, match="settled"):
        module_of(policy).KEPT[0].resume("too late")
    assert mock.stats()["requests"] == 1


def test_cancellation_stops_the_policy_sets_its_signal_and_cancels_the_prompt_in_flight(
    tmp_path, mock, capsys
):
    mock.configure(faults=[{"delay_ms": 5000, "match": "slow", "times": -1}])
    policy = write_policy(
        tmp_path,
        """
        SEEN = []

        async def policy(session):
            async def watch():
                await session.cancelled.wait()
                SEEN.append(session.item.item_id)

            watcher = asyncio.ensure_future(watch())
            await session.start(session.prompt)
            await session.resume("slow, please")
        """,
    )
    spec = session_spec(tmp_path, mock_target(mock.base_url), policy=policy, item_timeout=0.5)
    started = time.monotonic()
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    assert time.monotonic() - started < 4
    item = store.run_items(summary["run_id"]).row(0, named=True)
    assert item["outcome"] == "failed" and item["failure_kind"] == "timeout"
    assert module_of(policy).SEEN == ["q0"]
    turns = store.run_turns(summary["run_id"]).sort("index")
    assert turns["outcome"].to_list() == ["completed", "cancelled"]
    assert turns["tokens_known"].to_list() == [True, False]
    # As the seed: the counts that are known are kept, flagged as not the whole count.
    assert item["tokens_known"] is False
    assert item["tokens_input"] == turns["tokens_input"][0] > 0, "the first prompt's tokens are kept"


def test_a_broken_answer_marks_tokens_unknown(tmp_path, mock, capsys):
    # q0's second prompt breaks once and is retried; q1's breaks for good and the policy goes on.
    mock.configure(
        faults=[
            {"drop": True, "match": "again q0"},
            {"drop": True, "match": "again q1", "times": -1},
        ]
    )
    policy = write_policy(
        tmp_path,
        """
        async def policy(session):
            await session.start(session.prompt)
            try:
                await session.resume("again " + session.item.item_id)
            except Exception:
                return "gave up"
        """,
    )
    target = mock_target(mock.base_url, max_retries=1)
    summary, store = assay_run(capsys, session_spec(tmp_path, target, n=2, policy=policy), tmp_path / "s")
    items = {r["item_id"]: r for r in store.run_items(summary["run_id"]).iter_rows(named=True)}
    turns = store.run_turns(summary["run_id"]).sort("item_id", "index")
    by_item = {k: g for (k,), g in turns.group_by("item_id")}
    assert by_item["q0"]["outcome"].to_list() == ["completed", "completed"]
    assert by_item["q0"]["tokens_known"].to_list() == [True, False], "the broken first try may have billed"
    assert by_item["q1"]["outcome"].to_list() == ["completed", "failed"]
    assert by_item["q1"]["failure_kind"].to_list() == [None, "connection"]
    assert by_item["q1"]["tokens_known"].to_list() == [True, False]
    # q1's policy returned after its last prompt failed: as the seed, not ok, with that failure.
    assert items["q1"]["outcome"] == "failed" and items["q1"]["failure_kind"] == "connection"
    assert items["q0"]["outcome"] == "completed"
    for item_id, row in items.items():
        # The sums of every count a prompt reported (a lower bound), flagged as not the whole count.
        assert row["tokens_known"] is False
        assert row["tokens_input"] == by_item[item_id]["tokens_input"].sum() > 0
        assert row["tokens_output"] == by_item[item_id]["tokens_output"].sum() > 0
        assert json.loads(row["cost_reasons"])["unknown_outcome"] >= 1
    gauges = store.run_scores(summary["run_id"], kind=RowKind.GAUGE).filter(pl.col("item_id") == "q0")
    assert "gauge.tokens_input" not in gauges["scorer"].to_list(), "a lower bound is not a measurement"


ATTEMPT_TARGET = """
CALLS = {}

def solve(question, item_id, history):
    CALLS[item_id] = CALLS.get(item_id, 0) + 1
    if item_id == "q2" and CALLS[item_id] == 2:
        return "4"
    return "wrong"
"""


def test_attempts_stop_at_the_first_pass_and_keep_every_attempt(tmp_path, mock, capsys):
    target_ref = write_policy(tmp_path, ATTEMPT_TARGET, name="solve")
    spec = session_spec(tmp_path, {"kind": "python", "function": target_ref}, n=3, attempts=3)
    summary, store = assay_run(capsys, spec, tmp_path / "s")

    items = {r["item_id"]: r for r in store.run_items(summary["run_id"]).iter_rows(named=True)}
    assert module_of(target_ref).CALLS == {"q0": 3, "q1": 3, "q2": 2}
    assert (items["q2"]["attempt"], items["q2"]["attempts_made"], items["q2"]["output_text"]) == (2, 2, "4")
    assert (items["q0"]["attempt"], items["q0"]["attempts_made"]) == (1, 3), "no pass: the earliest best"
    scores = store.run_scores(summary["run_id"])
    assert scores.height == 3, "only the kept attempt's scores are in `scores`"
    assert scores.filter(pl.col("item_id") == "q2")["score"].to_list() == [1.0]
    # The item's duration gauge covers every attempt it took, like its items row.
    gauges = store.run_scores(summary["run_id"], kind=RowKind.GAUGE)
    q2 = gauges.filter((pl.col("item_id") == "q2") & (pl.col("scorer") == "gauge.duration_ms"))
    assert q2["value"].to_list() == [pytest.approx(items["q2"]["duration_ms"])]

    turns = store.run_turns(summary["run_id"]).filter(pl.col("item_id") == "q2").sort("attempt")
    assert turns["attempt"].to_list() == [1, 2] and turns["session_id"].n_unique() == 2
    assert turns["attempt_passed"].to_list() == [False, True]
    assert turns["best"].to_list() == [False, True]
    assert [json.loads(s) for s in turns["attempt_scores"]] == [{"exact": 0.0}, {"exact": 1.0}]
    assert store.run_turns(summary["run_id"]).height == 3 + 3 + 2


def test_a_python_target_receives_the_history(tmp_path, capsys):
    target_ref = write_policy(
        tmp_path,
        """
        def answer(prompt, history):
            return f"{prompt} after {len(history)}"
        """,
        name="answer",
    )
    policy = write_policy(tmp_path, THREE_PROMPTS)
    spec = session_spec(tmp_path, {"kind": "python", "function": target_ref}, policy=policy)
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    turns = store.run_turns(summary["run_id"]).sort("index")
    assert [json.loads(o) for o in turns["output"]] == [
        "What is 0 + 0? after 0",
        "Are you sure? after 2",
        "Final answer? after 4",
    ]


def test_spec_checks_policy_and_attempts(tmp_path, mock, capsys):
    target = mock_target(mock.base_url)
    sync = write_policy(tmp_path, "def policy(session):\n    return None\n")
    cases = [
        ({"policy": "no_such_module_q:policy"}, "policy: cannot import 'no_such_module_q:policy'"),
        ({"policy": sync}, "must be an async function"),
        ({"policy": "not a reference"}, "policy: expected 'module:function'"),
        ({"attempts": 0}, "attempts: Input should be greater than or equal to 1"),
    ]
    for overrides, message in cases:
        spec = session_spec(tmp_path, target, **overrides)
        assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_resume_refuses_a_changed_policy_or_attempts(tmp_path, mock, capsys):
    first = write_policy(tmp_path, THREE_PROMPTS)
    second = write_policy(tmp_path, THREE_PROMPTS)
    spec = session_spec(tmp_path, mock_target(mock.base_url), policy=first, attempts=2)
    summary, _ = assay_run(capsys, spec, tmp_path / "s")
    session_spec(tmp_path, mock_target(mock.base_url), policy=second, attempts=3)
    assert main(["resume", summary["run_id"], "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert f"policy ({first} -> {second})" in err and "attempts (2 -> 3)" in err


@pytest.mark.slow
def test_turns_are_committed_with_their_items_and_orphans_removed_on_resume(tmp_path, mock):
    mock.configure(latency_ms=20)
    n = 300
    policy = write_policy(tmp_path, THREE_PROMPTS)
    spec = session_spec(tmp_path, mock_target(mock.base_url), n=n, policy=policy)
    store_path = tmp_path / "s"
    process = start_run_until_committed(spec, store_path)
    time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store_path)
    store = Store(store_path)
    done = len(store.done_keys(run_id))
    assert 0 < done < n
    # What a process killed between a batch's turns part and its items part leaves behind.
    orphan = store_path / "turns" / f"run_id={run_id}" / "part-99999-orphan.parquet"
    committed = next((store_path / "turns" / f"run_id={run_id}").glob("part-*.parquet"))
    orphan.write_bytes(committed.read_bytes())
    assert store.run_turns(run_id).height == 3 * done, "readers ignore an uncommitted turns part"
    mock.reset()

    result = run_assay("resume", run_id, "--store", str(store_path), "--json")
    assert result.returncode == 0, result.stderr
    assert not orphan.exists()
    assert mock.stats()["requests"] == 3 * (n - done)
    turns = store.turns().filter(pl.col("run_id") == run_id).collect()
    assert turns.height == 3 * n
    assert turns.group_by("item_id", "index").len()["len"].max() == 1
    store.delete_run(run_id)
    assert not (store_path / "turns" / f"run_id={run_id}").exists()


# -- the session on its own --------------------------------------------------------------------


class _Echo:
    """A session target answering every prompt after `delay` seconds."""

    instrumented = False

    def __init__(self, delay: float = 0.0, fail: str | None = None) -> None:
        self.delay = delay
        self.fail = fail
        self.seen: list[tuple[Any, int]] = []

    def item_prompt(self, item: Item) -> Any:
        return item.input

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        self.seen.append((prompt, len(session.history)))
        await asyncio.sleep(self.delay)
        if prompt == self.fail:
            raise TargetFailure("refused", kind="http", provider="echo")
        return TargetResult(output=f"echo {prompt}")


ITEM = Item(item_id="a", item_index=0, input="hello", expected=None, annotations={}, fields={})


def test_session_order_rules():
    async def scenario() -> None:
        session = Session(_Echo(), ITEM, 0)
        with pytest.raises(SessionError, match="resume before start"):
            session.resume("x")
        assert await session.start("one") == "echo one"
        with pytest.raises(SessionError, match="already started"):
            session.start("again")
        assert await session.resume("two") == "echo two"
        assert [m["role"] for m in session.history] == ["user", "assistant"] * 2

    asyncio.run(scenario())


def test_a_failed_prompt_the_policy_catches_does_not_fail_the_attempt():
    async def policy(session: Session) -> None:
        await session.start(session.prompt)
        try:
            await session.resume("bad")
        except TargetFailure:
            pass
        await session.resume("good")

    async def scenario() -> TargetResult:
        target = _Echo(fail="bad")
        result = await drive(Session(target, ITEM, 0), policy)
        assert target.seen == [("hello", 0), ("bad", 2), ("good", 2)], "a failed prompt is not history"
        return result

    assert asyncio.run(scenario()).output == "echo good"


def test_a_policy_that_sends_nothing_or_raises_fails_the_attempt():
    async def nothing(session: Session) -> None:
        return None

    async def raises(session: Session) -> None:
        session.start(session.prompt)
        raise ValueError("boom")

    async def scenario() -> None:
        with pytest.raises(TargetFailure, match="returned without a completed prompt"):
            await drive(Session(_Echo(), ITEM, 0), nothing)

        async def answers_itself(session: Session) -> str:
            return "made up"

        with pytest.raises(TargetFailure, match="returned without a completed prompt"):
            await drive(Session(_Echo(), ITEM, 0), answers_itself)

        async def gives_up(session: Session) -> str:
            await session.start(session.prompt)
            try:
                await session.resume("bad")
            except TargetFailure:
                return "gave up"
            return "unreachable"

        with pytest.raises(TargetFailure, match="refused") as failed:
            await drive(Session(_Echo(fail="bad"), ITEM, 0), gives_up)
        assert failed.value.provider == "echo", "the last prompt's own failure"
        session = Session(_Echo(delay=5), ITEM, 0)
        with pytest.raises(TargetFailure, match="the policy raised ValueError: boom") as failed:
            await drive(session, raises)
        assert failed.value.kind == "exception"
        assert [t.outcome for t in session.turns] == ["cancelled"], "the prompt in flight is cancelled"

    asyncio.run(scenario())


def test_the_budget_stops_a_session_between_its_prompts(tmp_path, mock, capsys):
    policy = write_policy(tmp_path, THREE_PROMPTS)
    spec = session_spec(
        tmp_path,
        mock_target(mock.base_url),
        n=3,
        policy=policy,
        concurrency=1,
        budget="$0.000001",
        prices={"mock-1": {"input": 10.0, "output": 30.0}},
    )
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    items = store.run_items(summary["run_id"]).sort("item_index")
    # The first prompt's cost closes the budget: the session's next prompt is refused before it is
    # sent, and no later item starts.
    assert items["outcome"].to_list() == ["budget_interrupted", "budget_skipped", "budget_skipped"]
    assert items["started_at"].is_null().to_list() == [False, True, True], "skipped items never started"
    assert mock.stats()["requests"] == 1
    turns = store.run_turns(summary["run_id"]).filter(pl.col("item_id") == "q0").sort("index")
    assert turns.select("method", "outcome").rows() == [
        ("start", "completed"),
        ("resume", "budget_interrupted"),
    ]
    assert store.read_run(summary["run_id"])["budget_status"] == "closed"
