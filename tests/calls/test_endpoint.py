"""One `Endpoint` spec model (`assay/calls/endpoint.py`) for every HTTP endpoint a spec names: the
chat targets', the judge's and the harness's. These tests pin what must not move when it did:
the runs stored before it keep their identity, the YAML reads as it did, and `base_url` is
normalised once, where the spec is read."""

from __future__ import annotations

import asyncio
import copy
import pickle
import textwrap
from pathlib import Path

import pytest
import yaml

from assay.calls.chat import ChatClient
from assay.calls.endpoint import ENDPOINT_SETTINGS, Endpoint, ModelEndpoint
from assay.calls.rate import controller_for
from assay.errors import SpecError
from assay.evaluators import LlmJudge, Sample, evaluate
from assay.run.identity import identity_of
from assay.spec import AnthropicTarget, HttpAgentTarget, OpenAITarget, parse_spec
from assay.spec.dataset import Item

ITEMS = [
    Item(item_id="a", item_index=0, input="2+2?", expected="4", fields={"id": "a", "question": "2+2?"}),
    Item(item_id="b", item_index=1, input="3+3?", expected="6", fields={"id": "b", "question": "3+3?"}),
]

JUDGES = """
scorers:
  - kind: exact_match
  - kind: llm_judge
    name: judge
    base_url: http://127.0.0.1:9/v1/
    model: judge-model-2025-01-01
    api_key_env: JUDGE_KEY
    timeout: 12
    max_retries: 2
    response_headers: {request_id: [x-gateway-id]}
    scale: 10
    concurrency: 4
  - kind: llm_judge
    name: claude
    provider: anthropic
    base_url: https://api.anthropic.com/v1
    model: claude-sonnet-4-5-20250929
    api_key_secret: judge-key
    max_tokens: 256
    rubric: "Is {output} right?"
"""

# Specs as users write them today, and the identity digest each had on the branch point before
# the Endpoint model (computed there, pinned here): a change of field or default that reached a
# run's identity would make every stored run of such a spec refuse to resume.
SPECS = {
    "openai": (
        """
        target:
          kind: openai
          base_url: http://127.0.0.1:8000/v1/
          model: gpt-4o-mini-2024-07-18
          api_key_env: OPENAI_API_KEY
          prompt: "Q: {question}"
          system: be brief
          temperature: 0
          max_tokens: 64
          timeout: 30
          max_retries: 3
          response_headers: {retry_after: [x-wait]}
          rate_limits: {rpm: 600, tpm: 100000}
          cache: true
          stream: true
        """,
        "19ec15f6457904ae",
    ),
    "anthropic": (
        """
        target:
          kind: anthropic
          model: claude-sonnet-4-5-20250929
          api_key_secret: anthropic-key
          max_tokens: 100
          system: be brief
          cache_system: true
          stop_sequences: ["\\n\\n"]
          rate_limits: {rpm: 50}
        """,
        "60e657c8c23d892d",
    ),
    "http_agent": (
        """
        target:
          kind: http_agent
          base_url: http://127.0.0.1:8080
          model: agent-model
          api_key_env: HARNESS_KEY
          poll_interval: 0.5
          timeout: 300
          request_timeout: 10
          max_retries: 1
          max_artifact_bytes: 0
        """,
        "57447d88d1737f4b",
    ),
}


def _spec(target: str) -> dict:
    doc = {"name": "pinned", "dataset": {"path": "items.jsonl"}}
    doc.update(yaml.safe_load(textwrap.dedent(target)))
    doc.update(yaml.safe_load(JUDGES))
    return doc


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_an_existing_spec_keeps_its_identity_digest(kind):
    target, digest = SPECS[kind]
    spec = parse_spec(_spec(target))
    assert identity_of(spec, ITEMS, Path(".")).digest == digest


def test_the_endpoint_fields_are_declared_once_and_kept_out_of_identity_together():
    assert ENDPOINT_SETTINGS == {
        "base_url",
        "api_key_env",
        "api_key_secret",
        "timeout",
        "max_retries",
        "response_headers",
        "rate_limits",
    }
    for model in (OpenAITarget, AnthropicTarget, LlmJudge):
        assert issubclass(model, ModelEndpoint), model
    # A harness is an endpoint, but not paced: `rate_limits` stays an unknown field there.
    assert issubclass(HttpAgentTarget, Endpoint) and not issubclass(HttpAgentTarget, ModelEndpoint)
    with pytest.raises(SpecError, match=r"target\.rate_limits: unknown field"):
        parse_spec(_spec("target: {kind: http_agent, base_url: 'http://h', rate_limits: {rpm: 1}}"))


def test_base_url_is_normalised_once_where_the_spec_is_read():
    spec = parse_spec(_spec(SPECS["openai"][0]))
    assert spec.target.base_url == "http://127.0.0.1:8000/v1"
    assert spec.scorers[1].base_url == "http://127.0.0.1:9/v1"
    assert spec.target.host == "127.0.0.1:8000"
    assert Endpoint(base_url="https://api.example.com//").base_url == "https://api.example.com"
    # The harness's attempts are bounded by `request_timeout`; its `timeout` bounds a whole run.
    agent = parse_spec(_spec(SPECS["http_agent"][0])).target
    assert (agent.attempt_timeout, agent.timeout) == (10.0, 300.0)


def test_a_base_url_with_a_trailing_slash_reaches_the_chat_path(mock):
    """`/v1/` and `/v1` call the same `/v1/chat/completions`: no client re-normalises the text."""
    mock.configure(answers={"*": "4"})

    async def ask() -> str:
        client = ChatClient(Endpoint(base_url=mock.base_url + "/", max_retries=0), concurrency=1)
        try:
            return (
                await client.complete({"model": "m", "messages": [{"role": "user", "content": "2+2?"}]})
            ).content
        finally:
            await client.aclose()

    assert asyncio.run(ask()) == "4"
    assert mock.stats()["requests"] == 1


def test_a_judges_rate_limits_pace_its_window(mock):
    """The judge is a `ModelEndpoint` too: its `rate_limits` reach the (endpoint, model) window
    its calls pass, as a target's do."""
    mock.configure(answers={"*": "1"})
    judge = LlmJudge(base_url=mock.base_url, model="paced-judge", rate_limits={"rpm": 6000}, gold_check=False)
    record = asyncio.run(evaluate(judge, Sample(output="4", input="2+2?", expected="4")))
    assert record.score == 1.0
    window = controller_for(ModelEndpoint(base_url=mock.base_url), "paced-judge", 1, opens_run=False)
    assert window.rpm == 6000


def test_the_judges_clients_are_live_and_its_spec_is_not():
    """The spec compares, copies and pickles as the YAML it was read from; the clients it opened
    on a loop stay with that loop (`evaluators/_judge_clients.py`)."""
    judge = LlmJudge(base_url="http://127.0.0.1:9/v1", model="m")
    loop = asyncio.new_event_loop()
    try:
        judge._clients.by_loop[loop] = (object(), object())  # type: ignore[assignment]
        assert judge == LlmJudge(base_url="http://127.0.0.1:9/v1/", model="m")
        assert not pickle.loads(pickle.dumps(judge))._clients.by_loop
        assert not copy.deepcopy(judge)._clients.by_loop
        assert copy.copy(judge)._clients.by_loop, "a shallow copy (a matrix cell) shares them"
    finally:
        loop.close()
