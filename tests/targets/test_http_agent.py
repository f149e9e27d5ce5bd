"""The `http_agent` target against the reference harness (tests/harness_server.py), over real HTTP."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import jsonschema
import polars as pl
import pytest
import yaml

from assay.cli import main
from assay.errors import DatasetError, HarnessError, SpecError, TargetFailure
from assay.spec import HttpAgentTarget, parse_spec
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets import HttpAgent, TargetResult, open_target, prepare_http_agent
from assay.targets.http_agent import STATUSES, is_safe_path, validate_trajectory
from assay.testing.harness import DEFAULT_CAPABILITIES, HarnessServer
from tests.conftest import REPO, write_jsonl, write_spec

T = TypeVar("T")

QUESTION_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["question"],
    "properties": {"question": {"type": "string"}, "level": {"type": "integer"}},
}


def caps(**sections: Any) -> dict[str, Any]:
    """The default capabilities with some sections' keys replaced."""
    doc = json.loads(json.dumps(DEFAULT_CAPABILITIES))
    for section, values in sections.items():
        if isinstance(values, dict) and isinstance(doc.get(section), dict):
            doc[section].update(values)
        else:
            doc[section] = values
    return doc


def item(item_id: str, value: Any = "hello", **fields: Any) -> Item:
    return Item(item_id=item_id, item_index=0, input=value, expected=None, fields={"input": value, **fields})


def agent_for(harness: HarnessServer, *, snapshot: dict[str, Any] | None = None, **spec: Any) -> HttpAgent:
    target = HttpAgentTarget(kind="http_agent", base_url=harness.base_url, poll_interval=0.01, **spec)
    return HttpAgent(target, concurrency=8, run_id="run-assay-1", capabilities=snapshot)


def using(harness: HarnessServer, work: Callable[[HttpAgent], Awaitable[T]], **options: Any) -> T:
    async def go() -> T:
        agent = agent_for(harness, **options)
        try:
            return await work(agent)
        finally:
            await agent.aclose()

    return asyncio.run(go())


async def outcome(agent: HttpAgent, one: Item, trial: int = 0) -> TargetResult | TargetFailure:
    try:
        return await agent(one, trial)
    except TargetFailure as failure:
        return failure


def call(harness: HarnessServer, *items: Item, **options: Any) -> list[TargetResult | TargetFailure]:
    """Each item through one agent, in turn; failures returned rather than raised."""

    async def work(agent: HttpAgent) -> list[TargetResult | TargetFailure]:
        return [await outcome(agent, one) for one in items]

    return using(harness, work, **options)


def one_result(harness: HarnessServer, one: Item | None = None, **options: Any) -> TargetResult:
    (result,) = call(harness, one or item("q1"), **options)
    assert isinstance(result, TargetResult), getattr(result, "message", result)
    return result


def one_failure(harness: HarnessServer, one: Item | None = None, **options: Any) -> TargetFailure:
    (result,) = call(harness, one or item("q1"), **options)
    assert isinstance(result, TargetFailure), result
    return result


def prepare(harness: HarnessServer, items: list[Item], **options: Any) -> dict[str, Any]:
    return using(harness, lambda agent: agent.prepare(items), **options)


# -- the spec ----------------------------------------------------------------------------------


def minimal(**target: Any) -> dict[str, Any]:
    return {
        "name": "agent",
        "dataset": {"path": "d.jsonl"},
        "target": {"kind": "http_agent", "base_url": "http://127.0.0.1:9", **target},
        "scorers": [{"kind": "exact_match"}],
    }


def test_spec_defaults_and_checks():
    spec = parse_spec(minimal())
    assert isinstance(spec.target, HttpAgentTarget)
    assert spec.target.poll_interval == 0.2 and spec.target.timeout == 600.0
    assert spec.target.model is None and spec.target.max_retries == 4
    with pytest.raises(SpecError) as bad:
        parse_spec(minimal(base_url="127.0.0.1:9", poll_intervall=1, timeout=0))
    problems = bad.value.problems
    assert any(p.startswith("target.base_url: must start with http://") for p in problems)
    assert any("target.poll_intervall: unknown field" in p and "poll_interval" in p for p in problems)
    assert any(p.startswith("target.timeout:") for p in problems)
    with pytest.raises(SpecError) as unknown:
        parse_spec(minimal(kind="nope"))
    assert "http_agent" in unknown.value.problems[0]


