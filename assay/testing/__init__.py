"""Testing: the servers the tests and benchmarks start, each real HTTP on 127.0.0.1.

mock_openai   `MockOpenAIServer`: an OpenAI-compatible chat server with latency, answers and
              a fault queue (statuses, Retry-After, slow and broken replies);
              `python -m assay.testing.mock_openai` serves it from its own process
harness       `HarnessServer`: a reference harness of the `http_agent` protocol
scripted      `ScriptedServer`: OpenAI- and Anthropic-compatible, on uvicorn (FastAPI), each reply
              scripted by its test and every body checked against the official SDKs' types
              (imported by tests only: its packages are the `dev` extra's)
hub           `LocalHub`: the Hugging Face Hub's dataset routes (FastAPI on uvicorn), repositories
              in memory, for `HF_ENDPOINT` (imported by tests only)
agent_models  `ScriptedModels`: a scripted Responses / Messages API server (FastAPI on uvicorn)
              for the real Codex and Claude Code CLIs in the sandbox tests
mock_anthropic  a mock of Anthropic's Messages API (aiohttp, like mock_openai)
rate_limit    the mocks' rate limits: rpm, tpm and requests in flight as token buckets
_openai_batches  OpenAI's Batch API (`/v1/files`, `/v1/batches`) as the mock speaks it
_anthropic_batches  a message batch as mock_anthropic keeps and shows it
_sse          Server-Sent Events as the mocks stream them (and cut them mid-way)
_background   what they share: an aiohttp app served from a background thread and loop
_uvicorn      `UvicornThread`: the FastAPI servers (scripted, hub) on uvicorn in a thread
s3            a real S3 API server (moto's `ThreadedMotoServer`)
dask_cluster  a real Dask cluster: `dask scheduler` and `dask worker` processes
dask_scheduler  a real `dask scheduler` process, for sharing rate controllers through one
simulate      simulated paired scores with a known difference, for the statistics' simulations
"""

from assay.testing.harness import DEFAULT_CAPABILITIES, HarnessServer, ReferenceHarness
from assay.testing.mock_openai import BODIES_KEPT, MockOpenAI, MockOpenAIServer

__all__ = [
    "BODIES_KEPT",
    "DEFAULT_CAPABILITIES",
    "HarnessServer",
    "MockOpenAI",
    "MockOpenAIServer",
    "ReferenceHarness",
]
