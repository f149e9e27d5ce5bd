"""The `container` target's preflight: every problem at once, before any container starts, and
the image resolved to the id the whole run uses."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker.errors

from assay.errors import SpecError
from assay.sandbox import ImageFacts, allowlist_problems, client, inspect_image, run_once
from assay.spec import ContainerTarget
from assay.spec.dataset import Item
from assay.targets.container.agents import ADAPTERS, preflight
from assay.targets.container.fixtures import folder


def prepare_container(
    spec: ContainerTarget, items: list[Item], spec_dir: Path, stored: dict[str, Any] | None
) -> dict[str, Any]:
    """Preflight, before any container starts; returns the run's target snapshot.

    The image is resolved to its id once (a resumed run uses the stored id, so a tag moved since
    does not change what runs); every problem — a missing image (Docker's own message), a missing
    secret or fixture folder, an agent adapter's problems — is reported at once.

    Raises:
        SpecError: naming each problem's field.
    """
    problems = []
    for name in spec.secrets:
        value = os.environ.get(name)
        if not value:
            problems.append(f"target.secrets: environment variable {name!r} is not set")
        elif any(c in value for c in "\r\n\0"):
            problems.append(f"target.secrets: {name}'s value holds a line break or NUL; it cannot be passed")
    problems += _egress_problems(spec)
    for field_name, template in (("fixtures", spec.fixtures), ("checks", spec.checks)):
        if template is None:
            continue
        for item in items:
            found = folder(template, item, spec_dir)
            if found is None or not found.is_dir():
                problems.append(
                    f"target.{field_name}: item {item.item_index} (id {item.item_id!r}): "
                    f"no folder {template!r} → {str(found) if found else 'unfillable, or outside the spec folder'}"
                )
                break
    problems += _agent_problems(spec)
    if spec.egress and spec.egress_proxy_image and stored is None:
        problems += _image_problems("target.egress_proxy_image", spec.egress_proxy_image)
    facts: ImageFacts | None = None
    if stored is not None:
        facts = ImageFacts(**stored["image"])
    else:
        try:
            facts = inspect_image(client(), spec.image, spec.user)
        except docker.errors.ImageNotFound as exc:
            problems.append(f"target.image: {exc.explanation or exc}")
        except docker.errors.DockerException as exc:
            problems.append(f"target.image: the Docker engine did not answer: {exc}")
        except ValueError as exc:
            problems.append(f"target.user: {exc}")
    snapshot: dict[str, Any] = {}
    if stored is not None:
        snapshot = {k: v for k, v in stored.items() if k != "image"}
    elif facts is not None and not problems:
        version, problem = _agent_version(spec, facts)
        if problem:
            problems.append(problem)
        elif version is not None:
            snapshot["agent_version"] = version
    if problems:
        raise SpecError(problems)
    assert facts is not None
    allowlist = egress_allowlist(spec)
    if allowlist:
        snapshot["egress_allowlist"] = allowlist
    return {"image": dataclasses.asdict(facts), **snapshot}


def egress_allowlist(spec: ContainerTarget) -> list[str]:
    """The attempt's egress allowlist: `target.egress`, plus the agent adapter's own provider
    endpoint (as quickstudy adds an adapter's `egressHosts`), so an agent is never cut off from
    the model it runs on. Empty when the spec sets no egress (then there is no proxy at all)."""
    if not spec.egress:
        return []
    adapter = ADAPTERS.get(spec.agent.adapter) if spec.agent is not None else None
    hosts = adapter.egress_hosts if adapter else ()
    if adapter is not None and spec.agent is not None and spec.agent.base_url is not None:
        hosts = (endpoint_host(spec.agent.base_url),)
    return [*spec.egress, *(host for host in hosts if host not in spec.egress)]


def endpoint_host(url: str) -> str:
    """`host:port` of an endpoint URL, as an allowlist entry (the port its scheme implies when
    it names none)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


def _agent_version(spec: ContainerTarget, facts: ImageFacts) -> tuple[str | None, str | None]:
    """The agent CLI's version, asked in the image (recorded with the run), or why it could not be:
    a CLI that cannot say its version is not there to run the attempts either."""
    adapter = ADAPTERS.get(spec.agent.adapter) if spec.agent is not None else None
    if adapter is None or adapter.version_command is None:
        return None, None
    argv = list(adapter.version_command)
    where = f"target.agent: `{' '.join(argv)}` in image {spec.image!r}"
    try:
        engine = client()
        try:
            code, out, err = run_once(engine, facts, argv)
        finally:
            engine.close()
    except (docker.errors.DockerException, TimeoutError) as exc:
        return None, f"{where} could not run: {exc}"
    if code != 0 or not out:
        return None, f"{where} exited {code}: {err or out or '(no output)'}"
    return out.splitlines()[0][:200], None


def _egress_problems(spec: ContainerTarget) -> list[str]:
    if not spec.egress:
        return []
    problems = [f"target.egress: {problem}" for problem in allowlist_problems(list(spec.egress))]
    try:
        engine = client()
        try:
            engine.networks.get(spec.egress_network)
        finally:
            engine.close()
    except docker.errors.NotFound:
        problems.append(f"target.egress_network: the Docker engine has no network {spec.egress_network!r}")
    except docker.errors.DockerException as exc:
        problems.append(f"target.egress_network: the Docker engine did not answer: {exc}")
    return problems


def _image_problems(where: str, image: str) -> list[str]:
    try:
        engine = client()
        try:
            engine.images.get(image)
        finally:
            engine.close()
    except docker.errors.ImageNotFound as exc:
        return [f"{where}: {exc.explanation or exc}"]
    except docker.errors.DockerException as exc:
        return [f"{where}: the Docker engine did not answer: {exc}"]
    return []


def _agent_problems(spec: ContainerTarget) -> list[str]:
    if spec.agent is None:
        return []
    return [f"target.{problem}" for problem in preflight(spec.agent, os.environ)]
