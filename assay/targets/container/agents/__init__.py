"""Agent adapters of the `container` target: how an agent CLI starts inside a container, what it
needs from the host, and how its output stream becomes a report.

Pure functions over a spec, a prompt and a stream: nothing here runs Docker or Prefect, so every
rule is unit-tested against recorded streams (tests/data/agent_streams/).

    adapter       default command line                                        provider key
    cli           `command` (a template; required)                            none
    claude-code   claude -p --output-format stream-json --verbose --model M   ANTHROPIC_API_KEY
    codex         codex exec --json --model M                                 OPENAI_API_KEY (as CODEX_API_KEY)

A container target uses them in this order:

    preflight(spec, environ)             every problem at once, before any container starts
    secret_values(spec, environ)         the provider keys and `secrets`, read from the host
    container_secrets(spec, values)      under the names the CLI reads (Codex: CODEX_API_KEY)
    env_file_text(values)                the 0600 env file's text: secrets never go in argv
    agent_settings(spec)                 the CLI's plain env and $HOME config files (its endpoint)
    command_line(spec, prompt, file)     the argv run inside the container
    resume_totals(spec)                  what a resumed run reports as the conversation's totals
    stop_watch(spec)                     watches the stream for an event that ends the run at once
    parse_stream(parser_name(spec), out) final report, tokens, cost, turns, tool calls, steps

Redacting secrets from the stored transcript is `assay.calls.capture.Redactor`'s job, fed with the
values `secret_values` returned. See docs/agent-adapters.md.

One module per adapter (its command, provider keys and stream parser), and what they share:

    cli, claude_code, codex   `ADAPTER` and the stream parser(s) of each
    _shared                   the table, preflight, secrets and env-file, command line, parse_stream
    _base                     `Adapter`, `AgentReport`, and the JSON-lines reader the parsers share
"""

from assay.calls.pinning import model_pin_problem
from assay.targets.container.agents._base import Adapter, AgentReport, AgentSettings, Stop, StopWatch
from assay.targets.container.agents._shared import (
    ADAPTERS,
    PARSERS,
    PLACEHOLDERS,
    agent_settings,
    command_line,
    container_secrets,
    env_file_text,
    parse_stream,
    parser_name,
    preflight,
    resume_totals,
    secret_names,
    secret_values,
    stop_watch,
)

__all__ = [
    "ADAPTERS",
    "PARSERS",
    "PLACEHOLDERS",
    "Adapter",
    "AgentReport",
    "AgentSettings",
    "Stop",
    "StopWatch",
    "agent_settings",
    "command_line",
    "container_secrets",
    "env_file_text",
    "model_pin_problem",
    "parse_stream",
    "parser_name",
    "preflight",
    "resume_totals",
    "secret_names",
    "secret_values",
    "stop_watch",
]
