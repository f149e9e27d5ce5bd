"""Every `ASSAY_*` variable a user sets: one typed model, a description each, read once.

    settings()      the settings of this process's environment (`Settings`), parsed on first use
    Settings        a field per variable, named `ASSAY_<FIELD>`; its description is its docs
    help_text()     the list `assay --help` ends with;  markdown()  docs/settings.md's table

A value that cannot be one (`ASSAY_LEASE_TTL_S=soon`) is bad input naming the variable, whichever
command meets it first. An empty variable counts as unset. The model is parsed once per
environment: each call compares the few `ASSAY_*` values with the ones it was parsed from (a
dozen dictionary look-ups), so a change made in this process — a test's `monkeypatch.setenv`, say —
is seen, and nothing else re-reads them.

Some `ASSAY_*` names are no user's settings, and live beside the code that owns them
(`NOT_SETTINGS` lists them, and why; tests/house/test_settings.py checks that every `ASSAY_*` name in
the code is one or the other).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from assay.errors import InputError

PREFIX = "ASSAY_"
EVENT_LOOPS = ("uvloop", "asyncio")

NOT_SETTINGS: dict[str, str] = {
    "ASSAY_FAULT_KILL": "a test-only fault hook: SIGKILLs the process at a chosen store write "
    "(assay/store/_publish.py); no user sets it",
    "ASSAY_PROMPT_FILE": "protocol: set by Assay inside a command target's container, for the "
    "command it runs (assay/targets/container/target.py)",
    "ASSAY_SESSION_ID": "protocol: set inside an agent's container for each turn of a session "
    "(assay/targets/container/session.py)",
    "ASSAY_TURN": "protocol: the turn's index, set inside an agent's container",
    "ASSAY_TURN_METHOD": "protocol: `start` or `resume`, set inside an agent's container",
    "ASSAY_EGRESS_ALLOWLIST": "the egress proxy's own input inside its sidecar container, a "
    "standalone script that never imports Assay (assay/sandbox/_egress_proxy.py)",
    "ASSAY_EGRESS_PORT": "the egress proxy's port inside its sidecar container",
    "ASSAY_EGRESS_BIND": "the egress proxy's bind address inside its sidecar container",
}


class Settings(BaseModel):
    """The `ASSAY_*` environment variables, each the field's name in capitals after `ASSAY_`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store: str = Field(
        default="assay-store",
        description="The store a command uses when it gets no `--store`: a folder (made if missing) "
        "or `s3://bucket/prefix`. `assay ui` passes its own to the runs its deployments start.",
    )
    s3_endpoint: str | None = Field(
        default=None,
        description="The S3-compatible server of an `s3://` store (MinIO, say; an `http://` URL "
        "is used as plain HTTP). Default `AWS_ENDPOINT_URL`, else AWS itself. Credentials and "
        "region come from the usual `AWS_*` variables.",
    )
    s3_instance_credentials: bool = Field(
        default=False,
        description="`1` lets an `s3://` store take credentials from the instance metadata service "
        "(an EC2 instance role). Off unless asked: where nothing answers there, the client retries "
        "for minutes before it fails.",
    )
    lease_ttl_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a run's lease lives without being renewed (its holder renews it four "
        "times as often). A run whose holder died can be resumed elsewhere once it lapses.",
    )
    event_loop: Literal["uvloop", "asyncio"] = Field(
        default="uvloop",
        description="The event loop where Assay owns it (the terminal's embedded path, a Dask "
        "worker's shards): `uvloop`, or `asyncio` for the standard one (debugging with "
        "`PYTHONASYNCIODEBUG`). Under Prefect the loop is Prefect's.",
    )
    rate_share: str | None = Field(
        default=None,
        description="Where the endpoints' rate controllers are shared: `local` (this process), "
        "`dask://HOST:PORT` (a Dask scheduler holds the window), or `prefect` (the Prefect "
        "server at `PREFECT_API_URL` does). Default `local`; in a Dask worker's task, that "
        "worker's scheduler. docs/rate-control.md.",
    )
    dask: str | None = Field(
        default=None,
        description="A Dask scheduler (`tcp://HOST:PORT`) whose workers execute the shards of "
        "`assay run` and `assay resume` when no `--dask` is given. docs/scale.md.",
    )
    dask_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds to wait for the Dask scheduler to answer before the run is refused.",
    )
    view_token: str | None = Field(
        default=None,
        description="The token `assay view` asks of every request (`Authorization: Bearer …`, or "
        "`?token=` once, which sets a cookie). Required when `--host` is not loopback; when set, "
        "asked on loopback too. Never shown on a page. docs/view.md.",
    )
    view_cache_mb: int = Field(
        default=2048,
        ge=0,
        description="How many MB of local copies of an s3:// store's parts `assay view` keeps, in a "
        "temporary folder deleted when it stops: each part a page reads is fetched once, not again "
        "on every request; past the cap the least recently read are deleted. 0: no copies. Run "
        "records, labels and leases are always read from the bucket. docs/view.md.",
    )
    view_url: str | None = Field(
        default=None,
        description="Where `assay view` is served (`http://127.0.0.1:8484`, say). When set, Prefect "
        "artifacts and `assay report` link to the view's pages of the run or the comparison. "
        "docs/view.md.",
    )

    @field_validator("event_loop", mode="before")
    @classmethod
    def _known_loop(cls, value: object) -> object:
        if isinstance(value, str):
            chosen = value.strip().lower()
            if chosen not in EVENT_LOOPS:
                raise ValueError(
                    f"{env_name('event_loop')}={chosen!r} names no event loop Assay knows: set it "
                    f"to one of {', '.join(EVENT_LOOPS)}, or unset it for uvloop"
                )
            return chosen
        return value

    @field_validator("view_url", mode="before")
    @classmethod
    def _web_address(cls, value: object) -> object:
        if isinstance(value, str):
            if not value.startswith(("http://", "https://")) or len(value) < len("http://x"):
                raise ValueError(f"{env_name('view_url')}={value!r} is no http:// or https:// address")
            # A link is the address plus the page's path, which starts with its own slash.
            return value.rstrip("/")
        return value

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """The settings `environ` gives (empty values are unset).

        Raises:
            InputError: one problem per variable whose value cannot be its setting.
        """
        given = {field: environ[name] for field, name in _NAMES.items() if environ.get(name, "").strip()}
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            raise InputError([_problem(error, given) for error in exc.errors()]) from None


