"""A mock OpenAI-compatible chat-completions server, for tests and benchmarks.

It listens on a real socket at 127.0.0.1 and is built on `aiohttp.web` with a deliberately lean
handler (stdlib `json`, no validation models, no access log) so that it sustains several thousand
requests per second on one core and never becomes the bottleneck of a benchmark. Its modules:
`_app` (`MockOpenAI`: the routes and their state), `_faults` (the fault queue and its error
replies) and `_server` (`MockOpenAIServer` beside synchronous code; `main`, the mock as a process).

Endpoints
---------
`POST /v1/chat/completions`
    Reads `model` and `messages` and answers in OpenAI's shape: `id`, `object: chat.completion`,
    `created`, `model`, `choices[0].message.content`, `finish_reason: stop` and
    `usage: {prompt_tokens, completion_tokens, total_tokens}`, with the header
    `x-request-id: req_<n>` (`n` counts every chat request the server ever received; it is not
    reset, so ids stay unique for the server's lifetime). `prompt_tokens` is the number of
    whitespace-separated words in all messages, `completion_tokens` the number in the answer.
    The answer is chosen in this order: `answers[<last user message>]` (exact match),
    `answers["*"]`, the last user message echoed back, or `""` when `echo` is false. Message
    content may be a string or a list of OpenAI content parts (the text parts are used).
    A body that is not a JSON object with a list of message objects gets a 400.

`POST /_mock/config`
    JSON with any of the keys below; each key given replaces that setting, keys not given are
    left alone. Answers the settings now in force. Unknown keys or bad values get a 400.

    - `latency_ms` (number, default 0): added to every chat reply with `asyncio.sleep`.
    - `answers` (object): last user message -> reply content; the key `"*"` is the default. A
      list of contents is answered in turn, cycling (the n-th request with that message gets the
      n-th): a judge whose answers vary. Setting `answers` restarts every list.
    - `echo` (bool, default true): echo the last user message when no answer matches.
    - `faults` (list): a queue of faults. Each request takes the first fault in the queue whose
      `match` (a substring of the last user message; absent = every request) it satisfies, and
      that fault's `times` (default 1, `-1` = forever) drops by one; a fault is removed once
      used up. A fault has a `status`, a `delay_ms`, or both:

      - `status`: reply with that HTTP status and an OpenAI-style error body
        `{"error": {"message", "type", "code"}}` (each overridable with the fault's keys of the
        same names), the `x-request-id` header, and `Retry-After` if `retry_after` is given:
        seconds (a number), or a text sent as it is (an HTTP-date).
      - `delay_ms`: a slow reply; sleep that long on top of `latency_ms`, then answer (normally,
        or with the fault's `status` if it has one).
      - `headers`: headers added to the fault's reply, or removed (`null`): e.g. a LiteLLM
        proxy's 429, `{"llm_provider-retry-after": "1", "x-request-id": null}`.
      - `after`: a substring of another request's last user message: the fault's reply waits
        until such a request has been answered (two calls put in order by an event, not a delay).
      - `drop: true`: an answer broken mid-stream: status 200, a `Content-Length` promising more
        than is sent, part of a body, then the connection is closed.

    - `token_delay_ms` (number, default 0): between the words of a streamed reply.

    `batch_delay_ms` and `expire` configure the Batch API (`/v1/files`, `/v1/batches`:
    `assay.testing._openai_batches`).

    `"stream": true` answers with Server-Sent Events (`chat.completion.chunk`s, one per word,
    the usage last when `stream_options.include_usage`, then `[DONE]`; `assay.testing._sse`);
    a `drop` fault then cuts the stream after its first word.

    - `rate_limits` (object or null): `{rpm, tpm, max_in_flight}` enforced with token buckets;
      over a limit: 429 with `Retry-After` and `x-ratelimit-*` headers (assay/testing/rate_limit.py).
      `burst` sizes the requests' bucket (default one second of `rpm`); `headers: "refusals"`
      sends the `x-ratelimit-*` headers on 429s only.

    Example: `{"latency_ms": 20, "answers": {"What is 2+2?": "4"},
    "faults": [{"status": 429, "times": 2, "retry_after": 0.1, "match": "2+2"},
    {"status": 500}, {"delay_ms": 5000}]}`

`GET /_mock/stats`
    `{"requests": n, "by_status": {"200": n, ...}, "bodies": [last 50 request bodies],
    "last_authorization": <Authorization header of the last chat request or null>,
    "peak_in_flight": <the most chat requests being answered at once>}`.
    A request is counted, under the status it is going to get, when it arrives.

`POST /_mock/reset`
    Zeroes the counters, clears the fault queue and restores the settings the server was
    started with.

Python API
----------
`MockOpenAIServer` runs the server in a background thread with its own event loop::

    with MockOpenAIServer(latency_ms=0) as srv:      # port=0 (default) picks a free port
        srv.base_url                                  # "http://127.0.0.1:<port>/v1"
        srv.configure(faults=[{"status": 429, "retry_after": 0.1}])
        srv.stats()
        srv.reset()

`configure`, `stats` and `reset` run on the server's loop, so they never race a request.
`MockOpenAI` is the same server for code that already runs inside an event loop
(`port = await mock.start()`, `await mock.stop()`).

CLI
---
`python -m assay.testing.mock_openai --port 8000 --latency-ms 20` serves in the foreground until
SIGINT or SIGTERM. Once listening it prints `listening on http://127.0.0.1:<port>/v1` and
flushes, so a parent process can wait for that line; `--port 0` picks a free port.
"""

from assay.testing.mock_openai._app import BODIES_KEPT, MockOpenAI
from assay.testing.mock_openai._faults import Fault
from assay.testing.mock_openai._server import MockOpenAIServer, main

__all__ = ["BODIES_KEPT", "Fault", "MockOpenAI", "MockOpenAIServer", "main"]