def test_open_target_builds_an_uninstrumented_http_agent(harness):
    target = HttpAgentTarget(kind="http_agent", base_url=harness.base_url)
    built = open_target(target, concurrency=2, seed=0, spec_dir=None, run_id="r1")
    assert isinstance(built, HttpAgent) and built.instrumented is False
    asyncio.run(built.aclose())


# -- capabilities and prepare ------------------------------------------------------------------


def test_prepare_fetches_capabilities_once_and_returns_the_snapshot(harness):
    async def work(agent: HttpAgent) -> tuple[dict[str, Any], dict[str, Any]]:
        first = await agent.prepare([item("q1")])
        again = await agent.prepare([item("q1")])
        await agent(item("q1"), 0)
        return first, again

    first, again = using(harness, work)
    assert harness.stats()["requests"]["capabilities"] == 1, "fetched once, then the snapshot"
    assert first["capabilities"]["accepts"] == {
        "file_input": True,
        "file_urls": True,
        "model_override": True,
        "cancel": True,
        "sessions": True,
    }
    assert first["capabilities"]["limits"] == {"max_concurrent_runs": 16}
    assert first["dropped_items"] == [] and first["warnings"] == []
    assert first["base_url"] == harness.base_url and first["protocol"] == "assay-harness/1"
    assert again["fetched_at"] == first["fetched_at"]
    json.dumps(first)  # the run stores it as JSON


def test_a_stored_snapshot_is_used_without_asking_the_harness(harness):
    harness.configure(capabilities=caps(accepts={"model_override": False}))
    snapshot = prepare(harness, [item("q1")], model="big-1")
    harness.reset()  # the harness now accepts a model override; the run keeps its snapshot
    resumed = prepare(harness, [item("q1")], model="big-1", snapshot=snapshot)
    assert harness.stats()["requests"].get("capabilities") is None
    assert resumed == snapshot
    result = one_result(harness, model="big-1", snapshot=snapshot)
    stats = harness.stats()
    assert "model" not in stats["bodies"][0] and stats["requests"].get("capabilities") is None
    assert result.caller_metadata["warnings"] == snapshot["warnings"]


def test_a_bare_capabilities_document_is_accepted_as_a_snapshot(harness):
    snapshot = prepare(harness, [item("q1")], snapshot=caps(accepts={"file_input": False}))
    assert harness.stats()["requests"].get("capabilities") is None
    assert snapshot["capabilities"]["accepts"]["file_input"] is False


def test_every_input_failing_the_schema_is_listed_at_once(harness):
    harness.configure(capabilities=caps(input_schema=QUESTION_SCHEMA))
    items = [
        item("good", {"question": "2+2?"}),
        item("text", "just text"),
        item("missing", {"level": 1}),
        item("typed", {"question": "x", "level": "high"}),
    ]
    with pytest.raises(DatasetError) as bad:
        prepare(harness, items)
    problems = bad.value.problems
    assert len(problems) == 3
    assert problems[0].startswith("item 'text': input: 'just text' is not of type 'object'")
    assert problems[1].startswith("item 'missing': input: 'question' is a required property")
    assert problems[2].startswith("item 'typed': input['level']: 'high' is not of type 'integer'")
    assert all("input_schema" in p for p in problems)
    assert prepare(harness, items[:1])["dropped_items"] == []


def test_items_with_files_are_dropped_when_the_harness_takes_none(harness):
    harness.configure(capabilities=caps(accepts={"file_input": False, "file_urls": False}))
    files = [{"path": "data/a.csv", "url": "https://files.example/a.csv"}]
    snapshot = prepare(harness, [item("plain"), item("with", files=files), item("empty", files=[])])
    assert snapshot["dropped_items"] == [
        {"item_id": "with", "reason": "the harness accepts no fixture files"}
    ]
    with pytest.raises(DatasetError, match="nothing to run: every item has fixture files"):
        prepare(harness, [item("with", files=files)])
    # Called anyway (the caller did not skip it), the item fails rather than run without its files.
    failure = one_failure(harness, item("with", files=files))
    assert failure.kind == "protocol" and "accepts no fixture files" in failure.message
    assert harness.stats()["requests"].get("create") is None