def env_name(field: str) -> str:
    """The environment variable of a field: `lease_ttl_s` → `ASSAY_LEASE_TTL_S`."""
    return PREFIX + field.upper()


_NAMES = {field: env_name(field) for field in Settings.model_fields}
_parsed: tuple[tuple[str | None, ...], Settings] | None = None


def settings() -> Settings:
    """This process's settings, parsed from its environment (again only if an `ASSAY_*` value
    changed since).

    Raises:
        InputError: a variable's value cannot be its setting.
    """
    global _parsed
    raw = tuple(os.environ.get(name) for name in _NAMES.values())
    if _parsed is None or _parsed[0] != raw:
        _parsed = (raw, Settings.from_environ(os.environ))
    return _parsed[1]


def _problem(error: object, given: Mapping[str, str]) -> str:
    field = str(error["loc"][0])  # type: ignore[index]
    message = str(error["msg"]).removeprefix("Value error, ")  # type: ignore[index]
    name = env_name(field)
    return message if message.startswith(name) else f"{name}={given[field]!r}: {message}"


def _default(field: str) -> str:
    default = Settings.model_fields[field].default
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "`1`" if default else "`0`"
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    return f"`{default}`"


def markdown() -> str:
    """The table of docs/settings.md: variable, default, description (docs/update_settings.py)."""
    lines = ["| variable | default | what it sets |", "|---|---|---|"]
    for field, info in Settings.model_fields.items():
        lines.append(f"| `{env_name(field)}` | {_default(field)} | {info.description} |")
    return "\n".join(lines) + "\n"


def help_text() -> str:
    """The settings as `assay --help` ends with them: each variable, its default, the first
    sentence of its description."""
    import textwrap

    lines = ["environment (docs/settings.md):"]
    for field, info in Settings.model_fields.items():
        first = (info.description or "").split(". ")[0].rstrip(".").replace("`", "")
        text = f"{env_name(field):<30} {first} (default {_default(field).strip('`')})"
        lines += textwrap.wrap(text, width=100, initial_indent="  ", subsequent_indent=" " * 33)
    return "\n".join(lines)
