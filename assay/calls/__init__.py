"""Calls: every model call Assay makes — sent, retried, measured, priced, captured, cached.

One concern a module:

    endpoint        `Endpoint`: the spec model of every HTTP endpoint a spec names (`base_url`,
                    key, timeout, retries, header names; `rate_limits` for a `ModelEndpoint`)
    http            the one HTTP layer: retried statuses, Retry-After, timeouts, failure wording
    headers         `ResponseHeaders`: where a reply's request id and rate-limit hints are read
    chat            `ChatClient`: the OpenAI-compatible chat client (targets and judges alike)
    reply           `ChatReply`: a successful chat completion and how it went
    wire            `ChatAPI`: what a chat API is on the wire (bodies, usage, streams assembled)
    wire_openai     OpenAI's chat completions on the wire
    wire_anthropic  Anthropic's Messages API on the wire
    responses       OpenAI's Responses API on the wire (`api: responses`)
    apis            the chat APIs by name (a judge's `provider`)
    messages        a conversation's parts in one vocabulary for both APIs (`Turn`, `ToolCall`)
    media           images and documents in a turn: their type from their bytes, size limits, hash
    conversation    turns on each provider's wire
    finish          how a reply ended (`Finish`), and which endings are no answer at all
    accounting      tokens and money: prices, accounting records, ledgers, the budget
    capture         the request sidecar: each call as redacted `start / attempt / end` records
    request_codec   those records as JSONL: `RequestRecord`, written and checked
    response_cache  the opt-in response cache kept in the store
    batch           batch mode: provider batch APIs behind one `ask` per request (`Batcher`)
    batch_apis      the providers' batch APIs: Anthropic's Message Batches, OpenAI's Batch API
    batch_mode      around a batcher: the run's batch ledger, the budget hold, batch prices
    aimd            `RateController`: the adaptive window of calls in flight to one endpoint
    rate            which controller an (endpoint, model) gets: the process's, or a fleet's
    fleet           the fleet's window held by a host, members leasing shares of it
    fleet_dask      the host on a Dask scheduler (imported only when sharing through one)
    fleet_prefect   the host on a Prefect server's global concurrency limits (`ASSAY_RATE_SHARE=prefect`)
    budget_share    a `--dask` run's budget: the run's spend kept by the scheduler, each worker's view
    keys            API keys: where a spec says a key comes from, read when a client is made
    pinning         `model_pin_problem`: why a model name is not pinned to an exact version
    transport       the HTTP library under the model clients: pyreqwest, on a thread of its own
    waits           a call's waits between attempts, told to the progress reporter
"""

from assay.calls.accounting import (
    Accounting,
    Budget,
    BudgetColumns,
    Ledger,
    Price,
    PriceTable,
    Usage,
    current_ledger,
    parse_budget,
    token_columns,
)
from assay.calls.capture import (
    CaptureManifest,
    CaptureSettings,
    Operation,
    Recorder,
    Redactor,
    Scope,
    carry_forward,
    secrets_of,
    stored_records,
)
from assay.calls.chat import ChatClient
from assay.calls.endpoint import ENDPOINT_SETTINGS, BaseURL, Endpoint, ModelEndpoint, RateLimits
from assay.calls.finish import Finish, not_an_answer
from assay.calls.http import (
    RETRY_STATUSES,
    AttemptFailed,
    HttpURL,
    Peer,
    ResponseHeaders,
    ResponseHook,
    RetryPolicy,
    is_timeout,
    request_id,
    retry_after,
)
from assay.calls.messages import ToolCall
from assay.calls.reply import ChatReply
from assay.calls.request_codec import RequestRecord, read_jsonl, validate_jsonl, write_jsonl
from assay.calls.response_cache import ResponseCache, check_cache

__all__ = [
    "ENDPOINT_SETTINGS",
    "RETRY_STATUSES",
    "Accounting",
    "AttemptFailed",
    "BaseURL",
    "Budget",
    "BudgetColumns",
    "CaptureManifest",
    "CaptureSettings",
    "ChatClient",
    "ChatReply",
    "Endpoint",
    "Finish",
    "HttpURL",
    "Ledger",
    "ModelEndpoint",
    "Operation",
    "Peer",
    "Price",
    "PriceTable",
    "RateLimits",
    "Recorder",
    "Redactor",
    "RequestRecord",
    "ResponseCache",
    "ResponseHeaders",
    "ResponseHook",
    "RetryPolicy",
    "Scope",
    "ToolCall",
    "Usage",
    "carry_forward",
    "check_cache",
    "current_ledger",
    "is_timeout",
    "not_an_answer",
    "parse_budget",
    "read_jsonl",
    "request_id",
    "retry_after",
    "secrets_of",
    "stored_records",
    "token_columns",
    "validate_jsonl",
    "write_jsonl",
]