def test_files_given_as_urls_are_dropped_when_the_harness_takes_uploads_only(harness):
    harness.configure(capabilities=caps(accepts={"file_input": True, "file_urls": False}))
    files = [{"path": "a.txt", "url": "https://files.example/a.txt"}]
    snapshot = prepare(harness, [item("plain"), item("with", files=files)])
    assert snapshot["dropped_items"][0]["item_id"] == "with"
    assert "only as uploads" in snapshot["dropped_items"][0]["reason"]


def test_files_are_sent_as_urls_when_accepted(harness):
    files = [{"path": "data/a.csv", "url": "https://files.example/a.csv"}]
    csv_cell = json.dumps(files)  # a CSV dataset holds the list as JSON text
    call(harness, item("q1", files=files), item("q2", files=csv_cell))
    bodies = harness.stats()["bodies"]
    assert bodies[0]["files"] == files and bodies[1]["files"] == files


def test_malformed_files_fields_are_dataset_errors(harness):
    items = [
        item("abs", files=[{"path": "/etc/passwd", "url": "https://x/a"}]),
        item("dots", files=[{"path": "a/../../b", "url": "https://x/a"}]),
        item("url", files=[{"path": "a", "url": "file:///etc/passwd"}]),
        item("shape", files={"path": "a"}),
        item("text", files="a.csv"),
    ]
    with pytest.raises(DatasetError) as bad:
        prepare(harness, items)
    assert [p.split(":")[0] for p in bad.value.problems] == [
        "item 'abs'",
        "item 'dots'",
        "item 'url'",
        "item 'shape'",
        "item 'text'",
    ]


def test_a_model_override_the_harness_refuses_is_a_warning_and_never_sent(harness):
    harness.configure(capabilities=caps(accepts={"model_override": False}))
    snapshot = prepare(harness, [item("q1")], model="big-1")
    assert len(snapshot["warnings"]) == 1 and "'big-1' is not sent" in snapshot["warnings"][0]
    result = one_result(harness, model="big-1")
    assert "model" not in harness.stats()["bodies"][-1]
    assert result.model is None and "'big-1' is not sent" in result.caller_metadata["warnings"][0]


def test_a_model_override_is_sent_when_accepted(harness):
    harness.configure(behaviors={"*": {"model": "big-1-2025"}})
    assert prepare(harness, [item("q1")], model="big-1")["warnings"] == []
    result = one_result(harness, model="big-1")
    assert harness.stats()["bodies"][-1]["model"] == "big-1"
    assert result.model == "big-1-2025", "the model the harness says it ran"


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"capabilities_raw": "{oops"}, "GET /capabilities: the reply is not JSON"),
        ({"capabilities_raw": "[1, 2]"}, "GET /capabilities: expected a JSON object, got list"),
        ({"capabilities": caps(accepts={"file_input": "yes"})}, "accepts.file_input: Input should be"),
        ({"capabilities": caps(limits={"max_concurrent_runs": 0})}, "limits.max_concurrent_runs"),
        ({"capabilities": caps(input_schema={"type": 12})}, "input_schema is not a valid JSON Schema"),
        ({"faults": [{"route": "capabilities", "status": 403}]}, "GET /capabilities: HTTP 403"),
    ],
)
def test_bad_capabilities_stop_prepare(harness, setting, expected):
    harness.configure(**setting)
    with pytest.raises(HarnessError) as bad:
        prepare(harness, [item("q1")])
    assert expected in str(bad.value)


def test_capabilities_are_fetched_once_even_by_concurrent_first_calls(harness):
    async def work(agent: HttpAgent) -> list[Any]:
        return await asyncio.gather(*(outcome(agent, item(f"q{n}")) for n in range(6)))

    results = using(harness, work)
    assert all(isinstance(r, TargetResult) for r in results)
    assert harness.stats()["requests"]["capabilities"] == 1


