"""The `anthropic` target and an Anthropic judge, against the Messages API mock over real HTTP:
headers, request shape, retries on 529 honouring retry-after, cache-token accounting, pinned
models, sessions, streaming."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.calls.accounting import PriceTable, Usage
from assay.cli import main
from assay.errors import TargetFailure
from assay.spec import AnthropicTarget
from assay.spec.dataset import Item
from assay.targets import AnthropicMessagesTarget, TargetResult
from tests.conftest import arithmetic_rows, write_jsonl, write_spec
from tests.helpers.cli import assay_run
from tests.run.test_sessions import THREE_PROMPTS, session_spec, write_policy

MODEL = "claude-sonnet-4-5-20250929"
ITEM = Item(item_id="a", item_index=0, input="What is 1 + 1?", expected="2", fields={"q": "What is 1 + 1?"})


def target_spec(base_url: str, **options: Any) -> dict[str, Any]:
    return {
        "kind": "anthropic",
        "base_url": base_url,
        "model": MODEL,
        "max_tokens": 64,
        "prompt": "{question}",
        **options,
    }


def call(base_url: str, item: Item = ITEM, **spec: Any) -> TargetResult:
    options = {"prompt": "{q}", "max_tokens": 64, **spec}
    target = AnthropicMessagesTarget(
        AnthropicTarget(kind="anthropic", base_url=base_url, model=MODEL, **options), concurrency=2
    )

    async def go() -> TargetResult:
        try:
            return await target(item, 0)
        finally:
            await target.aclose()

    return asyncio.run(go())


def arithmetic_spec(folder: Path, target: dict[str, Any], n: int = 4, **overrides: Any) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    spec: dict[str, Any] = {
        "name": "claude",
        "dataset": {"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        "target": target,
        "scorers": [{"kind": "exact_match", "name": "exact"}],
        "concurrency": 1,
        **overrides,
    }
    return write_spec(folder, **spec)


def test_headers_body_and_usage(claude, monkeypatch):
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-ant-test-key")
    claude.configure(answers={"What is 1 + 1?": "2 STOP and more"})
    result = call(
        claude.base_url,
        api_key_env="TEST_ANTHROPIC_KEY",
        system="Answer with a number.",
        temperature=0.0,
        stop_sequences=["STOP"],
    )
    assert result.output == "2" and result.retries == 0 and result.model == MODEL
    stats = claude.stats()
    assert stats["last_api_key"] == "sk-ant-test-key" and stats["last_version"] == "2023-06-01"
    assert stats["bodies"][-1] == {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "What is 1 + 1?"}],
        "system": "Answer with a number.",
        "temperature": 0.0,
        "stop_sequences": ["STOP"],
    }
    # 4 words of system + 5 of the message, uncached; Assay's input counts all input.
    assert result.usage == Usage(input_tokens=9, output_tokens=1, cached_tokens=0, cache_write_tokens=0)
    assert result.first_token_ms is None, "not streamed"


def test_529_overloaded_is_retried_honouring_retry_after(claude):
    claude.configure(faults=[{"status": 529, "times": 2, "retry_after": 0.3}])
    result = call(claude.base_url)
    assert result.retries == 2 and result.retry_ms >= 600, "two retry-after waits of 0.3 s"
    assert claude.stats()["by_status"] == {"200": 1, "529": 2}


def test_an_anthropic_run_passes_the_adaptive_rate_controller(tmp_path, claude, capsys):
    """529 overloaded halves the endpoint's window and holds every call until its `retry-after`,
    as a 429 does for `openai`; the run stores that controller's counts and history."""
    claude.configure(faults=[{"status": 529, "times": 2, "retry_after": 0.3}])
    target = target_spec(claude.base_url, rate_limits={"rpm": 6000})
    summary, store = assay_run(capsys, arithmetic_spec(tmp_path, target, n=6, concurrency=3), tmp_path / "s")
    assert summary["items"]["completed"] == 6
    rate = json.loads(store.read_run(summary["run_id"])["rate_control"])
    assert rate["endpoint"] == f"{claude.base_url} {MODEL}" and rate["rpm"] == 6000
    assert rate["rate_limited"] == 2 and rate["responses"] == 8 and rate["paused_s"] >= 0.25
    assert rate["history"]["rows"]


def test_a_refused_request_fails_at_once_naming_the_provider(claude):
    claude.configure(faults=[{"status": 400, "message": "prompt is too long"}])
    with pytest.raises(TargetFailure) as caught:
        call(claude.base_url)
    failure = caught.value
    assert failure.http_status == 400 and failure.retryable is False
    assert failure.message == "HTTP 400: prompt is too long"
    assert failure.provider.startswith("anthropic:127.0.0.1:") and failure.request_id.startswith("req_")
    assert claude.stats()["requests"] == 1


def test_max_tokens_is_required_by_the_spec(tmp_path, claude, capsys):
    target = target_spec(claude.base_url)
    del target["max_tokens"]
    spec = arithmetic_spec(tmp_path, target)
    code = main(["run", str(spec), "--store", str(tmp_path / "s")])
    assert code == 2 and "target.max_tokens: required field is missing" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("alias", ["claude-sonnet-4-5", "claude-3-5-sonnet-latest"])
