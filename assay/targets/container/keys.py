"""`assay run --check-keys`: each agent adapter's provider key tried with one cheap request
(listing the provider's models), before any container starts, so a revoked or mistyped key is
found at once rather than as every attempt's failure."""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx

from assay.spec import ContainerTarget
from assay.targets.container.agents import ADAPTERS

_TIMEOUT_S = 15.0


def key_problems(spec: ContainerTarget, environ: Mapping[str, str] = os.environ) -> list[str]:
    """Why the agent's provider key does not work, one line (naming the variable, never its
    value) per problem; empty when it works or the agent has no key to try.

    Args:
        spec: the container target.
        environ: where the key is read, and a base-URL override when `agent.base_url` gives none.
    """
    adapter = ADAPTERS.get(spec.agent.adapter) if spec.agent is not None else None
    probe = adapter.key_probe if adapter is not None else None
    if probe is None:
        return []
    key = environ.get(probe.key)
    if not key:
        return []  # preflight already names a missing key
    assert spec.agent is not None
    base = spec.agent.base_url or environ.get(probe.base_url_env) or probe.base_url
    url = base.rstrip("/") + probe.path
    value = f"Bearer {key}" if probe.header == "authorization" else key
    where = f"target.agent: {probe.key} (--check-keys, GET {url})"
    try:
        response = httpx.get(url, headers={probe.header: value, **dict(probe.headers)}, timeout=_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return [f"{where}: the provider could not be reached: {type(exc).__name__}"]
    if response.status_code in (401, 403):
        return [f"{where}: the provider refused the key (HTTP {response.status_code})"]
    if response.status_code >= 400:
        return [f"{where}: the provider answered HTTP {response.status_code}"]
    return []