def test_an_input_the_schema_refuses_fails_the_item_when_prepare_was_not_called(harness):
    harness.configure(capabilities=caps(input_schema=QUESTION_SCHEMA))
    failure = one_failure(harness, item("q1", {"level": 2}))
    assert failure.kind == "protocol" and "'question' is a required property" in failure.message
    assert harness.stats()["requests"].get("create") is None


# -- one run -----------------------------------------------------------------------------------


def test_a_completed_run_answers_with_its_trajectory_figures(harness, monkeypatch):
    monkeypatch.setenv("ASSAY_HARNESS_KEY", "hk-secret")
    harness.configure(api_key="hk-secret", behaviors={"*": {"steps": 3, "step_cost": 0.02}})
    result = one_result(harness, item("q1", "What is 2+2?"), api_key_env="ASSAY_HARNESS_KEY")
    assert result.output == "What is 2+2?"
    assert result.caller_cost == pytest.approx(0.06)
    meta = result.caller_metadata
    assert meta["harness_run_id"].startswith("run-") and meta["status"] == "completed"
    assert meta["steps"] == 3 and meta["tool_calls"] == 3
    assert meta["trajectory_status"] == "valid" and meta["cost_complete"] is True
    assert result.caller_reserved == {"tokens": {"input": 30, "output": 15}}
    stats = harness.stats()
    assert stats["bodies"] == [
        {"input": "What is 2+2?", "metadata": {"run_id": "run-assay-1", "item_id": "q1", "trial": 0}}
    ]
    assert {h["authorization"] for h in stats["headers"]} == {"Bearer hk-secret"}
    create = next(h for h in stats["headers"] if h["route"] == "create")
    assert create["idempotency_key"]


def test_the_trial_and_structured_inputs_go_through(harness):
    async def work(agent: HttpAgent) -> TargetResult:
        return await agent(item("q1", {"question": "2+2?", "level": 1}), 3)

    using(harness, work)
    body = harness.stats()["bodies"][0]
    assert body["input"] == {"question": "2+2?", "level": 1} and body["metadata"]["trial"] == 3


def test_structured_output_when_there_is_no_answer(harness):
    harness.configure(behaviors={"*": {"answer": None, "output": {"total": 4}}})
    result = one_result(harness)
    assert result.output == {"total": 4} and "structured_output" not in result.caller_metadata


def test_the_answer_wins_and_the_structured_output_is_kept(harness):
    harness.configure(behaviors={"*": {"answer": "4", "output": {"total": 4}}})
    result = one_result(harness)
    assert result.output == "4" and result.caller_metadata["structured_output"] == {"total": 4}


def test_a_completed_run_without_answer_or_output_is_a_protocol_failure(harness):
    harness.configure(behaviors={"*": {"answer": None}})
    failure = one_failure(harness)
    assert failure.kind == "protocol" and "neither `answer` nor `output`" in failure.message


def test_a_slow_run_is_polled_until_it_ends(harness):
    harness.configure(behaviors={"*": {"delay": 0.15}})
    result = one_result(harness)
    assert result.output == "hello"
    assert harness.stats()["requests"]["status"] >= 3
    assert result.wire_ms >= 150


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [("failed", "exception", False), ("timeout", "timeout", True), ("cancelled", "exception", False)],
)
def test_a_run_that_ends_badly_fails_with_the_harness_error(harness, status, kind, retryable):
    harness.configure(behaviors={"*": {"status": status, "error": {"message": "tool crashed", "code": 7}}})
    failure = one_failure(harness)
    assert failure.kind == kind and failure.retryable is retryable
    assert f"ended {status}: tool crashed" in failure.message
    # Paid work may come before a failure: what the trajectory reports travels with it.
    assert failure.usage["cost_usd"] == pytest.approx(0.02)
    assert failure.usage["tokens"] == {"input": 20, "output": 10}
    assert failure.usage["trajectory_status"] == "valid"


def test_a_failure_without_an_error_says_so(harness):
    harness.configure(behaviors={"*": {"status": "failed"}})
    assert one_failure(harness).message.endswith("ended failed: no error given")