def test_a_moving_alias_is_refused_before_the_run(tmp_path, claude, alias, capsys):
    spec = arithmetic_spec(tmp_path, target_spec(claude.base_url, model=alias))
    code = main(["run", str(spec), "--store", str(tmp_path / "s")])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert "target.model" in stderr and alias in stderr
    assert claude.stats()["requests"] == 0 and not (tmp_path / "s" / "runs").exists()


def test_cache_system_writes_then_reads_and_each_is_priced_at_its_rate(tmp_path, claude, capsys):
    system = "You are a careful calculator. Reply with the number only."  # 10 words
    target = target_spec(claude.base_url, system=system, cache_system=True, temperature=0.0)
    summary, store = assay_run(capsys, arithmetic_spec(tmp_path, target, n=3), tmp_path / "s")
    body = claude.stats()["bodies"][0]
    assert body["system"] == [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]

    items = store.run_items(summary["run_id"]).sort("started_at")
    assert items["tokens_cache_write"].to_list() == [10, 0, 0], "the first call writes the cache"
    assert items["tokens_cached"].to_list() == [0, 10, 10], "later calls read it"
    assert items["tokens_input"].to_list() == [15, 15, 15], "all input: uncached + written + read"
    assert set(items["cost_completeness"]) == {"complete"}
    # Sonnet 4.5: $3 input, $3.75 cache writes, $0.30 cache reads, $15 output, per million.
    price = PriceTable.shipped().prices[MODEL]
    assert (price.input, price.cache_write, price.cached_input, price.output) == (3.0, 3.75, 0.30, 15.0)
    costs = items["cost_usd"].to_list()
    assert costs[0] == pytest.approx((5 * 3.0 + 10 * 3.75 + 5 * 15.0) / 1e6)
    assert costs[1] == pytest.approx((5 * 3.0 + 10 * 0.30 + 5 * 15.0) / 1e6)
    run_row = store.read_run(summary["run_id"])
    assert run_row["tokens_cache_write"] == 10 and run_row["tokens_cached"] == 20
    assert run_row["cost_usd"] == pytest.approx(sum(costs))


def test_a_policy_continues_one_conversation_with_an_anthropic_target(tmp_path, claude, capsys):
    claude.configure(answers={"Are you sure?": "yes", "Final answer?": "4"})
    policy = write_policy(tmp_path, THREE_PROMPTS)
    target = target_spec(claude.base_url, system="Be brief.")
    summary, store = assay_run(capsys, session_spec(tmp_path, target, n=1, policy=policy), tmp_path / "s")
    assert [b["messages"] for b in claude.stats()["bodies"]][-1] == [
        {"role": "user", "content": "What is 0 + 0?"},
        {"role": "assistant", "content": "What is 0 + 0?"},
        {"role": "user", "content": "Are you sure?"},
        {"role": "assistant", "content": "yes"},
        {"role": "user", "content": "Final answer?"},
    ]
    assert all(b["system"] == "Be brief." for b in claude.stats()["bodies"])
    turns = store.run_turns(summary["run_id"])
    assert turns.height == 3 and turns["outcome"].to_list() == ["completed"] * 3
    items = store.run_items(summary["run_id"])
    assert items["output_text"].to_list() == ["4"] and items["cost_completeness"].to_list() == ["complete"]


def test_an_anthropic_judge_grades_with_the_messages_api(tmp_path, claude, mock, capsys):
    claude.configure(answers={"*": '{"score": 1, "explanation": "right"}'})
    judge = {
        "kind": "llm_judge",
        "name": "judge",
        "provider": "anthropic",
        "base_url": claude.base_url,
        "model": MODEL,
        "system": "You grade answers.",
        "gold_check": False,  # its call would be a third body
    }
    spec = arithmetic_spec(
        tmp_path,
        {"kind": "openai", "base_url": mock.base_url, "model": "mock-1", "prompt": "{question}"},
        n=2,
        scorers=[judge],
    )
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    bodies = claude.stats()["bodies"]
    assert len(bodies) == 2 and bodies[0]["system"] == "You grade answers."
    assert bodies[0]["max_tokens"] == 512 and bodies[0]["temperature"] == 0.0
    assert [m["role"] for m in bodies[0]["messages"]] == ["user"]
    scores = store.run_scores(summary["run_id"]).filter(pl.col("scorer") == "judge")
    assert scores["score"].to_list() == [1.0, 1.0] and set(scores["cost_completeness"]) == {"complete"}
    assert scores["cost_usd"].sum() > 0


def test_an_anthropic_judge_must_be_pinned(tmp_path, claude, mock, capsys):
    judge = {
        "kind": "llm_judge",
        "provider": "anthropic",
        "base_url": claude.base_url,
        "model": "claude-opus-4-5",
    }
    spec = arithmetic_spec(
        tmp_path, {"kind": "openai", "base_url": mock.base_url, "model": "mock-1"}, scorers=[judge]
    )
    code = main(["run", str(spec), "--store", str(tmp_path / "s")])
    stderr = capsys.readouterr().err
    assert code == 2 and "scorers.0.model" in stderr and "claude-opus-4-5" in stderr
    assert mock.stats()["requests"] == 0
