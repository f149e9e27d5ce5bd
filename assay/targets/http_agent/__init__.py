"""The `http_agent` target: an agent behind an HTTP harness (docs/harness-protocol.md).

One harness run per item x trial: `POST /runs`, then `GET /runs/{id}` every `poll_interval` until
the run reports a final status, then `GET /runs/{id}/trajectory` when the harness provides one.

An item's local fixture files are uploaded with the start (multipart/form-data); files given as
URLs are passed on as URLs. With a store, a completed attempt keeps its artifacts
(`GET /runs/{id}/files/{path}`, within size limits) and its trajectory in its artifacts folder,
and every harness run id is recorded in the run's ledger: an id handed out twice in one Assay
run fails the later attempt, even across a resume.

What the harness can do is read once from `GET /capabilities` (`prepare`), and a run keeps that
snapshot: a resumed run passes it back (`capabilities=`) and never asks again, so it is gated and
modelled like the rest of the run even if the harness changed meanwhile.

Assay does not measure an agent's model calls (`instrumented = False`): the cost the trajectory
reports is kept as caller-reported cost, its token counts as caller-reported (reserved) figures.

One concern a module:

    _protocol     the protocol's documents (capabilities, run state, steps) and value checks
    _trajectory   a fetched trajectory validated (ATIF too) and re-fetched, what a run records of it
    _files        an item's fixture files: read, checked, found, uploaded
    _checks       what `prepare` checks against the capabilities before anything runs
    _client       HTTP to the harness (httpx), retried and described by `assay.calls.http`
    _artifacts    what the store keeps: artifacts, trajectory.json, the run-id ledger
    _agent        the run lifecycle: start, poll, cancel, fetch, keep; `HttpAgent`
    _kind         `HttpAgentKind`: what a run asks of the kind (preflight, fixture files, open);
                  `prepare_http_agent`: the preflight for synchronous callers
"""

from assay.errors import HarnessError
from assay.targets.http_agent._agent import HttpAgent
from assay.targets.http_agent._files import is_safe_path, item_files
from assay.targets.http_agent._kind import HttpAgentKind, prepare_http_agent
from assay.targets.http_agent._protocol import PROTOCOL, STATUSES, TERMINAL, Capabilities
from assay.targets.http_agent._trajectory import Trajectory, TrajectoryStatus, validate_trajectory

__all__ = [
    "PROTOCOL",
    "STATUSES",
    "TERMINAL",
    "Capabilities",
    "HarnessError",
    "HttpAgent",
    "HttpAgentKind",
    "Trajectory",
    "TrajectoryStatus",
    "is_safe_path",
    "item_files",
    "prepare_http_agent",
    "validate_trajectory",
]