@pytest.mark.parametrize(
    ("behavior", "expected"),
    [
        ({"status": "finished"}, "unknown status 'finished'"),
        ({"bad_json": ["status"]}, "the reply is not JSON"),
        ({"bad_json": ["create"]}, "POST /runs: the reply is not JSON"),
        ({"create_reply": {"run": "r1"}}, "POST /runs: the reply has no run `id`"),
        ({"create_reply": {"id": 17}}, "POST /runs: unusable run id 17"),
        ({"create_reply": {"id": "../../capabilities"}}, "unusable run id '../../capabilities'"),
        ({"create_reply": {"id": ".."}}, "unusable run id '..'"),
    ],
)
def test_protocol_violations_fail_the_item(harness, behavior, expected):
    harness.configure(behaviors={"*": behavior})
    failure = one_failure(harness)
    assert failure.kind == "protocol" and expected in failure.message
    stats = harness.stats()
    # A run whose status cannot be read may still be going: it is cancelled.
    assert stats["cancelled"] == list(stats["runs"])


def test_an_unusual_run_id_is_escaped_in_urls(harness):
    harness.configure(behaviors={"*": {"run_id": "run #1?x=%2E"}})
    result = one_result(harness)
    assert result.caller_metadata["harness_run_id"] == "run #1?x=%2E"
    assert result.caller_metadata["trajectory_status"] == "valid"


def test_a_reused_run_id_fails_the_later_item(harness):
    harness.configure(behaviors={"*": {"run_id": "same"}})
    first, second = call(harness, item("q1"), item("q2"))
    assert isinstance(first, TargetResult) and first.caller_metadata["harness_run_id"] == "same"
    assert isinstance(second, TargetFailure) and second.kind == "protocol"
    assert second.message == "harness reused run id same (already returned for item 'q1' trial 0)"
    stats = harness.stats()
    assert stats["requests"]["status"] == 1, "the reused run is not polled"
    assert stats["cancelled"] == [], "nor cancelled: it is another item's run"


def test_a_run_past_the_timeout_is_cancelled_and_fails(harness):
    harness.configure(behaviors={"*": {"never_finish": True}})
    failure = one_failure(harness, timeout=0.2)
    assert failure.kind == "timeout" and failure.retryable
    assert "did not finish within 0.2s (target.timeout); cancelled it" in failure.message
    stats = harness.stats()
    assert stats["cancelled"] == [failure.usage["harness_run_id"]]
    assert failure.usage["status"] == "running"


def test_no_cancel_is_sent_when_the_harness_does_not_accept_one(harness):
    harness.configure(capabilities=caps(accepts={"cancel": False}), behaviors={"*": {"never_finish": True}})
    failure = one_failure(harness, timeout=0.2)
    assert failure.kind == "timeout" and "cancelled it" not in failure.message
    assert harness.stats()["cancelled"] == [] and harness.stats()["requests"].get("cancel") is None


def test_a_cancelled_call_cancels_the_harness_run(harness):
    harness.configure(behaviors={"*": {"never_finish": True}})

    async def work(agent: HttpAgent) -> None:
        task = asyncio.ensure_future(agent(item("q1"), 0))
        while not harness.stats()["requests"].get("status"):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    using(harness, work)  # aclose waits for the cancel it sent
    stats = harness.stats()
    assert stats["cancelled"] == list(stats["runs"]) and len(stats["cancelled"]) == 1


# -- trajectories ------------------------------------------------------------------------------


def test_a_missing_trajectory_is_unavailable(harness):
    harness.configure(behaviors={"*": {"trajectory": "missing"}})
    result = one_result(harness)
    assert result.caller_metadata["trajectory_status"] == "unavailable"
    assert result.caller_cost is None and result.caller_metadata["steps"] == 0
    assert result.caller_metadata["cost_complete"] is False


def test_no_trajectory_is_asked_for_when_none_is_provided(harness):
    harness.configure(capabilities=caps(provides={"trajectory": False}))
    result = one_result(harness)
    assert result.caller_metadata["trajectory_status"] == "unavailable"
    assert harness.stats()["requests"].get("trajectory") is None


def test_an_invalid_trajectory(harness):
    harness.configure(behaviors={"*": {"trajectory": "invalid"}})
    result = one_result(harness)
    assert result.caller_metadata["trajectory_status"] == "invalid" and result.caller_cost is None
    harness.configure(behaviors={"*": {"bad_json": ["trajectory"]}})
    assert one_result(harness).caller_metadata["trajectory_status"] == "invalid"


