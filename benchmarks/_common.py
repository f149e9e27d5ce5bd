"""Helpers shared by the benchmarks: the mock server in its own process, and a bare aiohttp load loop.

The mock runs in a subprocess so that it gets a core of its own and the client under test is
not measured together with the server's work.
"""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp

REPO_ROOT = Path(__file__).resolve().parents[1]
LISTENING = "listening on "


def start_mock_subprocess(latency_ms: float, timeout_s: float = 20.0) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m assay.testing.mock_openai` on a free port and wait until it listens.

    Args:
        latency_ms: Latency the mock adds to every chat reply.
        timeout_s: How long to wait for the "listening on" line.

    Returns:
        The process and the base URL it serves (`http://127.0.0.1:<port>/v1`). Stop it with
        `stop_mock_subprocess`.

    Raises:
        RuntimeError: if the process exits before it listens.
        TimeoutError: if it does not listen within `timeout_s` (the process is killed).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.testing.mock_openai", "--port", "0", "--latency-ms", str(latency_ms)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    # readline() cannot time out, so a thread reads and the deadline is kept on the queue.
    lines: queue.Queue[str | None] = queue.Queue()

    def read_until_listening() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(LISTENING):
                lines.put(line)
                return
        lines.put(None)

    threading.Thread(target=read_until_listening, daemon=True).start()
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        stop_mock_subprocess(proc)
        raise TimeoutError(f"the mock did not print {LISTENING!r} within {timeout_s} s") from None
    if line is None:
        raise RuntimeError(f"the mock exited with status {proc.wait()} before listening")
    return proc, line[len(LISTENING) :].strip()


def stop_mock_subprocess(proc: subprocess.Popen[str], timeout_s: float = 5.0) -> None:
    """Terminate a mock started by `start_mock_subprocess`, killing it if it does not exit in time.

    Args:
        proc: The process.
        timeout_s: How long to wait after SIGTERM before SIGKILL.
    """
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def chat_body(model: str = "mock-1") -> bytes:
    """A small chat-completion request body, encoded once so the loop measures transport only.

    Args:
        model: The `model` field.

    Returns:
        The JSON body.
    """
    return json.dumps(
        {
            "model": model,
            "messages": [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "What is the capital of France?"},
            ],
        }
    ).encode()


async def bare_aiohttp_loop(base_url: str, n: int, concurrency: int, model: str = "mock-1") -> float:
    """Make `n` chat-completion POSTs with a bare aiohttp session, `concurrency` at a time.

    Args:
        base_url: The mock's base URL, ending in `/v1`.
        n: Number of requests.
        concurrency: Requests in flight at once, and the connector's connection limit.
        model: The `model` field of each request.

    Returns:
        Wall-clock seconds from the first request to the last reply (session setup excluded).

    Raises:
        RuntimeError: if any reply is not 200.
    """
    url = f"{base_url}/chat/completions"
    body = chat_body(model)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    remaining = n

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal remaining
        # A fixed pool of workers draining a counter costs less than one task per request,
        # which keeps the client's own overhead out of the figure.
        while remaining > 0:
            remaining -= 1
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"mock answered {resp.status}")

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(min(concurrency, n))))
        return time.perf_counter() - start
