"""Tests of the mock OpenAI server, always through real HTTP on 127.0.0.1."""

from __future__ import annotations

import concurrent.futures
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.calls.http import tls_context
from assay.testing.mock_openai import BODIES_KEPT, MockOpenAIServer

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[MockOpenAIServer]:
    with MockOpenAIServer() as srv:
        yield srv


@pytest.fixture
def client(server: MockOpenAIServer) -> Iterator[httpx.Client]:
    # The process's TLS settings: a client loading its own CA bundle costs ~50 ms a test.
    with httpx.Client(base_url=server.base_url, timeout=10, verify=tls_context()) as c:
        yield c


def chat(client: httpx.Client, user: str, *, system: str | None = None, **kwargs: Any) -> httpx.Response:
    """POST one chat completion whose last user message is `user`."""
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return client.post("/chat/completions", json={"model": "mock-1", "messages": messages}, **kwargs)


def content(resp: httpx.Response) -> str:
    return resp.json()["choices"][0]["message"]["content"]


def test_echo_and_usage(client: httpx.Client) -> None:
    resp = chat(client, "hello there world", system="You are terse.")

    assert resp.status_code == 200
    assert re.fullmatch(r"req_\d+", resp.headers["x-request-id"])
    body = resp.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "mock-1"
    assert body["id"] and isinstance(body["created"], int)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "hello there world"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 6, "completion_tokens": 3, "total_tokens": 9}