def test_a_partial_trajectory_keeps_its_valid_steps(harness):
    harness.configure(behaviors={"*": {"trajectory": "partial", "steps": 2, "step_cost": 0.05}})
    meta = (result := one_result(harness)).caller_metadata
    assert meta["trajectory_status"] == "partial" and meta["steps"] == 2
    assert meta["trajectory_dropped_steps"] == 2 and meta["trajectory_problem"].startswith("steps.2: role")
    assert result.caller_cost == pytest.approx(0.10) and meta["cost_complete"] is False


def test_unpriced_steps_make_the_cost_incomplete(harness):
    steps = [{"role": "assistant", "cost_usd": 0.5}, {"role": "tool", "tool_calls": [{"name": "x"}]}]
    harness.configure(behaviors={"*": {"trajectory": steps}})
    result = one_result(harness)
    assert result.caller_cost == 0.5 and result.caller_metadata["cost_complete"] is False
    assert result.caller_reserved == {"tokens": {"input": None, "output": None}}


def test_trajectory_validation_rules():
    assert validate_trajectory({"steps": []}).status == "valid"
    assert validate_trajectory([{"role": "user"}]).status == "invalid"
    assert validate_trajectory({"steps": [{"content": "no role"}]}).status == "invalid"
    repeated = validate_trajectory({"steps": [{"role": "assistant", "id": "r", "cost_usd": 0.01}] * 3})
    assert repeated.cost == pytest.approx(0.03), "steps are never de-duplicated"
    bad_cost = validate_trajectory({"steps": [{"role": "a", "cost_usd": float("nan")}, {"role": "b"}]})
    assert bad_cost.status == "partial" and bad_cost.dropped_steps == 1


# -- artifacts ---------------------------------------------------------------------------------


def test_unsafe_artifact_paths_are_skipped_with_a_warning(harness):
    artifacts = [
        {"path": "out/report.md", "size": 12},
        {"path": "/etc/passwd", "size": 1},
        {"path": "../../secrets", "size": 1},
        {"path": "a\\..\\..\\b"},
        {"path": "C:/Windows/x"},
        {"size": 3},
        "notes.txt",
    ]
    harness.configure(behaviors={"*": {"artifacts": artifacts, "files": {"out/report.md": "# report"}}})

    async def work(agent: HttpAgent) -> tuple[TargetResult, bytes]:
        result = await agent(item("q1"), 0)
        harness_id = result.caller_metadata["harness_run_id"]
        with pytest.raises(ValueError, match="unsafe artifact path"):
            await agent.fetch_file(harness_id, "../../secrets")
        return result, await agent.fetch_file(harness_id, "out/report.md")

    result, content = using(harness, work)
    meta = result.caller_metadata
    assert meta["artifacts"] == [{"path": "out/report.md", "size": 12}]
    assert len(meta["warnings"]) == 6
    assert sum("unsafe path" in w for w in meta["warnings"]) == 4
    assert content == b"# report"
    assert harness.stats()["requests"]["files"] == 1, "nothing unsafe was fetched"


def test_safe_paths():
    assert is_safe_path("a/b.txt") and is_safe_path("./a") and is_safe_path("a..b")
    for bad in ("", "/a", "\\a", "a/../b", "..", "C:\\x", "a\x00b", None, 3):
        assert not is_safe_path(bad), bad


# -- HTTP failures and retries -----------------------------------------------------------------


def test_429_and_5xx_are_retried(harness):
    harness.configure(
        faults=[
            {"route": "create", "status": 429, "retry_after": 0},
            {"route": "status", "status": 503, "retry_after": 0, "times": 2},
            {"route": "trajectory", "status": 500, "retry_after": 0},
        ]
    )
    result = one_result(harness)
    assert result.caller_metadata["trajectory_status"] == "valid"
    assert result.retries == 4, "the item's retries: every failed attempt of its requests"
    stats = harness.stats()
    assert stats["requests"]["create"] == 2 and stats["requests"]["status"] == 3
    keys = [h["idempotency_key"] for h in stats["headers"] if h["route"] == "create"]
    assert len(set(keys)) == 1, "a retried POST carries the same idempotency key"
    assert len(stats["runs"]) == 1


