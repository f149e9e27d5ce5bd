"""Probe: how fast do three HTTP client stacks drive the mock OpenAI server?

Starts the mock in a subprocess (its own core) with a fixed latency, then makes `--n`
chat-completion POSTs at `--concurrency` with

    (a) a bare aiohttp ClientSession with TCPConnector(limit=concurrency),
    (b) httpx.AsyncClient over httpx_aiohttp.AiohttpTransport,
    (c) a plain httpx.AsyncClient with Limits(max_connections=concurrency),
    (d) Assay's own `assay.calls.chat.ChatClient` (outside a run: no ledger, no capture),
    (e) a bare pyreqwest client (what `ChatClient` stands on, `assay/calls/transport.py`),

and prints requests per second and client CPU per request for each: the whole process's, and the
event loop's thread's alone (pyreqwest does its HTTP work on a thread of its own, outside the GIL;
the loop's thread is what bounds a run). With latency L ms and
concurrency C the ceiling is C / L requests per ms (5,000 req/s at the defaults), so a stack
that falls short of it is paying for its own overhead.

Run from the repository root: `.venv/bin/python benchmarks/_transport_probe.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx
from _common import bare_aiohttp_loop, chat_body, start_mock_subprocess, stop_mock_subprocess
from httpx_aiohttp import AiohttpTransport

Loop = Callable[[str, int, int], Awaitable[float]]


async def httpx_loop(client: httpx.AsyncClient, base_url: str, n: int, concurrency: int) -> float:
    """Make `n` chat-completion POSTs through an httpx client, `concurrency` at a time.

    Args:
        client: The client; closed by the caller.
        base_url: The mock's base URL, ending in `/v1`.
        n: Number of requests.
        concurrency: Requests in flight at once.

    Returns:
        Wall-clock seconds from the first request to the last reply.
    """
    url = f"{base_url}/chat/completions"
    body = chat_body()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            resp = await client.post(url, content=body, headers=headers)
            if resp.status_code != 200:
                raise RuntimeError(f"mock answered {resp.status_code}")

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
    return time.perf_counter() - start


async def httpx_aiohttp_transport(base_url: str, n: int, concurrency: int) -> float:
    """Variant (b): httpx.AsyncClient over httpx_aiohttp.AiohttpTransport."""
    transport = AiohttpTransport(limits=httpx.Limits(max_connections=concurrency))
    async with httpx.AsyncClient(transport=transport) as client:
        return await httpx_loop(client, base_url, n, concurrency)


async def httpx_native(base_url: str, n: int, concurrency: int) -> float:
    """Variant (c): httpx.AsyncClient with its own (httpcore) transport."""
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency)) as client:
        return await httpx_loop(client, base_url, n, concurrency)


async def assay_chat_client(base_url: str, n: int, concurrency: int) -> float:
    """Variant (d): Assay's chat client, `concurrency` workers each calling `complete`."""
    from assay.calls.chat import ChatClient
    from assay.calls.endpoint import Endpoint

    client = ChatClient(Endpoint(base_url=base_url, timeout=60, max_retries=2), concurrency=concurrency)
    body = json.loads(chat_body())
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await client.complete(body)

    try:
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
        return time.perf_counter() - start
    finally:
        await client.aclose()


async def bare_pyreqwest(base_url: str, n: int, concurrency: int) -> float:
    """Variant (e): a bare pyreqwest client, `concurrency` workers."""
    from pyreqwest.client import ClientBuilder

    url = f"{base_url}/chat/completions"
    body = chat_body()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    remaining = n
    async with ClientBuilder().max_connections(concurrency).default_headers(headers).build() as client:

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                response = await client.post(url).body_bytes(body).build().send()
                await response.bytes()
                if response.status != 200:
                    raise RuntimeError(f"mock answered {response.status}")

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
        return time.perf_counter() - start


VARIANTS: dict[str, Loop] = {
    "(a) bare aiohttp": bare_aiohttp_loop,
    "(b) httpx + AiohttpTransport": httpx_aiohttp_transport,
    "(c) plain httpx": httpx_native,
    "(d) assay ChatClient": assay_chat_client,
    "(e) bare pyreqwest": bare_pyreqwest,
}


async def measure(loop: Loop, base_url: str, n: int, concurrency: int) -> tuple[float, float, float]:
    """Run one variant once (after a warm-up that opens the connections).

    Args:
        loop: The variant.
        base_url: The mock's base URL.
        n: Number of requests.
        concurrency: Requests in flight at once.

    Returns:
        Requests per second, and client CPU microseconds per request: the process's, and the
        event loop's thread's.
    """
    await loop(base_url, min(n, 10 * concurrency), concurrency)
    cpu, thread = time.process_time(), time.thread_time()
    seconds = await loop(base_url, n, concurrency)
    return n / seconds, (time.process_time() - cpu) / n * 1e6, (time.thread_time() - thread) / n * 1e6


def main() -> None:
    """Parse the options, run every variant `--rounds` times, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="abcde", help="the variants to run, by letter (default abcde)")
    args = parser.parse_args()

    proc, base_url = start_mock_subprocess(args.latency_ms)
    try:
        print(
            f"mock at {base_url}, latency {args.latency_ms:g} ms, n={args.n}, "
            f"concurrency={args.concurrency}, rounds={args.rounds}"
        )
        variants = {name: loop for name, loop in VARIANTS.items() if name[1] in args.only}
        results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
        # Rounds interleave the variants so that drift on the machine hits them all alike.
        for _ in range(args.rounds):
            for name, loop in variants.items():
                results[name].append(asyncio.run(measure(loop, base_url, args.n, args.concurrency)))
        for name, runs in results.items():
            rates = ", ".join(f"{rate:,.0f}" for rate, _, _ in runs)
            print(
                f"{name:30s} median {statistics.median(r for r, _, _ in runs):7,.0f} req/s  "
                f"(runs: {rates})  client CPU {statistics.median(c for _, c, _ in runs):5.0f} us/req, "
                f"loop's thread {statistics.median(t for _, _, t in runs):5.0f} us/req"
            )
    finally:
        stop_mock_subprocess(proc)


if __name__ == "__main__":
    main()
