"""What the adapters share: their table, the preflight, the secrets and their env-file, the
command line, and which parser reads a stream."""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import get_args

from assay.calls.pinning import model_pin_problem
from assay.errors import InputError, SpecError
from assay.spec.targets import ENV_NAME, ENV_UNWRITABLE, AgentSpec, ParserName
from assay.targets.container.agents import claude_code, cli, codex
from assay.targets.container.agents._base import Adapter, AgentReport, AgentSettings, Parser, StopWatch

PLACEHOLDERS = ("prompt", "model", "prompt_file")

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (cli.ADAPTER, claude_code.ADAPTER, codex.ADAPTER)}
PARSERS: dict[str, Parser] = {**claude_code.PARSERS, **codex.PARSERS, **cli.PARSERS}


def parser_name(spec: AgentSpec) -> ParserName:
    """`spec.parser`, else the adapter's default (`text` for `cli` and unknown adapters)."""
    if spec.parser is not None:
        return spec.parser
    adapter = ADAPTERS.get(spec.adapter)
    return adapter.parser if adapter else "text"


def secret_names(spec: AgentSpec) -> list[str]:
    """The adapter's provider keys, then `spec.secrets`, each once."""
    adapter = ADAPTERS.get(spec.adapter)
    keys = adapter.provider_keys if adapter else ()
    return list(dict.fromkeys([*keys, *spec.secrets]))


# -- before anything starts --------------------------------------------------------------------


def preflight(spec: AgentSpec, environ: Mapping[str, str]) -> list[str]:
    """Every reason the agent cannot run, at once; an empty list when it can. Needs no Docker
    (whether the image exists is the container target's check).

    Args:
        spec: the agent.
        environ: the host environment the secrets are read from (`os.environ`).

    Returns:
        One sentence per problem, each starting with the field (`agent.model …`), so a caller
        can prefix where the agent sits (`target.`). Secret values never appear, only names.
    """
    problems: list[str] = []
    adapter = ADAPTERS.get(spec.adapter)
    if adapter is None:
        problems.append(
            f"agent.adapter {spec.adapter!r} is not a known adapter; known: {', '.join(sorted(ADAPTERS))}"
        )
    used: set[str] = set()
    if spec.command is not None:
        for index, part in enumerate(spec.command):
            try:
                used.update(_placeholders(part))
            except ValueError as exc:
                problems.append(f"agent.command[{index}] {part!r}: {exc}")
    elif adapter is not None and adapter.command is None:
        problems.append(
            f"agent.command is required for the {spec.adapter} adapter: the argv to run, "
            'e.g. ["my-agent", "--task", "{prompt}"]'
        )
    else:
        used.update(PLACEHOLDERS if adapter else ())

    needs_model = (adapter is not None and adapter.needs_model) or "model" in used
    if spec.model is None:
        if needs_model:
            if adapter is not None and adapter.needs_model:
                problems.append(
                    f"agent.model is required by the {spec.adapter} adapter: name an exact, dated model version"
                )
            else:
                problems.append(
                    "agent.model is required: agent.command uses {model}; name an exact model version"
                )
    else:
        reason = (adapter.model_problem if adapter else model_pin_problem)(spec.model)
        if reason:
            problems.append(f"agent.model {reason}")
    if spec.base_url is not None and (adapter is None or adapter.settings is None):
        problems.append(
            f"agent.base_url is for the built-in adapters' CLIs (claude-code, codex); the {spec.adapter} "
            "adapter's command gets its endpoint from agent.env"
        )

    keys = adapter.provider_keys if adapter else ()
    missing_keys = [name for name in keys if not environ.get(name)]
    if missing_keys:
        problems.append(
            f"agent.adapter {spec.adapter} needs the provider key variable {', '.join(missing_keys)}, "
            "which is not set (or empty) in the host environment"
        )
    missing = [name for name in spec.secrets if name not in keys and not environ.get(name)]
    if missing:
        problems.append(
            f"agent.secrets names host environment variables that are not set (or empty): {', '.join(missing)}"
        )
    both = sorted(set(spec.env) & set(secret_names(spec)))
    if both:
        problems.append(
            f"agent.env and agent.secrets both name {', '.join(both)}: a variable is either plain or secret"
        )
    return problems