def test_retries_run_out(harness):
    harness.configure(faults=[{"route": "create", "status": 503, "retry_after": 0, "times": -1}])
    failure = one_failure(harness, max_retries=2)
    assert failure.kind == "http" and failure.http_status == 503 and failure.retryable
    assert failure.retries == 2, "a failed item's retries, as a model call's"
    assert "POST /runs: HTTP 503: fault: HTTP 503" in failure.message
    assert harness.stats()["requests"]["create"] == 3


def test_a_client_error_is_not_retried_and_the_lost_run_is_cancelled(harness):
    harness.configure(faults=[{"route": "status", "status": 404}])
    failure = one_failure(harness)
    assert failure.kind == "http" and failure.http_status == 404 and not failure.retryable
    assert failure.message.endswith("; cancelled the run")
    stats = harness.stats()
    assert stats["requests"]["status"] == 1 and stats["cancelled"] == list(stats["runs"])


def test_a_wrong_key_is_an_http_failure(harness):
    harness.configure(api_key="right")
    with pytest.raises(HarnessError, match="HTTP 401: bad or missing API key"):
        prepare(harness, [item("q1")])


def test_an_unreachable_harness(harness):
    target = HttpAgentTarget(kind="http_agent", base_url="http://127.0.0.1:9", max_retries=0)

    async def work() -> TargetFailure:
        agent = HttpAgent(target, concurrency=1)
        try:
            with pytest.raises(HarnessError):
                await agent.prepare([item("q1")])
            return await outcome(agent, item("q1"))
        finally:
            await agent.aclose()

    failure = asyncio.run(work())
    assert isinstance(failure, TargetFailure) and failure.kind in ("connection", "timeout")
    assert failure.message.startswith("GET /capabilities:")


def test_the_harness_clients_of_a_process_share_one_tls_context():
    """Each target opened builds a harness client; loading the CA bundle for each (~50 ms of CPU)
    would cost a run of many shards that much per shard."""
    from assay.targets.http_agent._client import HarnessClient

    target = HttpAgentTarget(kind="http_agent", base_url="https://harness.invalid")
    contexts = [HarnessClient(target, concurrency=1)._client._transport.ssl_context for _ in range(2)]
    assert contexts[0] is contexts[1] and contexts[0].verify_mode == ssl.CERT_REQUIRED


def test_the_harness_limit_on_concurrent_runs_is_kept(harness):
    harness.configure(capabilities=caps(limits={"max_concurrent_runs": 2}), behaviors={"*": {"delay": 0.05}})

    async def work(agent: HttpAgent) -> list[Any]:
        return await asyncio.gather(*(outcome(agent, item(f"q{n}")) for n in range(6)))

    results = using(harness, work)
    assert all(isinstance(r, TargetResult) for r in results)
    assert harness.stats()["max_active"] == 2


# -- end to end --------------------------------------------------------------------------------


