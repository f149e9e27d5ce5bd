"""`MockOpenAIServer`, the mock beside synchronous code, and `main`, the mock as a process."""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import Any

from assay.testing._background import HOST, MockServer
from assay.testing.mock_openai._app import MockOpenAI


class MockOpenAIServer(MockServer[MockOpenAI]):
    """`MockOpenAI` run in a background thread with its own event loop; a context manager.

    Args:
        port: The port to bind on 127.0.0.1; 0 picks a free one.
        **settings: The mock's initial settings, `MockOpenAI`'s keyword arguments (`latency_ms`,
            `answers`, `faults`, `echo`).
    """

    def __init__(self, *, port: int = 0, **settings: Any) -> None:
        super().__init__(MockOpenAI(**settings), port=port, name="mock-openai")

    def batch_stats(self) -> dict[str, Any]:
        """The Batch API's counters (`assay.testing._openai_batches`)."""
        return self.call(self.app.batches.stats)


async def _serve(port: int, latency_ms: float) -> None:
    mock = MockOpenAI(latency_ms=latency_ms)
    bound = await mock.start(port)
    print(f"listening on http://{HOST}:{bound}/v1", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    try:
        await stopped.wait()
    finally:
        await mock.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve the mock in the foreground until SIGINT or SIGTERM.

    Args:
        argv: Command-line arguments; `sys.argv[1:]` when None.
    """
    parser = argparse.ArgumentParser(
        prog="python -m assay.testing.mock_openai",
        description="Mock OpenAI chat-completions server on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8000, help="port to listen on; 0 picks a free one")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay added to every chat reply")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.port, args.latency_ms))
