"""Assay's exceptions, drawn once.

    AssayError                      base of everything Assay raises on purpose
    ├── InputError                  bad input from the user: exit status 2, nothing written
    │   ├── SpecError               the eval spec (YAML) or a flag that overrides it
    │   ├── DatasetError            a dataset file or one of its rows
    │   ├── RunNotFoundError        a run id the store does not hold
    │   ├── ResumeRefusedError      resuming a run whose identity changed
    │   ├── RunHeldError            another live process drives the run (it holds the run's lease)
    │   └── HarnessError            an http_agent's harness: capabilities unreadable or invalid
    ├── LeaseLostError              another process took over the run this one was driving: this
    │                               one stopped, committing nothing more (exit status 3)
    ├── StoreError                  the store on disk is not what Assay wrote
    ├── SessionError                a policy misused its session (overlapping or late start/resume)
    ├── BudgetDenied                a model call refused before it was sent: the budget is closed
    │                               (the item or scorer becomes `budget_interrupted`)
    ├── SandboxError                the Docker engine did not do what Assay asked (copy in or out,
    │                               a fresh container for the checks)
    ├── EgressError                 a sandbox's egress network or sidecar could not be set up,
    │                               read or torn down
    ├── StageTimeout                a stage of a container attempt ran past its deadline
    ├── TargetUnreachable           the circuit breaker stopped a run whose target refused every
    │                               call so far (recorded `failed`, the rest `cancelled`)
    ├── ScorerNotApplicable         a scorer declined an item it cannot judge (a remote evaluator
    │                               needing a trajectory the target did not give): a neutral
    │                               `skipped` row, not a failure
    └── ScorerError                 a scorer could not score; its `metadata` is kept on the
        │                           failed score row
        ├── JudgeError              an LLM judge could not be asked, or its reply not read
        └── CheckTimeout            a code_exec check ran past the scorer's timeout

    TargetFailure                   (not an AssayError) a target call that failed for good

Failures of a *target* (HTTP errors, timeouts, exceptions in user code) are not exceptions at
this level: they become data, an item with outcome `failed` and a failure description.
`TargetFailure` carries that description from the target to the runner and never escapes it.
Likewise a scorer's exception (a `ScorerError` or any other) becomes a `failed` score row.

A few exceptions stay private to their package, because they are control flow that never leaves
it: `assay.calls.http.AttemptFailed` (a failed attempt on its way to the retry policy, which turns
the last one into a `TargetFailure`), `assay.calls.request_codec._BadFile` (the first bad line of a
file, turned into a message or an `InputError`), `CapabilitiesError` and `_TooLarge` in the
http_agent target (a capabilities document off the protocol, turned into a `HarnessError`; an
artifact past its size limit, turned into a warning) and `Refused` in
`assay/sandbox/_egress_proxy.py` (a request the egress proxy will not carry, turned into an HTTP
reply; that script runs alone inside the sidecar container and imports nothing of Assay).
"""

from __future__ import annotations

from typing import Any


class AssayError(Exception):
    """Base of every error Assay raises on purpose."""


