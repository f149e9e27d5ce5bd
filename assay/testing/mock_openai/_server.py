"""`MockOpenAIServer`, the mock beside synchronous code, and `main`, the mock as a process."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path
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


async def _serve(
    port: int, latency_ms: float, answers: dict[str, str | list[str]] | None = None, echo: bool = True
) -> None:
    mock = MockOpenAI(latency_ms=latency_ms, answers=answers, echo=echo)
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
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EPILOG,
    )
    parser.add_argument("--port", type=int, default=8000, help="port to listen on; 0 picks a free one")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay added to every chat reply")
    parser.add_argument(
        "--answers",
        type=Path,
        help='a JSON file: {"<last user message>": "<reply>", ..., "*": "<reply to any other>"}',
    )
    parser.add_argument(
        "--no-echo", action="store_true", help='answer "" (not the question echoed) when no answer matches'
    )
    args = parser.parse_args(argv)
    answers = None
    if args.answers is not None:
        try:
            answers = json.loads(args.answers.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            parser.error(f"--answers {args.answers}: {exc}")
    asyncio.run(_serve(args.port, args.latency_ms, answers, echo=not args.no_echo))


_EPILOG = """\
What it answers: answers[<last user message>], else answers["*"], else the last user message
echoed (or "" with --no-echo). Its accuracy is yours to set: answer right the questions you want
right, and let the rest get "*" (a wrong reply). A list of replies is given in turn, cycling
({"Grade it.": ["Score: 7", "Score: 9"]}): a judge that answers differently each time it is asked.

Two "models" to compare: two mocks on two ports, each with its own answers file, e.g. one right
on every question and one right on 80 %, and a spec per port (`base_url:
http://127.0.0.1:PORT/v1`); then `assay compare RUN_A --candidate RUN_B`.

While it runs, POST /_mock/config changes any setting (JSON; the keys given replace those set):
  curl -s localhost:8000/_mock/config -d '{"answers": {"What is 2+2?": "4", "*": "no idea"}}'
Keys: latency_ms, token_delay_ms, answers, echo, faults (error statuses, slow or dropped
replies), rate_limits. Each is described in `assay.testing.mock_openai`'s docstring."""