def test_assay_run_over_an_http_agent(tmp_path, harness, capsys):
    harness.configure(
        behaviors={
            "*": {"steps": 2, "step_cost": 0.01},
            "q1": {"answer": "4"},
            "q2": {"status": "failed", "error": "the agent gave up"},
        }
    )
    rows = [
        {"id": "q0", "question": "echo me", "answer": "echo me"},
        {"id": "q1", "question": "What is 2+2?", "answer": "4"},
        {"id": "q2", "question": "hard", "answer": "x"},
    ]
    write_jsonl(tmp_path / "d.jsonl", rows)
    spec = write_spec(
        tmp_path,
        name="agent",
        dataset={"path": "d.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[{"kind": "exact_match", "name": "exact"}],
        fail_on_item_error_rate=1,
    )
    code = main(["run", str(spec), "--store", str(tmp_path / "store"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["items"]["completed"] == 2 and summary["items"]["failed"] == 1
    items = Store(tmp_path / "store").run_items(summary["run_id"]).sort("item_id")
    done = items.filter(pl.col("outcome") == "completed")
    assert [json.loads(o) for o in done["output"]] == ["echo me", "4"]
    assert done["caller_cost_usd"].to_list() == pytest.approx([0.02, 0.02])
    meta = [json.loads(m) for m in done["caller_metadata"]]
    assert {m["trajectory_status"] for m in meta} == {"valid"} and {m["steps"] for m in meta} == {2}
    assert [json.loads(r) for r in done["caller_reserved"]] == [{"tokens": {"input": 20, "output": 10}}] * 2
    # Its spend is the harness's to report, not Assay's to measure.
    assert [json.loads(r) for r in done["cost_reasons"]] == [{"uninstrumented": 1}] * 2
    failed = items.filter(pl.col("outcome") == "failed").to_dicts()[0]
    assert failed["item_id"] == "q2" and failed["failure_kind"] == "exception"
    assert "ended failed: the agent gave up" in failed["error"]
    assert failed["failure_provider"].startswith("http_agent:127.0.0.1:")
    scores = Store(tmp_path / "store").run_scores(summary["run_id"])
    exact = dict(scores.select("item_id", "score").iter_rows())
    assert exact == {"q0": 1.0, "q1": 1.0}
    bodies = harness.stats()["bodies"]
    assert sorted(b["metadata"]["item_id"] for b in bodies) == ["q0", "q1", "q2"]


# -- the documents -----------------------------------------------------------------------------


def test_the_openapi_document_describes_what_the_reference_harness_and_assay_exchange(harness):
    doc = yaml.safe_load((REPO / "docs" / "harness-openapi.yaml").read_text())
    assert doc["openapi"] == "3.1.0"

    def check(name: str, value: Any) -> None:
        schema = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
        jsonschema.Draft202012Validator(schema).validate(value)

    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    harness.configure(
        capabilities=caps(input_schema=QUESTION_SCHEMA),
        behaviors={"*": {"artifacts": [{"path": "out/a.md", "size": 3}], "output": {"n": 1}}},
    )
    files = [{"path": "a.csv", "url": "https://files.example/a.csv"}]
    result = one_result(harness, item("q1", {"question": "2+2?"}, files=files), model="m")
    check("RunRequest", harness.stats()["bodies"][0])
    # A multipart start's `input` part, with its `uploads`.
    fixture = REPO / "docs" / "harness-openapi.yaml"
    local = [*files, {"path": "spec.yaml", "file": str(fixture)}]
    one_result(harness, item("q2", {"question": "2+2?"}, files=local))
    check("RunRequest", harness.stats()["bodies"][1])
    assert harness.stats()["bodies"][1]["uploads"][0]["path"] == "spec.yaml"
    run_path = f"/runs/{result.caller_metadata['harness_run_id']}"
    with httpx.Client(base_url=harness.base_url) as client:
        check("Capabilities", client.get("/capabilities").json())
        check("Run", client.get(run_path).json())
        check("Trajectory", client.get(f"{run_path}/trajectory").json())
    paths = set(doc["paths"])
    assert paths == {
        "/capabilities",
        "/runs",
        "/runs/{id}",
        "/runs/{id}/trajectory",
        "/runs/{id}/files/{path}",
        "/runs/{id}/cancel",
    }
    assert set(doc["components"]["schemas"]["Run"]["properties"]["status"]["enum"]) == STATUSES


def test_prepare_for_synchronous_callers(harness):
    target = HttpAgentTarget(kind="http_agent", base_url=harness.base_url, model="m")
    harness.configure(capabilities=caps(accepts={"model_override": False, "file_input": False}))
    files = [{"path": "a.csv", "url": "https://files.example/a.csv"}]
    snapshot = prepare_http_agent(target, [item("q1"), item("q2", files=files)])
    assert [d["item_id"] for d in snapshot["dropped_items"]] == ["q2"] and len(snapshot["warnings"]) == 1
    assert harness.stats()["requests"]["capabilities"] == 1

    async def inside_a_loop() -> dict[str, Any]:  # as in the run flow: a loop is already running
        return prepare_http_agent(target, [item("q1"), item("q2", files=files)], stored=snapshot)

    assert asyncio.run(inside_a_loop()) == snapshot
    assert harness.stats()["requests"]["capabilities"] == 1, "the stored snapshot, not the harness"
    with pytest.raises(DatasetError):
        prepare_http_agent(target, [item("q2", files=files)], stored=snapshot)
