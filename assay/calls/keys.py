"""API keys: where a spec says a key comes from, and reading it when a client is made.

A target or scorer names its key's source, never the key: `api_key_env` (an environment
variable: a terminal's, or a deployment's job variables) or `api_key_secret` (a Prefect Secret
block, for deployment runs: docs/prefect.md). The key is read when the client that sends it is
made and kept only in that client's headers (and in the run's redactor, which removes it from
captured requests): never in a spec, a flow run's parameters, a record, a log or argv.

Prefect is imported only to read a Secret block, so a spec that names none never loads it.
"""

from __future__ import annotations

import functools
import os
from typing import Any, cast


def api_key(env: str | None, secret: str | None) -> str | None:
    """The key from its source: the Secret block's value, else the environment variable's ("" when
    unset), else None (no key is sent).

    Args:
        env: `api_key_env`, the environment variable's name.
        secret: `api_key_secret`, the Prefect Secret block's name.
    """
    if secret:
        return secret_value(secret)
    if env:
        return os.environ.get(env, "")
    return None


def key_of(part: Any) -> str | None:
    """The key of a target or scorer spec (its `api_key_env` / `api_key_secret`); None when it
    names neither."""
    return api_key(getattr(part, "api_key_env", None), getattr(part, "api_key_secret", None))


@functools.lru_cache(maxsize=32)
def secret_value(name: str) -> str:
    """The value of the Prefect Secret block `name`, read from the configured Prefect API once a
    process (a `remote` scorer asks for its key on every item).

    Raises:
        KeyError: there is no such block, or the API did not answer (the message says which).
    """
    import httpx  # Prefect's client's errors; like Prefect, loaded only when a block is named
    from prefect.blocks.system import Secret  # only a spec that names a block pays for Prefect

    try:
        # `_sync`: a client is made in sync code that may run inside the flow's event loop.
        # `_sync=True` returns the block itself, not the coroutine `sync_compatible`'s type allows.
        block = cast(Secret, Secret.load(name, _sync=True))  # type: ignore[call-arg]
    except ValueError:  # Prefect's word for "no block document of that name"
        raise KeyError(f"no Prefect Secret block named {name!r}") from None
    except httpx.HTTPError as exc:
        raise KeyError(f"cannot read Prefect Secret block {name!r}: {type(exc).__name__}: {exc}") from None
    return str(block.get())


def key_problems(part: Any, where: str) -> list[str]:
    """Why the key a target or scorer spec names cannot be had, one line each naming the field;
    empty when it can (or none is named).

    Args:
        part: the target or scorer spec.
        where: its place in the spec, e.g. `target` or `scorers.2`.
    """
    env, secret = getattr(part, "api_key_env", None), getattr(part, "api_key_secret", None)
    if env and secret:
        return [f"{where}.api_key_secret: give api_key_env or api_key_secret, not both"]
    if secret:
        try:
            secret_value(secret)
        except KeyError as exc:
            return [f"{where}.api_key_secret: {exc.args[0]}"]
    elif env and not os.environ.get(env):
        return [f"{where}.api_key_env: environment variable {env!r} is not set"]
    return []
