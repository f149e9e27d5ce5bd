"""Streaming (`stream: true`) on the openai and anthropic targets, against the mocks over real
sockets: first-token and total time per call, p50/p95 per model, usage from the final event, a
stream cut mid-way retried (and its tokens unknown when it fails for good), the assembled reply
captured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from aiohttp import web

from assay.calls.accounting import Usage
from assay.cli import main
from assay.errors import TargetFailure
from assay.testing._background import BackgroundServer, listen
from tests.conftest import arithmetic_rows, mock_target, write_jsonl, write_spec
from tests.helpers.cli import assay_run
from tests.report.test_report import browser  # noqa: F401 - the fixture
from tests.targets.test_anthropic import call, target_spec

LATENCY_MS = 60
TOKEN_DELAY_MS = 15
ANSWER = "one two three four five six"  # 6 words: 5 gaps of TOKEN_DELAY_MS after the first


def spec_of(folder: Path, target: dict[str, Any], n: int = 4, **overrides: Any) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    spec: dict[str, Any] = {
        "name": "streamed",
        "dataset": {"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        "target": target,
        "scorers": [{"kind": "exact_match", "name": "exact"}],
        "concurrency": 2,
        "fail_on_item_error_rate": 1,
        **overrides,
    }
    return write_spec(folder, **spec)


def assert_timed(items: pl.DataFrame) -> None:
    """Each call's first token came after the latency, and its last words after the token delays."""
    for row in items.iter_rows(named=True):
        assert row["first_token_ms"] >= LATENCY_MS, row
        # A millisecond of slack: the server's sleeps are on its event loop's clock, which may wake
        # a fraction early (seen under load: 74.93 ms for 5 x 15 ms).
        assert row["wire_ms"] - row["first_token_ms"] >= 5 * TOKEN_DELAY_MS - 1, row
        assert row["duration_ms"] >= row["wire_ms"]


def test_openai_stream_times_first_token_reads_usage_and_captures_the_assembled_reply(tmp_path, mock, capsys):
    mock.configure(latency_ms=LATENCY_MS, token_delay_ms=TOKEN_DELAY_MS, answers={"*": ANSWER})
    spec = spec_of(tmp_path, mock_target(mock.base_url, stream=True), capture_requests=True)
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    body = mock.stats()["bodies"][-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}

    items = store.run_items(summary["run_id"])
    assert items["outcome"].to_list() == ["completed"] * 4
    assert items["output_text"].to_list() == [ANSWER] * 4
    assert_timed(items)
    # Usage from the final event: the mock's counts (5 words of prompt, 6 of answer).
    assert items["tokens_input"].to_list() == [5] * 4 and items["tokens_output"].to_list() == [6] * 4

    (timing,) = summary["timing_by_model"]
    assert (
        timing["first_token_ms_p50"] >= LATENCY_MS
        and timing["first_token_ms_p95"] >= timing["first_token_ms_p50"]
    )
    assert timing["total_ms_p50"] >= timing["first_token_ms_p50"] + 5 * TOKEN_DELAY_MS
    assert timing["total_ms_p95"] >= timing["total_ms_p50"]

    requests = store.run_requests(summary["run_id"])
    attempts = requests.filter(pl.col("phase") == "attempt")
    reply = json.loads(attempts["response"][0])
    assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["content"] == ANSWER
    assert reply["usage"]["completion_tokens"] == 6
    ends = requests.filter(pl.col("phase") == "end")
    assert (ends["first_token_ms"] >= LATENCY_MS).all() and (ends["tokens_output"] == 6).all()


def test_unstreamed_calls_have_no_first_token_time(tmp_path, mock, capsys):
    summary, store = assay_run(capsys, spec_of(tmp_path, mock_target(mock.base_url), n=2), tmp_path / "s")
    assert store.run_items(summary["run_id"])["first_token_ms"].to_list() == [None, None]
    (timing,) = summary["timing_by_model"]
    assert timing["first_token_ms_p50"] is None and timing["total_ms_p50"] is not None


def test_anthropic_stream_times_first_token_and_reads_cache_usage(claude):
    claude.configure(latency_ms=LATENCY_MS, token_delay_ms=TOKEN_DELAY_MS, answers={"*": ANSWER})
    system = "Reply in six words."
    first = call(claude.base_url, stream=True, system=system, cache_system=True)
    again = call(claude.base_url, stream=True, system=system, cache_system=True)
    assert first.output == again.output == ANSWER
    assert claude.stats()["bodies"][-1]["stream"] is True
    assert first.first_token_ms >= LATENCY_MS and first.wire_ms - first.first_token_ms >= 5 * TOKEN_DELAY_MS
    # message_start carries the input and cache counts, message_delta the final output count.
    assert first.usage == Usage(input_tokens=9, output_tokens=6, cached_tokens=0, cache_write_tokens=4)
    assert again.usage == Usage(input_tokens=9, output_tokens=6, cached_tokens=4, cache_write_tokens=0)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_stream_cut_mid_way_is_retried(provider, mock, claude):
    server = mock if provider == "openai" else claude
    server.configure(answers={"*": ANSWER}, faults=[{"drop": True, "times": 1}])
    if provider == "openai":
        from tests.targets.test_openai_target import call as openai_call

        result = openai_call(mock.base_url, stream=True)
    else:
        result = call(claude.base_url, stream=True)
    assert result.output == ANSWER and result.retries == 1
    assert server.stats()["requests"] == 2