def secret_values(spec: AgentSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets the container gets, read from the host: the adapter's provider keys and `secrets`.

    Args:
        spec: the agent.
        environ: the host environment (`os.environ`).

    Raises:
        InputError: a variable is not set or empty (names only; `preflight` reports this first).
    """
    names = secret_names(spec)
    missing = [name for name in names if not environ.get(name)]
    if missing:
        raise InputError(f"host environment variables not set (or empty): {', '.join(missing)}")
    return {name: environ[name] for name in names}


def container_secrets(spec: AgentSpec, values: Mapping[str, str]) -> dict[str, str]:
    """The secrets as the container gets them: a provider key under the name its CLI reads
    (`Adapter.key_names`: the host's `OPENAI_API_KEY` is Codex's `CODEX_API_KEY`)."""
    adapter = ADAPTERS.get(spec.adapter)
    names = dict(adapter.key_names) if adapter else {}
    return {names.get(name, name): value for name, value in values.items()}


def agent_settings(spec: AgentSpec) -> AgentSettings:
    """The plain environment and `$HOME` files the adapter sets up for its CLI."""
    adapter = ADAPTERS.get(spec.adapter)
    if adapter is None or adapter.settings is None:
        return AgentSettings()
    return adapter.settings(spec)


def resume_totals(spec: AgentSpec) -> frozenset[str]:
    """The report fields the adapter's resume line reports as the conversation's totals (none
    for a `command` of the spec's own, which is run as it is)."""
    adapter = ADAPTERS.get(spec.adapter)
    if adapter is None or spec.command is not None or adapter.resume_command is None:
        return frozenset()
    return adapter.resume_totals


def stop_watch(spec: AgentSpec) -> StopWatch | None:
    """What watches the adapter's stream for an event that stops the run; None if nothing does."""
    adapter = ADAPTERS.get(spec.adapter)
    if adapter is None or adapter.stop_event is None or spec.parser not in (None, adapter.parser):
        return None
    return StopWatch(adapter.stop_event)


def env_file_text(values: Mapping[str, str]) -> str:
    """The env file's text: one `KEY=value` per line, values taken literally (no quotes, no `$`
    expansion). The container target writes it into the attempt's container (mode 0600, owned by
    the attempt's user), where a preamble exports it and deletes it before the command starts.

    Args:
        values: variable name to value.

    Raises:
        InputError: a name is not a variable name, or a value holds a line break or NUL or is
            not valid UTF-8 (each named; values are never shown).
    """
    problems = []
    for name, value in values.items():
        if not ENV_NAME.fullmatch(name):
            problems.append(f"{name!r} is not an environment variable name (letters, digits, _)")
        elif any(c in value for c in ENV_UNWRITABLE):
            problems.append(
                f"the value of {name} holds a line break or NUL: an env-file holds one KEY=value per "
                "line, so it cannot carry that value"
            )
        elif not _utf8(value):
            problems.append(f"the value of {name} is not valid UTF-8")
    if problems:
        raise InputError(problems, source="env-file")
    return "".join(f"{name}={value}\n" for name, value in values.items())


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: os.environ's way of holding undecodable bytes
        return False
    return True


# -- the command line --------------------------------------------------------------------------


def command_line(spec: AgentSpec, prompt: str, prompt_file: str, *, resume: bool = False) -> list[str]:
    """The argv run inside the container: the template with its placeholders filled.

    Each argument is filled on its own and nothing goes through a shell, so a prompt is always one
    argument whatever it holds. Secrets are never part of it: they travel in the env-file.

    Args:
        spec: the agent.
        prompt: the item's prompt, for `{prompt}`.
        prompt_file: the prompt file's path inside the container, for `{prompt_file}`.
        resume: a session's later prompt: the adapter's `resume_command` when it has one (a
            `command` the spec gives is used as it is: its agent reads `$ASSAY_TURN_METHOD`).

    Raises:
        SpecError: the adapter is unknown, `cli` has no command, a placeholder is unknown or
            malformed, or `{model}` is used without a model.
    """
    adapter = ADAPTERS.get(spec.adapter)
    if adapter is None:
        raise SpecError(f"agent.adapter {spec.adapter!r} is not a known adapter")
    template = spec.command if spec.command is not None else adapter.command
    if resume and spec.command is None and adapter.resume_command is not None:
        template = adapter.resume_command
    if template is None:
        raise SpecError(f"agent.command is required for the {spec.adapter} adapter")
    values = {"prompt": prompt, "model": spec.model, "prompt_file": str(prompt_file)}
    argv = []
    for index, part in enumerate(template):
        where = f"agent.command[{index}] {part!r}"
        try:
            _placeholders(part)
        except ValueError as exc:
            raise SpecError(f"{where}: {exc}") from None
        filled = []
        for literal, name, _, _ in string.Formatter().parse(part):
            filled.append(literal)
            if name is not None:
                value = values[name]
                if value is None:
                    raise SpecError(f"{where}: {{model}} is used but agent.model is not set")
                filled.append(value)
        argv.append("".join(filled))
    return argv


def _placeholders(part: str) -> list[str]:
    """The placeholders in one template argument; ValueError for an unknown or malformed one."""
    try:
        pieces = list(string.Formatter().parse(part))
    except ValueError as exc:  # a single '{' or '}'
        raise ValueError(f"{exc} (write {{{{ or }}}} for a literal brace)") from None
    names = []
    for _, name, spec, conversion in pieces:
        if name is None:
            continue
        known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
        if name not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{name}}}; known: {known}")
        if spec or conversion:
            raise ValueError(f"placeholder {{{name}}} takes no format or conversion; known: {known}")
        names.append(name)
    return names


# -- reading the stream ------------------------------------------------------------------------


def parse_stream(parser: ParserName, stdout: str) -> AgentReport:
    """Read an agent's stdout with one of the parsers (docs/agent-adapters.md).

    Never raises on a bad stream: what could not be read is listed in `problems` and the figures
    it would have given stay None.

    Args:
        parser: `claude-code`, `codex`, `jsonl` or `text` (`parser_name(spec)`).
        stdout: everything the agent wrote to stdout.

    Raises:
        ValueError: `parser` is not one of those.
    """
    read = PARSERS.get(parser)
    if read is None:
        raise ValueError(f"unknown parser {parser!r}; known: {', '.join(get_args(ParserName))}")
    return read(stdout)
