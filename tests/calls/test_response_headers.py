"""Where a reply's request id and rate-limit hints are read (`assay.calls.headers.ResponseHeaders`):
under OpenAI's, Anthropic's and a LiteLLM proxy's names — its own `x-litellm-call-id`, the upstream
provider's headers prefixed `llm_provider-`, its 429s with no `Retry-After` — and under names a
spec adds, against the real mock server on 127.0.0.1 answering as such a gateway does."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import polars as pl
import pytest
from pydantic import ValidationError

from assay.calls.aimd import RateController
from assay.calls.chat import ChatClient, ChatReply
from assay.calls.endpoint import Endpoint
from assay.calls.headers import HEADERS, ResponseHeaders
from assay.cli import main
from assay.errors import TargetFailure
from assay.spec import HttpAgentTarget
from assay.store import Store
from tests.conftest import openai_spec

BODY = {"model": "mock-1", "messages": [{"role": "user", "content": "What is 1 + 1?"}]}
# A LiteLLM proxy's refusal, as measured (/work/shared/notes/real-world-measured.md): the upstream
# id and wait prefixed, its own call id, no `x-request-id` and no `Retry-After` of its own.
LITELLM_429 = {
    "x-request-id": None,
    "llm_provider-x-request-id": "req_upstream",
    "x-litellm-call-id": "call-1",
    "llm_provider-retry-after": "0.2",
}


def chat(base_url: str, *, gate: RateController | None = None, **client: Any) -> ChatReply:
    async def go() -> ChatReply:
        chat_client = ChatClient(
            Endpoint(base_url=base_url, timeout=10, max_retries=0, **client), concurrency=2, gate=gate
        )
        try:
            return await chat_client.complete(BODY)
        finally:
            await chat_client.aclose()

    return asyncio.run(go())


def test_a_litellm_refusal_is_waited_out_for_the_upstreams_retry_after(mock):
    """The 429 has only `llm_provider-retry-after: 0.2`: no call leaves before it has passed, and
    no longer (without it, the controller's default pause is 1 s)."""
    mock.configure(faults=[{"status": 429, "times": 1, "headers": LITELLM_429}])
    gate = RateController("e m", ceiling=4)
    reply = chat(mock.base_url, gate=gate)
    assert reply.retries == 1 and mock.stats()["requests"] == 2
    assert gate.rate_limited == 1
    assert gate.paused_s == pytest.approx(0.2, abs=0.05)


def test_a_failure_behind_a_gateway_keeps_the_upstream_request_id(mock):
    mock.configure(faults=[{"status": 400, "times": 1, "headers": LITELLM_429}])
    with pytest.raises(TargetFailure) as failed:
        chat(mock.base_url)
    assert failed.value.request_id == "req_upstream"
    # A gateway that passes no upstream id: its own call id.
    only_call_id = {"x-request-id": None, "x-litellm-call-id": "call-2"}
    mock.configure(faults=[{"status": 400, "times": 1, "headers": only_call_id}])
    with pytest.raises(TargetFailure) as failed:
        chat(mock.base_url)
    assert failed.value.request_id == "call-2"


def test_the_rate_hints_reach_rate_control_under_one_name_wherever_they_were():
    upstream = {
        "llm_provider-x-ratelimit-limit-requests": "3000",
        "llm_provider-x-ratelimit-remaining-requests": "0",
        "llm_provider-x-ratelimit-reset-requests": "20ms",
        "llm_provider-retry-after": "1",
        "x-litellm-call-id": "c",
    }
    assert HEADERS.hints(upstream) == {
        "x-ratelimit-limit-requests": "3000",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "20ms",
        "retry-after": "1",
    }
    anthropic = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "3"}
    assert HEADERS.hints(anthropic) == {
        "x-ratelimit-limit-requests": "50",
        "x-ratelimit-remaining-requests": "3",
    }
    # A provider's own header wins over a gateway's copy.
    assert HEADERS.hints({"retry-after": "2", "llm_provider-retry-after": "9"}) == {"retry-after": "2"}


def test_a_spec_adds_header_names_tried_before_the_documented_ones(tmp_path, mock, capsys):
    """`response_headers: {request_id: [x-gateway-id]}`: a failed item keeps the id the gateway
    sends under that name; the run's identity does not change with it (operational)."""
    mock.configure(
        faults=[
            {
                "status": 400,
                "times": -1,
                "match": "What is 1 + 1?",
                "headers": {"x-request-id": None, "X-Gateway-Id": "gw-7"},
            }
        ]
    )
    target = {
        "kind": "openai",
        "base_url": mock.base_url,
        "model": "mock-1",
        "prompt": "{question}",
        "response_headers": {"request_id": ["X-Gateway-Id"]},
    }
    spec = openai_spec(tmp_path, mock.base_url, n=3, target=target, fail_on_item_error_rate=1)
    assert main(["run", str(spec), "--store", str(tmp_path / "store"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    failed = Store(tmp_path / "store").run_items(summary["run_id"]).filter(pl.col("outcome") == "failed")
    assert failed["failure_request_id"].to_list() == ["gw-7"]
    plain = openai_spec(tmp_path, mock.base_url, n=3, fail_on_item_error_rate=1)
    assert main(["run", str(plain), "--store", str(tmp_path / "store2"), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    identities = [
        Store(tmp_path / s).read_run(r["run_id"])["identity"]
        for s, r in (("store", summary), ("store2", again))
    ]
    assert identities[0] == identities[1], "response_headers is operational: the same eval"


def test_bad_header_names_are_refused_naming_the_field(tmp_path, mock, capsys):
    with pytest.raises(ValidationError, match="request_id"):
        HttpAgentTarget(kind="http_agent", base_url=mock.base_url, response_headers={"request_id": ["a b"]})
    with pytest.raises(ValidationError, match="retry_afterr"):
        ResponseHeaders.model_validate({"retry_afterr": ["x"]})
    target = {"kind": "openai", "base_url": mock.base_url, "model": "m", "response_headers": {"limit": ["x"]}}
    spec = openai_spec(tmp_path, mock.base_url, target=target)
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert not (tmp_path / "s").exists()
    assert "response_headers" in capsys.readouterr().err


def test_a_spec_extension_keeps_the_documented_names():
    names = ResponseHeaders(request_id=("X-Mine",)).before(HEADERS)
    assert names.request_id == ("x-mine", *HEADERS.request_id)
    assert names.retry_after == HEADERS.retry_after
    assert json.loads(names.model_dump_json())["request_id"][0] == "x-mine"
