"""The adaptive rate controller (assay/calls/aimd.py) and the mock's token-bucket mode, against a
real mock server on 127.0.0.1 that enforces requests per minute with 429 + Retry-After."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from assay.calls.aimd import PACE_DECREASE, START_WINDOW, Pace, RateController, reset_seconds
from assay.calls.headers import HEADERS
from assay.cli import main
from assay.store import Store
from assay.testing.mock_openai import MockOpenAIServer
from tests.conftest import openai_spec
from tests.helpers.cli import assay_json


def _chat(client: httpx.Client, base_url: str) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi there"}]}
    return client.post(f"{base_url}/chat/completions", json=body)


def test_the_mock_enforces_rpm_with_a_token_bucket_and_says_when_to_come_back():
    with MockOpenAIServer() as mock, httpx.Client() as client:
        mock.configure(rate_limits={"rpm": 60})  # one a second, a bucket of one
        first = _chat(client, mock.base_url)
        assert first.status_code == 200
        assert first.headers["x-ratelimit-limit-requests"] == "60"
        assert first.headers["x-ratelimit-remaining-requests"] == "0"
        refused = _chat(client, mock.base_url)
        assert refused.status_code == 429
        assert 0 < float(refused.headers["retry-after"]) <= 1.0
        assert refused.headers["x-ratelimit-remaining-requests"] == "0"
        assert refused.json()["error"]["type"] == "rate_limit_exceeded"
        assert mock.stats()["by_status"] == {"200": 1, "429": 1}
        mock.configure(rate_limits=None)
        assert _chat(client, mock.base_url).status_code == 200


def test_the_mock_can_be_a_strict_provider_small_burst_and_limit_headers_on_429s_only():
    """A bucket of 3 at 60 a minute, the `x-ratelimit-*` headers only on refusals (issue 25):
    three calls in a row pass, the fourth is refused and says the limit; a success says nothing."""
    with MockOpenAIServer() as mock, httpx.Client() as client:
        settings = mock.configure(rate_limits={"rpm": 60, "burst": 3, "headers": "refusals"})
        assert settings["rate_limits"]["burst"] == 3
        answers = [_chat(client, mock.base_url) for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        refused = answers[3]
        assert refused.headers["x-ratelimit-limit-requests"] == "60"
        assert refused.headers["x-ratelimit-remaining-requests"] == "0"
        assert 0 < float(refused.headers["retry-after"]) <= 1.0
        assert not any(k.startswith("x-ratelimit") for a in answers[:3] for k in a.headers)


def test_the_mock_refuses_bad_rate_limits():
    with MockOpenAIServer() as mock:
        with pytest.raises(ValueError, match="rate_limits.rpm"):
            mock.configure(rate_limits={"rpm": 0})
        with pytest.raises(ValueError, match="keys among"):
            mock.configure(rate_limits={"rps": 3})
        with pytest.raises(ValueError, match="rate_limits.headers"):
            mock.configure(rate_limits={"rpm": 60, "headers": "some"})
        with pytest.raises(ValueError, match="burst needs rpm"):
            mock.configure(rate_limits={"tpm": 60, "burst": 3})


def test_slow_start_then_halving_on_a_429_and_a_pause_until_retry_after():
    async def scenario() -> None:
        controller = RateController("e m", ceiling=32)
        assert controller.limit == START_WINDOW
        for _ in range(10):
            controller.observe(200, {})
        assert controller.limit == START_WINDOW + 10  # slow start: one slot per success
        for _ in range(3):  # three calls in flight when the first refusal comes
            await controller.__aenter__()
        controller.observe(429, {"retry-after": "0.3"})
        assert controller.limit == (START_WINDOW + 10) / 2 and controller.rate_limited == 1
        controller.observe(429, {"retry-after": "0.3"})  # one of those three: no new news
        assert controller.limit == (START_WINDOW + 10) / 2
        for _ in range(3):
            await controller.__aexit__()
        controller.observe(429, {"retry-after": "0.3"})  # the second of the three
        assert controller.limit == (START_WINDOW + 10) / 2
        controller.observe(429, {"retry-after": "0.3"})  # all three answered: a new refusal halves
        assert controller.limit == (START_WINDOW + 10) / 4
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with controller:
            waited = loop.time() - started
        assert waited >= 0.25, "no call was sent before Retry-After had passed"
        before = controller.limit
        controller.observe(200, {})
        assert before < controller.limit < before + 1  # past slow start: gentle increase
        grown = controller.limit
        controller.observe(200, {"x-ratelimit-remaining-requests": "0"})
        assert controller.limit == grown  # the account is used up: held, not grown
        summary = controller.summary()
        assert summary["rate_limited"] == 4 and summary["history"]["rows"]

    asyncio.run(scenario())


def test_the_window_bounds_calls_in_flight():
    async def scenario() -> int:
        controller = RateController("e m", ceiling=2)
        peak = 0

        async def call() -> None:
            nonlocal peak
            async with controller:
                peak = max(peak, controller.in_flight)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(call() for _ in range(20)))
        return peak

    assert asyncio.run(scenario()) == 2


def test_reset_durations_read_as_openai_writes_them():
    assert reset_seconds("1s") == 1.0
    assert reset_seconds("6m0s") == 360.0
    assert reset_seconds("20ms") == 0.02
    assert reset_seconds("0.5") == 0.5
    assert reset_seconds("soon") is None and reset_seconds(None) is None


def test_anthropics_rate_limit_headers_are_read_as_openais():
    """Anthropic names the count `anthropic-ratelimit-requests-remaining` and its reset an RFC 3339
    time: a success saying none is left holds the window and pauses calls until the reset."""
    now = datetime(2026, 12, 1, 6, 0, 0, tzinfo=UTC)
    assert reset_seconds("2026-12-01T06:00:30Z", now=now) == 30.0
    assert reset_seconds("2026-12-01T05:59:00Z", now=now) == 0.0

    async def scenario() -> None:
        controller = RateController("e m", ceiling=32)
        controller.observe(200, {})
        grown = controller.limit
        in_half_a_second = (datetime.now(UTC) + timedelta(seconds=0.5)).isoformat()
        # As the endpoint hands them on: under the standard names (`ResponseHeaders.hints`).
        controller.observe(
            200,
            HEADERS.hints(
                {
                    "anthropic-ratelimit-requests-remaining": "0",
                    "anthropic-ratelimit-requests-reset": in_half_a_second,
                }
            ),
        )
        assert controller.limit == grown, "the account is used up: held, not grown"
        assert 0.3 < controller.pause_left(time.monotonic()) <= 0.5

    asyncio.run(scenario())


def test_a_rate_limited_endpoint_costs_time_never_items(tmp_path, capsys):
    """60 items at concurrency 16 against 50 ms replies would ask ~300 requests a second of an
    endpoint allowing 20: every item completes, few calls are refused, and the controller's
    history is stored with the run and shown."""
    with MockOpenAIServer(latency_ms=50) as mock:
        mock.configure(rate_limits={"rpm": 1200})
        spec = openai_spec(tmp_path, mock.base_url, n=60, concurrency=16)
        store = tmp_path / "store"
        assert main(["run", str(spec), "--store", str(store), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        stats = mock.stats()
    assert summary["items"]["completed"] == 60 and summary["items"]["failed"] == 0
    refused = stats["by_status"].get("429", 0)
    assert refused <= 0.2 * stats["requests"], stats["by_status"]
    record = Store(store).read_run(summary["run_id"])
    stored = json.loads(record["rate_control"])
    assert stored["ceiling"] == 16 and stored["rate_limited"] == refused
    assert stored["history"]["columns"] == ["t", "limit", "in_flight", "rate_limited"]
    assert main(["show", summary["run_id"], "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert ("rate control" in shown) == bool(refused or stored["paused_s"])
    if refused:
        assert f"{refused} of {stats['requests']} answers 429" in shown
        assert f"window peak {round(stored['peak'], 1):g} final {round(stored['limit'], 1):g} of 16" in shown
        assert f"paused {stored['paused_s']:.1f} s" in shown
    assert main(["show", summary["run_id"], "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rate_control"]["responses"] == stats["requests"]


def _paced_run(
    tmp_path, capsys, n: int, account: dict, paced: dict, prompt: str = "{question}"
) -> tuple[dict, dict]:
    """`n` items at concurrency 8 against a mock allowing `account` (`rate_limits`), the target
    paced by its own `rate_limits: paced`: the run's summary and the mock's stats."""
    with MockOpenAIServer() as mock:
        mock.configure(rate_limits=account)
        target = {
            "kind": "openai",
            "base_url": mock.base_url,
            "model": f"paced-{'-'.join(paced)}",  # a controller of its own in this process
            "prompt": prompt,
            "rate_limits": paced,
        }
        spec = openai_spec(tmp_path, mock.base_url, n=n, concurrency=8, target=target)
        return assay_json(capsys, "run", spec, "--store", tmp_path / "s"), mock.stats()


def test_rate_limits_rpm_paces_the_calls(tmp_path, capsys):
    """An account allowing 10 calls a second (a bucket of 10), paced to 9: 15 calls over ~1.6 s,
    nothing refused; unpaced, the burst would have ~5 refused."""
    summary, stats = _paced_run(tmp_path, capsys, 15, {"rpm": 600}, {"rpm": 540})
    assert summary["items"]["completed"] == 15
    assert stats["by_status"] == {"200": 15}, "paced under the server's limit: nothing refused"


def test_rate_limits_tpm_paces_the_tokens(tmp_path, capsys):
    """Prompts of 64 words against an account allowing 39,000 tokens a minute (~10 of these calls
    a second, a bucket of ~10): paced to 36,000 — each call's estimate (its size, then corrected
    by its usage) — 15 calls over ~1.6 s, nothing refused; unpaced, the burst would have ~5."""
    prompt = "{question} " + "please " * 60
    summary, stats = _paced_run(tmp_path, capsys, 15, {"tpm": 39000}, {"tpm": 36000}, prompt)
    assert summary["items"]["completed"] == 15
    assert stats["by_status"] == {"200": 15}, "paced under the server's token limit: nothing refused"
    assert summary["rate_control"]["tpm"] == 36000


def test_rate_limits_need_a_limit(tmp_path, mock):
    target = {"kind": "openai", "base_url": mock.base_url, "model": "m", "rate_limits": {}}
    spec = openai_spec(tmp_path, mock.base_url, target=target)
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert not (tmp_path / "s").exists()


def test_a_later_run_of_the_process_stores_its_own_counts(tmp_path, capsys):
    """Runs one after another in one process share the endpoint's controller (its window), but
    each stores its own answers and refusals, not those of the runs before it."""
    with MockOpenAIServer(latency_ms=20) as mock:
        mock.configure(rate_limits={"rpm": 600})
        # 14 calls against a bucket of 10 at 8 in flight: a few refused, whatever the machine's load.
        spec = openai_spec(tmp_path, mock.base_url, n=14, concurrency=8)
        store = str(tmp_path / "s")
        assert main(["run", str(spec), "--store", store, "--json"]) == 0
        first = json.loads(capsys.readouterr().out)["rate_control"]
        mock.configure(rate_limits=None)
        assert main(["run", str(spec), "--store", store, "--json"]) == 0
        second = json.loads(capsys.readouterr().out)["rate_control"]
    assert first["rate_limited"] > 0
    assert (second["responses"], second["rate_limited"]) == (14, 0)


# -- the pace: a rate learned from what the provider says and does (issue 25) ----------------------

LIMIT = {"x-ratelimit-limit-requests": "600"}  # as the endpoint hands it on (standard name)


def test_no_pace_until_the_provider_refuses():
    pace = Pace()
    for i in range(50):
        pace.answered(True, {}, now=i / 100)
    assert pace.rpm is None, "an endpoint that never refuses is never paced"
    fresh = Pace()
    fresh.answered(False, {}, now=0.0)
    fresh.refused(now=0.0)
    assert fresh.rpm is None, "nothing admitted and no limit said: nothing to pace to"


def test_a_refusal_paces_below_what_the_provider_admitted():
    """20 calls admitted in the last second, then a refusal: the pace is 0.85 x 20 a second."""
    pace = Pace()
    for i in range(40):
        pace.answered(True, {}, now=i / 20)  # 20 a second for 2 s
    pace.answered(False, {}, now=2.0)
    pace.refused(now=2.0)
    assert pace.per_s == pytest.approx(PACE_DECREASE * 20, rel=0.06)


def test_the_limit_a_refusal_announces_caps_the_pace():
    """A burst admitted 200 calls a second before the first 429, which says 600 a minute: the
    pace is under 10 a second, whatever was admitted."""
    pace = Pace()
    for i in range(20):
        pace.answered(True, {}, now=i / 200)
    pace.answered(False, LIMIT, now=0.1)
    pace.refused(now=0.1)
    assert pace.announced == 600 and pace.rpm == pytest.approx(600 * PACE_DECREASE)


def test_the_pace_grows_only_while_calls_wait_for_it_and_faster_the_longer_none_is_refused():
    pace = Pace()
    for i in range(20):
        pace.answered(True, {}, now=i / 20)
    pace.answered(False, {}, now=1.0)
    pace.refused(now=1.0)
    start = pace.per_s
    for i in range(1, 11):  # a second of answers while no call waited for its turn: no growth
        pace.answered(True, {}, now=1.0 + i / 10)
    assert pace.per_s == start
    grown = []
    for second in range(1, 5):
        pace.bound = True
        pace.answered(True, {}, now=2.0 + second)
        grown.append(pace.per_s)
    steps = [b - a for a, b in itertools.pairwise([start, *grown])]
    assert all(later > earlier > 0 for earlier, later in itertools.pairwise(steps)), steps
    pace.answered(True, LIMIT, now=7.0)
    assert pace.per_s == 10, "never past the limit the provider announces"


def test_a_pace_under_a_lower_declared_rpm_does_not_grow():
    """Calls waiting for the turns of `rate_limits.rpm` say nothing of a higher learned pace: it
    would grow untested."""
    controller = RateController("e m", ceiling=8, rpm=60)
    controller.pace.answered(False, {"x-ratelimit-limit-requests": "6000"}, now=0.0)
    controller.pace.refused(now=0.0)
    controller.waited_for_turn()
    assert not controller.pace.bound
    alone = RateController("e m", ceiling=8)
    alone.pace.answered(False, {"x-ratelimit-limit-requests": "6000"}, now=0.0)
    alone.pace.refused(now=0.0)
    alone.waited_for_turn()
    assert alone.pace.bound


def test_a_provider_with_a_small_burst_refuses_few_calls(tmp_path, capsys):
    """An account allowing 10 calls a second, only 3 at once, and saying so only on its 429s,
    answering in 20 ms: at concurrency 8 one slot alone would make 50 calls a second, so a window
    of calls in flight cannot hold it (half the calls were refused); paced to the rate the
    provider admits, few are."""
    with MockOpenAIServer(latency_ms=20) as mock:
        mock.configure(rate_limits={"rpm": 600, "burst": 3, "headers": "refusals"})
        spec = openai_spec(tmp_path, mock.base_url, n=40, concurrency=8)
        assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        stats = mock.stats()
    assert summary["items"]["completed"] == 40
    refused = stats["by_status"].get("429", 0)
    assert refused <= 0.2 * stats["requests"], stats["by_status"]
    rate = summary["rate_control"]
    assert rate["announced_rpm"] == 600 and 0 < rate["learned_rpm"] <= 600
    assert main(["show", summary["run_id"], "--store", str(tmp_path / "s")]) == 0
    assert f"pace learned {rate['learned_rpm']:g} rpm" in capsys.readouterr().out


def test_a_pace_long_unrefused_lets_go_instead_of_overflowing():
    """A process that runs on for many minutes after its last refusal (the step doubling every
    second would pass 2 ** 1024 after 17 minutes): the pace lets go once far past the rate it was
    cut to, and an announced limit still holds it."""
    pace = Pace()
    for i in range(20):
        pace.answered(True, {}, now=i / 20)
    pace.answered(False, {}, now=1.0)
    pace.refused(now=1.0)
    for second in range(2, 40):
        pace.bound = True
        pace.answered(True, {}, now=float(second))
    pace.bound = True
    pace.answered(True, {}, now=5000.0)
    assert pace.rpm is None, "far past the refused rate: unpaced again"
    held = Pace()
    held.answered(True, {}, now=0.0)
    held.answered(False, LIMIT, now=0.1)
    held.refused(now=0.1)
    held.bound = True
    held.answered(True, {}, now=5000.0)
    assert held.rpm == pytest.approx(600), "the announced limit caps the pace, however long unrefused"
