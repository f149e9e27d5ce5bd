"""Shared fixtures: an isolated Prefect home, a mock model server, spec files and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.testing.harness import HarnessServer
from assay.testing.mock_anthropic import MockAnthropicServer
from assay.testing.mock_openai import MockOpenAIServer
from assay.testing.s3 import S3Server

REPO = Path(__file__).resolve().parent.parent
_HEAVY = ("docker", "prefect", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs Docker, a Prefect server or Chromium is slow too: `-m "not slow"` leaves
    it out without every such test saying so twice."""
    for item in items:
        if any(item.get_closest_marker(name) for name in _HEAVY):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _isolated_prefect(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never touch the user's PREFECT_HOME, never report telemetry, never see an API URL."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.pop("PREFECT_API_URL", None)
    os.environ.pop("ASSAY_STORE", None)


@pytest.fixture(scope="session")
def mock_server() -> Iterator[MockOpenAIServer]:
    with MockOpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def analysts_store(tmp_path_factory: pytest.TempPathFactory, mock_server: MockOpenAIServer) -> Path:
    """The store docs/analysts.md's snippets run against (tests/house/test_analysts_doc.py builds it),
    built once: read it, or copy it before writing to it."""
    from tests.house.test_analysts_doc import build_store

    return build_store(tmp_path_factory.mktemp("analysts"), mock_server)


@pytest.fixture(scope="session")
def harness_server() -> Iterator[HarnessServer]:
    """The reference harness (tests/harness_server.py) on 127.0.0.1, one for the session."""
    with HarnessServer() as server:
        yield server


@pytest.fixture
def harness(harness_server: HarnessServer) -> HarnessServer:
    """The session's reference harness, reset for this test."""
    harness_server.reset()
    return harness_server


@pytest.fixture
def mock(mock_server: MockOpenAIServer) -> MockOpenAIServer:
    """The session's mock server, reset for this test."""
    mock_server.reset()
    mock_server.configure(latency_ms=0, answers={}, faults=[])
    return mock_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A real S3 API server (moto) on 127.0.0.1 with the bucket `evals`, one for the session:
    each test keeps to a prefix of its own (its name)."""
    with S3Server(bucket="evals") as server:
        yield server


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The session's S3 server, its variables in this process's environment (subprocesses
    inherit them)."""
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    return s3_server


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[MockAnthropicServer]:
    with MockAnthropicServer() as server:
        yield server


@pytest.fixture
def claude(anthropic_server: MockAnthropicServer) -> MockAnthropicServer:
    """The session's Anthropic Messages API mock, reset for this test."""
    anthropic_server.reset()
    return anthropic_server


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_spec(folder: Path, **spec: Any) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def arithmetic_rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]


def mock_target(base_url: str, **options: Any) -> dict[str, Any]:
    """An openai target against the mock server (model `mock-1`, prompt `{question}`), plus `options`."""
    return {"kind": "openai", "base_url": base_url, "model": "mock-1", "prompt": "{question}", **options}


def openai_spec(folder: Path, base_url: str, n: int = 10, **overrides: Any) -> Path:
    """A spec over `n` arithmetic rows against the mock server, with two scorers."""
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    spec: dict[str, Any] = {
        "name": "arith",
        "dataset": {"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        "target": mock_target(base_url),
        "scorers": [
            {"kind": "exact_match", "name": "exact"},
            {"kind": "regex", "name": "digits", "pattern": "\\d+"},
        ],
        "concurrency": 4,
    }
    spec.update(overrides)
    return write_spec(folder, **spec)


def paced_spec(folder: Path, n: int) -> Path:
    """`n` items through tests/helpers/commit_signals.py's target, 4 at a time, each waiting
    `ASSAY_TEST_DELAY_S` (default 20 ms), scored by exact match."""
    rows = [{"id": f"q{i}", "input": f"q{i}", "expected": f"q{i}"} for i in range(n)]
    write_jsonl(folder / "data.jsonl", rows)
    return write_spec(
        folder,
        name="paced",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "tests.helpers.commit_signals:answer"},
        scorers=[{"kind": "exact_match"}],
        concurrency=4,
    )


def run_assay(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The `assay` command in a subprocess, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )


def start_assay(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The `assay` command in a subprocess (stdout and stderr piped), `env` over this environment."""
    return subprocess.Popen(
        [sys.executable, "-m", "assay.cli", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_run(spec: Path, store: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`assay run --quiet` in a subprocess, `env` over this environment."""
    return start_assay("run", str(spec), "--store", str(store), "--quiet", env=env)


def wait_for(
    condition: Any, what: str, process: subprocess.Popen[str] | None = None, timeout: float = 60
) -> None:
    """Poll `condition()` until it is true; fail naming `what` after `timeout` s, or at once if
    `process` ended meanwhile."""
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended before {what}: {process.stderr.read()!r}")
        assert time.monotonic() < deadline, f"not {what} within {timeout} s"
        time.sleep(0.05)


def start_run_until_committed(
    spec: Path, store: Path, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`assay run` in a subprocess, returned once it has committed its first part (still running)."""
    process = start_run(spec, store, env)
    wait_for(
        lambda: list((store / "items").glob("run_id=*/part-*.parquet")),
        "a part was committed",
        process,
        timeout,
    )
    return process


def only_run_id(store: Path) -> str:
    (partition,) = (store / "runs").glob("run_id=*")
    return partition.name.removeprefix("run_id=")


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[Any]:
    """The scripted SDK-checked server on uvicorn (`assay.testing.scripted`), one per module."""
    from assay.testing.scripted import ScriptedServer  # FastAPI and the SDKs: only where used

    with ScriptedServer() as server:
        yield server


@pytest.fixture
def scripted(scripted_server: Any) -> Iterator[Any]:
    """The scripted server, reset; every request Assay sent it passed the SDK's types."""
    scripted_server.reset()
    yield scripted_server
    assert scripted_server.problems == []