def test_a_stream_cut_for_good_fails_with_its_tokens_unknown(tmp_path, claude, capsys):
    claude.configure(answers={"*": ANSWER}, faults=[{"drop": True, "times": -1}])
    spec = spec_of(tmp_path, target_spec(claude.base_url, stream=True, max_retries=1), n=1)
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    (item,) = store.run_items(summary["run_id"]).iter_rows(named=True)
    assert item["outcome"] == "failed" and item["failure_kind"] == "connection" and item["failure_retryable"]
    assert item["failure_provider"].startswith("anthropic:")
    assert item["operations"] == 2 and item["operations_unknown"] == 2, "both attempts may have been billed"
    assert item["cost_completeness"] == "incomplete" and json.loads(item["cost_reasons"]) == {
        "unknown_outcome": 2
    }
    assert item["tokens_input"] is None and item["tokens_output"] is None, "never guessed from the words seen"


def test_an_error_event_mid_stream_is_a_retryable_failure(claude):
    from assay.calls.wire import StreamFailed
    from assay.calls.wire_anthropic import AnthropicMessages

    assembler = AnthropicMessages().assembler()
    assembler.feed(
        json.dumps({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3}}})
    )
    with pytest.raises(StreamFailed) as caught:
        assembler.feed(
            json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        )
    assert caught.value.retryable and caught.value.message == "stream error: overloaded_error: Overloaded"
    with pytest.raises(StreamFailed) as caught:
        AnthropicMessages().assembler().feed(
            json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
        )
    assert not caught.value.retryable


def test_a_stream_refused_with_a_status_is_an_http_failure(claude):
    claude.configure(faults=[{"status": 401, "message": "invalid x-api-key"}])
    with pytest.raises(TargetFailure) as caught:
        call(claude.base_url, stream=True)
    assert caught.value.http_status == 401 and caught.value.message == "HTTP 401: invalid x-api-key"


class _EndsEarly:
    """A server whose Messages stream ends cleanly (the reply's last chunk sent) before its
    `message_stop`: nothing is wrong on the wire, only the stream is incomplete."""

    def __init__(self) -> None:
        self.requests = 0
        self._runner: Any = None

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        start = {
            "id": "m",
            "model": "claude-x",
            "content": [],
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
        for event in (
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "half"}},
        ):
            await response.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        await response.write_eof()
        return response

    async def start(self, port: int = 0) -> int:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        self._runner, bound = await listen(app, "127.0.0.1", port)
        return bound

    async def stop(self) -> None:
        await self._runner.cleanup()


def test_a_stream_that_ends_before_its_final_event_is_a_retryable_failure():
    with BackgroundServer(_EndsEarly()) as server:
        with pytest.raises(TargetFailure) as caught:
            call(f"http://127.0.0.1:{server.port}/v1", stream=True, max_retries=1)
        assert server.app.requests == 2, "retried once"
    failure = caught.value
    assert failure.kind == "connection" and failure.retryable
    assert failure.message == "connection error: the stream ended before its final event"


def streamed_run(tmp_path: Path, mock: Any, capsys: pytest.CaptureFixture[str]) -> tuple[str, float, float]:
    """A run of 6 streamed calls; its id and its first-token p50 and p95 (ms)."""
    mock.configure(latency_ms=LATENCY_MS, token_delay_ms=TOKEN_DELAY_MS, answers={"*": ANSWER})
    summary, _ = assay_run(
        capsys, spec_of(tmp_path, mock_target(mock.base_url, stream=True), n=6), tmp_path / "s"
    )
    (timing,) = summary["timing_by_model"]
    assert timing["streamed_calls"] == 6
    return summary["run_id"], timing["first_token_ms_p50"], timing["first_token_ms_p95"]


def test_first_token_p50_p95_per_model_in_show_and_in_the_report(tmp_path, mock, capsys):
    """Streamed calls' first-token p50 / p95 per model: a table in `assay show` and in the HTML
    report (Chromium draws it: the next test); a run that streamed nothing shows neither."""
    run_id, p50, p95 = streamed_run(tmp_path, mock, capsys)
    assert main(["show", run_id, "--store", str(tmp_path / "s")]) == 0
    shown = capsys.readouterr().out
    assert "first token p50" in shown and "first token p95" in shown
    (line,) = [line for line in shown.splitlines() if "mock-1" in line and " ms" in line]
    assert f"{p50:,.0f} ms" in line and f"{p95:,.0f} ms" in line, line
    assert main(["report", run_id, "--store", str(tmp_path / "s"), "--out", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    assert "first-token" in (tmp_path / "r.html").read_text()

    (tmp_path / "plain").mkdir()
    plain, _ = assay_run(capsys, spec_of(tmp_path / "plain", mock_target(mock.base_url), n=2), tmp_path / "s")
    assert main(["show", plain["run_id"], "--store", str(tmp_path / "s")]) == 0
    assert "first token" not in capsys.readouterr().out
    out = str(tmp_path / "p.html")
    assert main(["report", plain["run_id"], "--store", str(tmp_path / "s"), "--out", out]) == 0
    assert "first-token" not in (tmp_path / "p.html").read_text()


@pytest.mark.browser
def test_the_report_draws_the_first_token_table_in_chromium(tmp_path, mock, capsys, request):
    from tests.report.test_report import Opened

    run_id, p50, p95 = streamed_run(tmp_path, mock, capsys)
    assert main(["report", run_id, "--store", str(tmp_path / "s"), "--out", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    # Chromium last: Playwright's sync API keeps an event loop running in this thread.
    opened = Opened(request.getfixturevalue("browser"), tmp_path / "r.html")
    try:
        table = opened.page.locator("#models table.first-token")
        assert table.is_visible()
        cells = table.locator("tbody tr").first.locator("td").all_inner_texts()
        assert cells[:3] == ["mock-1", "6", "6"], cells
        assert cells[3:5] == [f"{p50:,.0f} ms", f"{p95:,.0f} ms"], cells
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.close()
