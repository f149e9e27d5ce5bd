"""The progress a run reports, driven by real runs against the mock model server: what the last
items wait on, and items/s only over the items this process ran."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest

from assay.cli import main
from assay.run import progress
from tests.conftest import REPO, mock_target, openai_spec

JUDGE_REPLY = '{"score": 1, "explanation": "right"}'


def judged_spec(tmp_path, base_url: str, n: int):
    judge = {
        "kind": "llm_judge",
        "name": "judge",
        "base_url": base_url,
        "model": "mock-judge",
        "rubric": "Grade {output} for {input}",
        "max_retries": 5,
    }
    return openai_spec(
        tmp_path,
        base_url,
        n=n,
        target=mock_target(base_url, max_retries=3),
        scorers=[{"kind": "exact_match", "name": "exact"}, judge],
        fail_on_scorer_error_rate=1,
    )


def answered(mock, n: int, faults: list[dict]) -> None:
    answers = {f"What is {i} + {i}?": str(2 * i) for i in range(n)}
    mock.configure(answers={**answers, "*": JUDGE_REPLY}, faults=faults)


def test_the_last_items_say_what_they_wait_on(tmp_path, mock):
    n = 4
    answered(
        mock,
        n,
        [
            {"status": 500, "times": 2, "retry_after": 1, "match": "for What is 2 + 2?"},  # the judge, twice
            {"status": 429, "times": 1, "retry_after": 1, "match": "What is 1 + 1?"},  # the target's call
        ],
    )
    lines: list[str] = []
    with progress.also(progress.Logged(lines.append)):
        assert (
            main(
                [
                    "run",
                    str(judged_spec(tmp_path, mock.base_url, n)),
                    "--store",
                    str(tmp_path / "s"),
                    "--quiet",
                ]
            )
            == 0
        )
    # (A target call sent after the refusal would wait out the endpoint's pause: not the point here.)
    waits = [line for line in lines if line.startswith("waiting: ") and "pause" not in line]
    assert sorted(waits) == [
        "waiting: judge retry 1/5 in 1 s",
        "waiting: judge retry 2/5 in 1 s",
        "waiting: target rate-limited, retry 1 in 1 s",
    ], lines
    assert lines[-1].startswith("progress: 4 of 4 items (100.0%) · 0 failed")


def test_a_call_held_by_the_endpoints_pause_says_so(tmp_path, mock):
    """q0 is refused with `Retry-After: 3`: the endpoint pauses. q1's slow answer ends its item
    after that, and q2, starting then, waits out the pause: it says so."""
    answered(
        mock,
        3,
        [
            {"status": 429, "retry_after": 3, "match": "What is 0 + 0?"},
            {"delay_ms": 200, "match": "What is 1 + 1?"},
        ],
    )
    spec = openai_spec(tmp_path, mock.base_url, n=3, concurrency=2)
    lines: list[str] = []
    with progress.also(progress.Logged(lines.append)):
        assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--quiet"]) == 0
    assert "waiting: target rate-limited, retry 1 in 3 s" in lines, lines
    assert any(re.fullmatch(r"waiting: mock-1 rate-limit pause in [123] s", line) for line in lines), lines


@pytest.mark.slow
def test_the_bar_on_a_terminal_names_the_judge_retry_and_shows_no_early_rate(tmp_path, mock):
    """`assay run` on a terminal (a pseudo-terminal here): the bar's line while the last item's
    judge waits to retry names it; no items/s is drawn in the run's first seconds."""
    n = 3
    answered(mock, n, [{"status": 500, "times": 1, "retry_after": 3, "match": "for What is 2 + 2?"}])
    spec = judged_spec(tmp_path, mock.base_url, n)
    controller, terminal = pty.openpty()
    env = {**os.environ, "DO_NOT_TRACK": "1", "COLUMNS": "200", "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(tmp_path / "s")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
        cwd=REPO,
        env=env,
    )
    os.close(terminal)
    drawn = b""
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the process closed its end
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(controller)
        code = process.wait(timeout=60)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.decode("utf-8", "replace"))
    assert code == 0, text
    assert re.search(r"2/3 .*waiting: judge retry 1/5 in [123] s", text), text
    assert "items/s" not in text, "3 items in about 3 s: too few for a rate"


class _Told:
    """A reporter keeping what it is told of each item (outcome, cached)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bool]] = []

    def started(self, total: int, already_done: int) -> None:
        pass

    def item_done(self, outcome: str, cost_usd: float | None = None, cached: bool = False) -> None:
        self.items.append((outcome, cached))

    def batches(self, label, counts) -> None:
        pass

    def waiting(self, wait, begun: bool) -> None:
        pass


def test_items_answered_from_the_cache_are_no_part_of_the_rate(tmp_path, mock):
    spec = openai_spec(
        tmp_path, mock.base_url, n=6, target=mock_target(mock.base_url, cache=True, temperature=0)
    )
    told = [_Told(), _Told()]
    for reporter in told:
        with progress.also(reporter):
            assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--quiet"]) == 0
    assert told[0].items == [("completed", False)] * 6
    assert told[1].items == [("completed", True)] * 6, "the second run's every call was a cache hit"

    lines: list[str] = []
    now = [0.0]
    logged = progress.Logged(lines.append, every_s=0.0, clock=lambda: now[0])
    logged.started(20, 0)
    for i in range(20):  # 10 cached in 1 s, then 10 sent over 10 s
        now[0] += 0.1 if i < 10 else 1.0
        logged.item_done("completed", cached=i < 10)
    assert lines[-1] == "progress: 20 of 20 items (100.0%) · 0 failed · 11.0 s · 0.9 items/s", lines