def test_request_ids_differ(client: httpx.Client) -> None:
    ids = {chat(client, "x").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3


def test_content_parts_are_read_as_text(client: httpx.Client) -> None:
    parts = [{"type": "text", "text": "two words"}, {"type": "image_url", "image_url": {"url": "x"}}]
    resp = client.post("/chat/completions", json={"messages": [{"role": "user", "content": parts}]})
    assert content(resp) == "two words"
    assert resp.json()["usage"]["prompt_tokens"] == 2


def test_answers_map_default_and_no_echo(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(answers={"What is 2+2?": "4"})
    assert content(chat(client, "What is 2+2?")) == "4"
    assert content(chat(client, "unmatched")) == "unmatched"

    server.configure(answers={"What is 2+2?": "4", "*": "no idea"})
    assert content(chat(client, "unmatched")) == "no idea"

    server.configure(answers={}, echo=False)
    resp = chat(client, "unmatched")
    assert content(resp) == ""
    assert resp.json()["usage"]["completion_tokens"] == 0


def test_a_list_of_answers_is_given_in_turn(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(answers={"grade": ["1", "0", "1/2"], "*": ["a", "b"]})
    assert [content(chat(client, "grade")) for _ in range(4)] == ["1", "0", "1/2", "1"]
    assert [content(chat(client, other)) for other in ("x", "y", "z")] == ["a", "b", "a"]
    server.configure(answers={"grade": ["1", "0"]})  # setting answers restarts every list
    assert content(chat(client, "grade")) == "1"


def test_429_with_retry_after_then_success(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(faults=[{"status": 429, "times": 2, "retry_after": 0.1}])

    for _ in range(2):
        resp = chat(client, "hi")
        assert resp.status_code == 429
        assert resp.headers["Retry-After"] == "0.1"
        assert re.fullmatch(r"req_\d+", resp.headers["x-request-id"])
        error = resp.json()["error"]
        assert set(error) == {"message", "type", "code"}
        assert error["code"] == "rate_limit_exceeded"
    assert chat(client, "hi").status_code == 200
    assert server.stats()["by_status"] == {"200": 1, "429": 2}


def test_500_once(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(faults=[{"status": 500}])

    resp = chat(client, "hi")
    assert resp.status_code == 500
    assert resp.json()["error"]["type"] == "server_error"
    assert "Retry-After" not in resp.headers
    assert chat(client, "hi").status_code == 200


def test_faults_apply_in_queue_order_and_only_when_matching(
    server: MockOpenAIServer, client: httpx.Client
) -> None:
    server.configure(
        faults=[
            {"status": 400, "match": "poison", "message": "bad prompt", "code": "content_filter"},
            {"status": 503},
            {"status": 502},
        ]
    )

    assert chat(client, "fine").status_code == 503
    poisoned = chat(client, "this is poison")
    assert poisoned.status_code == 400
    assert poisoned.json()["error"] == {
        "message": "bad prompt",
        "type": "invalid_request_error",
        "code": "content_filter",
    }
    assert chat(client, "this is poison").status_code == 502
    assert chat(client, "this is poison").status_code == 200


def test_fault_forever(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(faults=[{"status": 401, "times": -1}])
    assert [chat(client, "hi").status_code for _ in range(5)] == [401] * 5
    assert server.configure()["faults"] == [{"status": 401, "times": -1}]


def test_a_fault_held_after_another_answer(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(faults=[{"status": 429, "match": "first", "after": "second"}])
    other = httpx.Client(base_url=server.base_url, timeout=10, verify=tls_context())
    with other, concurrent.futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(chat, other, "first")
        time.sleep(0.2)
        assert not held.done(), "the refusal waits for the answer to 'second'"
        assert chat(client, "second").status_code == 200
        assert held.result(timeout=5).status_code == 429
    assert server.configure()["faults"] == []


def test_delay_fault_slows_one_reply(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(faults=[{"delay_ms": 500}])

    start = time.perf_counter()
    resp = chat(client, "slow")
    assert time.perf_counter() - start >= 0.5
    assert resp.status_code == 200 and content(resp) == "slow"

    start = time.perf_counter()
    chat(client, "fast")
    assert time.perf_counter() - start < 0.4


def test_delay_fault_beyond_client_timeout(server: MockOpenAIServer, client: httpx.Client) -> None:
    server.configure(faults=[{"delay_ms": 5000}])

    with pytest.raises(httpx.ReadTimeout):
        chat(client, "slow", timeout=0.2)
    assert chat(client, "next").status_code == 200


def test_latency() -> None:
    with MockOpenAIServer(latency_ms=150) as slow, httpx.Client(base_url=slow.base_url) as c:
        start = time.perf_counter()
        assert chat(c, "hi").status_code == 200
        assert time.perf_counter() - start >= 0.15


def test_stats_and_reset(server: MockOpenAIServer, client: httpx.Client) -> None:
    chat(client, "one", headers={"Authorization": "Bearer sk-test"})
    server.configure(latency_ms=5, answers={"*": "x"}, faults=[{"status": 500}, {"status": 429, "times": -1}])
    chat(client, "two")

    stats = server.stats()
    assert stats["requests"] == 2
    assert stats["by_status"] == {"200": 1, "500": 1}
    assert [b["messages"][-1]["content"] for b in stats["bodies"]] == ["one", "two"]
    assert stats["last_authorization"] is None

    server.reset()
    assert server.stats() == {
        "requests": 0,
        "by_status": {},
        "bodies": [],
        "last_authorization": None,
        "peak_in_flight": 0,
    }
    resp = chat(client, "three", headers={"Authorization": "Bearer sk-other"})
    assert resp.status_code == 200 and content(resp) == "three"
    assert server.stats()["last_authorization"] == "Bearer sk-other"
    assert server.configure() == {
        "latency_ms": 0,
        "token_delay_ms": 0,
        "answers": {},
        "echo": True,
        "faults": [],
    }


def test_bodies_keep_the_last_50(server: MockOpenAIServer, client: httpx.Client) -> None:
    for i in range(BODIES_KEPT + 5):
        chat(client, str(i))
    stats = server.stats()
    assert stats["requests"] == BODIES_KEPT + 5
    assert [b["messages"][-1]["content"] for b in stats["bodies"]] == [
        str(i) for i in range(5, BODIES_KEPT + 5)
    ]


def test_runtime_config_over_http(server: MockOpenAIServer) -> None:
    root = server.base_url.removesuffix("/v1")
    with httpx.Client(base_url=root, timeout=10) as c:
        resp = c.post(
            "/_mock/config",
            json={
                "latency_ms": 1,
                "answers": {"What is 2+2?": "4"},
                "faults": [{"status": 429, "times": 1, "retry_after": 2, "match": "2+2"}],
            },
        )
        assert resp.status_code == 200
        assert resp.json()["faults"] == [{"status": 429, "times": 1, "retry_after": 2, "match": "2+2"}]

        def ask(text: str) -> httpx.Response:
            return c.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": text}]},
                headers={"Authorization": "Bearer sk-http"},
            )

        assert ask("hello").status_code == 200
        limited = ask("What is 2+2?")
        assert limited.status_code == 429 and limited.headers["Retry-After"] == "2"
        assert content(ask("What is 2+2?")) == "4"

        stats = c.get("/_mock/stats").json()
        assert stats["requests"] == 3
        assert stats["by_status"] == {"200": 2, "429": 1}
        assert stats["last_authorization"] == "Bearer sk-http"

        assert c.post("/_mock/reset").json()["requests"] == 0
        assert c.get("/_mock/stats").json()["requests"] == 0
        assert content(ask("What is 2+2?")) == "What is 2+2?"


@pytest.mark.parametrize(
    "config",
    [
        {"bogus": 1},
        {"latency_ms": -1},
        {"echo": "no"},
        {"answers": {"a": 1}},
        {"answers": {"a": []}},
        {"answers": {"a": ["x", 2]}},
        {"faults": {"status": 500}},
        {"faults": [{"times": 2}]},
        {"faults": [{"status": 200}]},
        {"faults": [{"status": 500, "times": 0}]},
        {"faults": [{"status": 500, "colour": "red"}]},
    ],
)
def test_bad_config_is_refused_and_changes_nothing(server: MockOpenAIServer, config: dict[str, Any]) -> None:
    before = server.configure()
    resp = httpx.post(server.base_url.removesuffix("/v1") + "/_mock/config", json=config)
    assert resp.status_code == 400
    assert resp.json()["error"]["message"]
    with pytest.raises((TypeError, ValueError)):
        server.configure(**config)
    assert server.configure() == before


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"messages": "hi"}', b'{"messages": ["hi"]}'])
def test_malformed_chat_request_gets_400(server: MockOpenAIServer, client: httpx.Client, body: bytes) -> None:
    resp = client.post("/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "invalid_request_error"
    assert server.stats()["by_status"] == {"400": 1}


@pytest.mark.timeout(30)
@pytest.mark.slow
def test_cli_serves_in_a_subprocess() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.testing.mock_openai", "--port", "0", "--latency-ms", "5"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        # The timeout mark bounds this read should the server never print its line.
        line = proc.stdout.readline()
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:\d+/v1)\n", line)
        assert match, line
        with httpx.Client(base_url=match.group(1), timeout=10) as c:
            resp = chat(c, "from the cli")
        assert resp.status_code == 200 and content(resp) == "from the cli"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
    assert proc.returncode == 0
