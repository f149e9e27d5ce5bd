"""The `container` target's workspace after the agent: read back out of the container, diffed
against the fixtures it started from, and kept in the attempt's artifacts folder — redacted,
contents and names."""

from __future__ import annotations

import difflib
from pathlib import Path

import docker.errors

from assay.calls.capture import Redactor
from assay.errors import SandboxError
from assay.sandbox import WORKSPACE
from assay.targets.container.attempt import AttemptState, Offload


async def export(state: AttemptState, offload: Offload) -> dict[str, bytes]:
    """The workspace, read once the agent's processes are gone (`Sandbox.export`). If that
    fails in the container (the agent filled its memory with files in /tmp, say), the
    container is marked damaged and the export tried once more with headroom for Assay's own
    commands."""
    sandbox = state.sandbox
    assert sandbox is not None
    try:
        return await offload(sandbox.export, WORKSPACE)
    except (SandboxError, docker.errors.APIError) as exc:
        state.damaged = f"exporting the workspace failed: {exc}"
    await offload(sandbox.add_headroom)
    return await offload(sandbox.export, WORKSPACE)


def keep(state: AttemptState, files: dict[str, bytes], redactor: Redactor, secrets: dict[str, str]) -> Path:
    """The diff and the exported workspace into the attempt's folder (blocking: run it in a
    thread), redacted: contents, and names too — a file or folder named after a secret is stored
    under the redacted name, listed in the attempt's `redacted_names`. Returns the kept workspace.

    Args:
        state: the attempt (its folder, the fixtures it started from, its kept files).
        files: the exported workspace, relative path → bytes.
        redactor: the attempt's secrets and patterns.
        secrets: the secrets' values, also replaced in binary files.
    """
    names = redactor.paths([*state.baseline, *files])
    renamed = sorted(names[name] for name in files if names[name] != name)
    if renamed:
        state.facts["redacted_names"] = renamed
    before = {names[name]: data for name, data in state.baseline.items()}
    after = {names[name]: data for name, data in files.items()}
    state.save("diff.patch", redactor.text(workspace_diff(before, after)).encode())
    workspace = state.folder / "workspace"
    for name, data in after.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(redacted_bytes(data, redactor, secrets))
    if "workspace" not in state.kept:
        state.kept.append("workspace")
    return workspace


def workspace_diff(before: dict[str, bytes], after: dict[str, bytes]) -> str:
    """A unified diff of two workspaces (relative path → bytes); binary files named only."""
    chunks = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        try:
            old_lines = old.decode().splitlines(keepends=True) if old is not None else []
            new_lines = new.decode().splitlines(keepends=True) if new is not None else []
        except UnicodeDecodeError:
            chunks.append(f"Binary files a/{name} and b/{name} differ\n")
            continue
        for line in difflib.unified_diff(
            old_lines,
            new_lines,
            "/dev/null" if old is None else f"a/{name}",
            "/dev/null" if new is None else f"b/{name}",
        ):
            # Any line of a file's end without a newline (old side, new side or both) says so.
            chunks.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(chunks)


def redacted_bytes(data: bytes, redactor: Redactor, secrets: dict[str, str] | None = None) -> bytes:
    """Text through the redactor; binary data with each secret's bytes replaced."""
    try:
        return redactor.text(data.decode()).encode()
    except UnicodeDecodeError:
        for value in (secrets or {}).values():
            if value:
                data = data.replace(value.encode(), b"[REDACTED]")
        return data