class InputError(AssayError):
    """Bad input from the user. `problems` holds one message per problem, each naming the
    field or line and the bad value; the CLI prints them all and exits with status 2."""

    def __init__(self, problems: list[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        head = f"{source}: " if source else ""
        super().__init__(head + "; ".join(self.problems))


class SpecError(InputError):
    """The eval spec is invalid."""


class DatasetError(InputError):
    """The dataset file or one of its rows is invalid."""


class RunNotFoundError(InputError):
    """No run with that id in the store."""


class ResumeRefusedError(InputError):
    """The spec's identity changed since the run started, so resuming would mix results."""


class RunHeldError(InputError):
    """Another live process drives the run: `run X is held by H since T`."""


class HarnessError(InputError):
    """The harness's capabilities could not be read, or are not what the protocol says.
    Raised by `HttpAgent.prepare`, before anything runs (exit status 2, nothing written)."""


class LeaseLostError(AssayError):
    """This process was driving a run and another process took it over (its lease expired while
    this one was paused, or it was taken by force). This process stops starting items, commits
    nothing more and leaves the run's record to the new holder.

    Args:
        run_id: the run.
        message: who holds it now, and what this process did.
    """

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Pickled by a Dask worker whose shard execution lost the run (docs/scale.md).
        return type(self), (self.run_id, str(self))


class StoreError(AssayError):
    """The store holds something Assay did not write, or cannot be written."""


class SessionError(AssayError):
    """A session policy called `start` / `resume` out of turn: while another prompt of the
    session was in flight ("requires sequential start/resume calls"), after the policy returned
    ("settled"), `start` twice or `resume` before `start`. Raised into the policy; the attempt
    fails (kind `protocol`) even if the policy catches it."""


class BudgetDenied(AssayError):
    """A model call refused before it was sent, because the run's budget is closed."""


class SandboxError(AssayError):
    """The sandbox did not do what Assay asked of it (copy in, copy out, a fresh container)."""


class EgressError(AssayError):
    """The egress network or sidecar could not be set up, read or torn down."""


class StageTimeout(AssayError):
    """A stage of a container attempt ran past its deadline.

    Args:
        stage: the stage (`target.deadlines.<stage>`).
        seconds: its deadline.
    """

    def __init__(self, stage: str, seconds: float) -> None:
        super().__init__(f"{stage} stage exceeded its deadline of {seconds:g}s (target.deadlines.{stage})")
        self.stage = stage


class TargetUnreachable(AssayError):
    """A run's first items all failed to connect to the target: the run stops early rather than
    retry every item (`assay.run.breaker`). Recorded as the run's error; `assay resume` continues."""


class ScorerNotApplicable(AssayError):
    """A scorer declined an item it cannot judge; the message says why and becomes the `skipped`
    row's explanation."""


class ScorerError(AssayError):
    """A scorer could not score. The failed score row keeps `metadata` (what the scorer knew:
    a judge's model and raw reply, the checks that ran).

    Args:
        message: what went wrong, for people (the row's `error`, after the class name).
        metadata: what to keep on the row.
    """

    def __init__(self, message: str, metadata: dict[str, Any]) -> None:
        super().__init__(message)
        self.metadata = metadata


class JudgeError(ScorerError):
    """The judge could not be asked, or its reply could not be read."""


class CheckTimeout(ScorerError):
    """A check ran past the scorer's timeout."""


class TargetFailure(Exception):
    """A target call that failed for good. Caught by the runner and stored as data.

    Args:
        message: what went wrong, for people.
        kind: one of `assay.outcomes.FailureKind`.
        provider: who failed (`openai` host, `python`).
        http_status: the last HTTP status, if any.
        retryable: whether the failure was of a kind worth retrying.
        request_id: the provider's request id, if it sent one.
        usage: what the failed call had used, when known.
        artifacts: files kept for the failed attempt (a sandbox's transcript), relative to the
            run's artifacts partition.
        sandbox: a container attempt's facts.
        retries: how many attempts failed before the last, when the caller counted them.
        finish_reason: for a reply that is not an answer (a refusal, a cut, an unasked tool
            call), why the model stopped (an `assay.outcomes.FinishReason` word); None otherwise.
        finish_reason_raw: the provider's own word for it.
        sent: what the model sent instead of an answer (the text cut off, the refusal, the tool
            calls), kept as evidence and never scored; None otherwise.
        calls: the tool calls the model had made when the item failed (`assay.calls.messages.
            ToolCall`s: an unasked call, a tool loop's calls so far), kept in `items.tool_calls`.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        provider: str,
        http_status: int | None = None,
        retryable: bool = False,
        request_id: str | None = None,
        usage: Any = None,
        artifacts: list[str] | None = None,
        sandbox: dict[str, Any] | None = None,
        retries: int | None = None,
        finish_reason: str | None = None,
        finish_reason_raw: str | None = None,
        sent: Any = None,
        calls: list[Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.calls = calls
        self.retries = retries
        self.finish_reason = finish_reason
        self.finish_reason_raw = finish_reason_raw
        self.sent = sent
        self.artifacts = artifacts
        self.sandbox = sandbox
        self.message = message
        self.kind = kind
        self.provider = provider
        self.http_status = http_status
        self.retryable = retryable
        self.request_id = request_id
        self.usage = usage


def describe(exc: BaseException) -> str:
    """An exception in one line for a record or a message: `Type: message`, or the type alone."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
