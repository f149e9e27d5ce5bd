"""The container target's agent adapters (assay/targets/container/agents/), without Docker.

The requirements: each parser reads its CLI's stream into exact figures, and a figure the stream
did not give is None, never 0; a broken stream is reported, never raised; the command line is
filled argument by argument and never holds a secret; secrets travel in a 0600 env-file; preflight
reports every problem at once and refuses a model that is not pinned to an exact version.

The sample streams were written from the CLIs' documented formats (tests/data/agent_streams/).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from assay.calls.capture import Redactor
from assay.errors import InputError, SpecError
from assay.spec import AgentSpec
from assay.targets.container.agents import (
    AgentReport,
    Stop,
    agent_settings,
    command_line,
    container_secrets,
    env_file_text,
    model_pin_problem,
    parse_stream,
    parser_name,
    preflight,
    secret_values,
    stop_watch,
)
from assay.testing.agent_models import ScriptedModels

STREAMS = Path(__file__).parents[1] / "data" / "agent_streams"
CLAUDE_MODEL = "claude-sonnet-4-20250514"
# Codex pins by an undated name of its catalog (with the CLI version the run records).
CODEX_MODEL = "gpt-5.5"
ANTHROPIC_KEY = "sk-ant-api03-" + "x" * 40
OPENAI_KEY = "sk-proj-" + "y" * 40


def stream(name: str) -> str:
    return (STREAMS / name).read_text()


def lines(*rows: str) -> str:
    return "\n".join(rows)


# -- Claude Code stream-json -------------------------------------------------------------------

CLAUDE_FINAL = (
    "Fixed the off-by-one in `calc.py`: `total()` skipped the last element (`range(len(xs) - 1)`). "
    "Both tests pass now."
)


def test_claude_code_success_stream() -> None:
    report = parse_stream("claude-code", stream("claude_success.jsonl"))

    assert report.final_report == CLAUDE_FINAL
    # input_tokens 36 + cache writes 8123 + cache reads 41250: all input, cached included.
    assert report.input_tokens == 49409
    assert report.cached_tokens == 41250
    assert report.cache_write_tokens == 8123  # its own kind (tokens_cache_write), part of the input
    assert report.output_tokens == 612
    assert report.cost_usd == pytest.approx(0.0712345)
    assert report.turns == 4
    assert report.tool_calls == 3
    assert report.problems == []


def test_claude_code_trajectory_has_the_harness_step_shape() -> None:
    steps = parse_stream("claude-code", stream("claude_success.jsonl")).trajectory

    assert [s["role"] for s in steps] == [
        "assistant", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert steps[0] == {
        "role": "assistant",
        "content": "I'll run the tests first to see what fails.",
        "tool_calls": [],
    }
    assert steps[1]["tool_calls"] == [
        {
            "id": "toolu_01",
            "name": "Bash",
            "arguments": {"command": "python -m pytest -q", "description": "Run the test suite"},
        }
    ]
    assert steps[2]["tool_call_id"] == "toolu_01"
    assert steps[2]["content"].endswith("1 failed, 1 passed in 0.03s")
    # A tool_result whose content is a list of text blocks is read as its text.
    assert steps[4]["content"] == "The file /workspace/calc.py has been updated."
    assert steps[-1]["content"] == CLAUDE_FINAL


def test_claude_code_non_json_line_is_counted_and_the_rest_is_read() -> None:
    report = parse_stream("claude-code", stream("claude_noise.jsonl"))

    assert report.final_report == CLAUDE_FINAL
    assert report.input_tokens == 49409
    assert report.tool_calls == 3
    assert report.problems == ["1 line was not a JSON object (first: line 5)"]


def test_claude_code_max_turns_keeps_usage_but_has_no_report() -> None:
    report = parse_stream("claude-code", stream("claude_error_max_turns.jsonl"))

    assert report.final_report is None
    assert report.input_tokens == 10 + 6110 + 5900
    assert report.cached_tokens == 5900
    assert report.output_tokens == 60
    assert report.cost_usd == pytest.approx(0.0241)
    assert report.turns == 2
    assert report.tool_calls == 2
    assert report.problems == ["the agent ended with 'error_max_turns'"]


def test_claude_code_truncated_stream_has_no_figures() -> None:
    report = parse_stream("claude-code", stream("claude_truncated.jsonl"))

    assert report.final_report is None
    assert (report.input_tokens, report.output_tokens, report.cached_tokens) == (None, None, None)
    assert report.cost_usd is None
    assert report.turns is None
    assert report.tool_calls == 1  # seen before the cut
    assert len(report.trajectory) == 3
    assert report.problems == [
        "1 line was not a JSON object (first: line 5)",
        "the last line (5) is cut off: the stream ended mid-line",
        "the stream has no `result` event: the agent did not finish",
    ]


def test_claude_code_error_result_is_not_a_final_report() -> None:
    # A rejected key still ends with subtype "success", but is_error and the error as its result.
    out = (
        '{"type":"result","subtype":"success","is_error":true,"num_turns":1,'
        '"result":"Invalid API key · Please run /login","total_cost_usd":0,'
        '"usage":{"input_tokens":0,"output_tokens":0}}\n'
    )
    report = parse_stream("claude-code", out)

    assert report.final_report is None
    assert report.problems == ["the agent ended with 'success': Invalid API key · Please run /login"]
    assert report.cost_usd == 0.0
    assert report.input_tokens == 0
    assert report.cached_tokens is None  # the stream did not say


def test_claude_code_usage_without_cache_fields_leaves_cached_unknown() -> None:
    out = '{"type":"result","subtype":"success","result":"ok","usage":{"input_tokens":120,"output_tokens":7}}'
    report = parse_stream("claude-code", out)

    assert (report.final_report, report.input_tokens, report.output_tokens) == ("ok", 120, 7)
    assert report.cached_tokens is None
    assert report.cost_usd is None
    assert report.turns is None


def test_claude_code_bad_counts_are_reported_not_trusted() -> None:
    out = '{"type":"result","subtype":"success","result":"ok","num_turns":true,"usage":{"input_tokens":-3}}\n'
    report = parse_stream("claude-code", out)

    assert report.input_tokens is None
    assert report.turns is None
    assert "usage.input_tokens is not a count: -3" in report.problems
    assert "num_turns is not a count: True" in report.problems


# -- Codex exec --json -------------------------------------------------------------------------


def test_codex_success_stream() -> None:
    report = parse_stream("codex", stream("codex_success.jsonl"))

    assert report.final_report == (
        "Fixed the off-by-one in `calc.py`: `total()` now sums every element. `pytest` passes (2 tests)."
    )
    assert report.input_tokens == 28417
    assert report.cached_tokens == 22016
    assert report.output_tokens == 1093
    assert report.cost_usd is None  # Codex reports no cost
    assert report.turns is None  # nor agent-loop turns
    assert report.tool_calls == 3  # two commands and a file change; reasoning is not a tool call
    assert report.problems == []


def test_codex_trajectory_pairs_each_tool_call_with_its_result() -> None:
    steps = parse_stream("codex", stream("codex_success.jsonl")).trajectory

    assert [s["role"] for s in steps] == [
        "reasoning", "assistant", "tool", "reasoning", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert steps[1]["tool_calls"] == [
        {
            "id": "item_1",
            "name": "command_execution",
            "arguments": {"command": "bash -lc 'python -m pytest -q'"},
        }
    ]
    assert steps[2]["tool_call_id"] == "item_1"
    assert steps[2]["is_error"] is True  # exit code 1
    assert steps[4]["tool_calls"][0]["arguments"] == {
        "changes": [{"path": "/workspace/calc.py", "kind": "update"}]
    }
    assert steps[7]["is_error"] is False
    assert steps[7]["content"] == "..\n2 passed in 0.02s\n"


def test_codex_failed_turn_has_no_report_and_no_usage() -> None:
    report = parse_stream("codex", stream("codex_turn_failed.jsonl"))

    assert report.final_report is None
    assert (report.input_tokens, report.output_tokens, report.cached_tokens) == (None, None, None)
    assert report.tool_calls == 0
    assert report.problems == [
        (
            "the agent reported an error: Reconnecting... 1/5 (stream disconnected before completion: "
            "429 Too Many Requests)"
        ),
        "the turn failed: exceeded retry limit, last status: 429 Too Many Requests",
    ]


def test_codex_truncated_stream() -> None:
    report = parse_stream("codex", stream("codex_truncated.jsonl"))

    # An agent message arrived, but the turn never completed: not a final report.
    assert report.final_report is None
    assert report.input_tokens is None
    assert report.tool_calls == 1
    assert report.problems == [
        "2 lines were not JSON objects (first: line 4)",
        "the last line (8) is cut off: the stream ended mid-line",
        "1 item started but never completed",
        "the stream has no `turn.completed` event: the agent did not finish",
    ]


def test_codex_usage_is_the_threads_total_so_far_and_the_last_turn_answers() -> None:
    """Codex 0.171's `turn.completed.usage` is the thread's total so far (measured: after `exec
    resume --last` it counts the earlier runs too), so the last one is the run's, never a sum;
    the new fields `cache_write_input_tokens` and `reasoning_output_tokens` are read."""
    out = lines(
        '{"type":"turn.started"}',
        '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"first"}}',
        '{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10}}',
        '{"type":"turn.started"}',
        '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"second"}}',
        '{"type":"turn.completed","usage":{"input_tokens":250,"cached_input_tokens":100,'
        '"cache_write_input_tokens":40,"output_tokens":20,"reasoning_output_tokens":7}}',
    )
    report = parse_stream("codex", out)

    assert report.final_report == "second"
    assert (report.input_tokens, report.cached_tokens, report.output_tokens) == (250, 100, 20)
    assert (report.cache_write_tokens, report.reasoning_tokens) == (40, 7)
    assert report.reserved_tokens() == {
        "tokens": {"input": 250, "output": 20, "cached": 100, "cache_write": 40, "reasoning": 7}
    }


def test_codex_legacy_format_is_named() -> None:
    out = '{"id":"0","msg":{"type":"agent_message","message":"hi"}}\n'
    report = parse_stream("codex", out)

    assert report.final_report is None
    assert any("old {id, msg} format" in p for p in report.problems)


# -- generic jsonl and text --------------------------------------------------------------------


def test_generic_jsonl_stream() -> None:
    report = parse_stream("jsonl", stream("generic.jsonl"))

    assert report.final_report == "Canberra"
    assert (report.input_tokens, report.output_tokens, report.cached_tokens) == (1520, 48, 1024)
    assert report.cost_usd == pytest.approx(0.00131)
    assert report.turns is None
    assert report.tool_calls == 1
    assert [s["role"] for s in report.trajectory] == ["assistant", "tool", "assistant"]
    assert report.trajectory[0]["tool_calls"] == [
        {"name": "search", "arguments": {"q": "capital of Australia"}}
    ]
    assert report.problems == []


def test_generic_jsonl_takes_the_last_result_and_prefers_result_over_output() -> None:
    out = lines(
        '{"result": "draft", "usage": {"input_tokens": 5}}',
        "progress: 50%",
        '{"output": "ignored", "result": "final answer"}',
        '{"note": "no report here"}',
    )
    report = parse_stream("jsonl", out)

    assert report.final_report == "final answer"
    assert report.input_tokens == 5
    assert report.output_tokens is None
    assert report.cost_usd is None
    assert report.tool_calls is None  # no steps: the stream did not say
    assert report.problems == ["1 line was not a JSON object (first: line 2)"]


def test_generic_jsonl_without_a_report() -> None:
    report = parse_stream("jsonl", '{"usage": {"output_tokens": 3}}\n[1, 2]\n')

    assert report.final_report is None
    assert report.output_tokens == 3
    assert report.problems == [
        "1 line was not a JSON object (first: line 2)",
        "no object with a `result`, `final` or `output` string: no final report",
    ]


def test_text_parser_is_stdout() -> None:
    assert parse_stream("text", "\n  The answer is 42.\n") == AgentReport(final_report="The answer is 42.")
    empty = parse_stream("text", "  \n")
    assert empty.final_report is None
    assert empty.problems == ["the agent wrote nothing to stdout"]


def test_unknown_parser_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown parser 'xml'; known: jsonl, claude-code, codex, text"):
        parse_stream("xml", "")  # type: ignore[arg-type]


def test_default_parser_per_adapter() -> None:
    assert parser_name(AgentSpec(adapter="cli", command=["x"])) == "text"
    assert parser_name(AgentSpec(adapter="claude-code")) == "claude-code"
    assert parser_name(AgentSpec(adapter="codex")) == "codex"
    assert parser_name(AgentSpec(adapter="cli", command=["x"], parser="jsonl")) == "jsonl"


# -- the command line --------------------------------------------------------------------------


def test_claude_code_command_line() -> None:
    spec = AgentSpec(adapter="claude-code", model=CLAUDE_MODEL)

    assert command_line(spec, "Fix the bug", "/run/prompt.txt") == [
        "claude", "-p", "--output-format", "stream-json", "--verbose", "--model", CLAUDE_MODEL,
        "--dangerously-skip-permissions", "--", "Fix the bug",
    ]  # fmt: skip


def test_codex_command_line() -> None:
    spec = AgentSpec(adapter="codex", model=CODEX_MODEL)

    assert command_line(spec, "-v looks like a flag", "/run/prompt.txt") == [
        "codex", "exec", "--json", "--model", CODEX_MODEL, "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox", "--", "-v looks like a flag",
    ]  # fmt: skip


def test_cli_template_fills_each_argument_without_a_shell() -> None:
    spec = AgentSpec(
        adapter="cli",
        model="my-model-v3",
        command=["agent", "--model={model}", "--task-file", "{prompt_file}", "{prompt}", "{{literal}}"],
    )
    prompt = "say 'hi'; rm -rf / {model} $HOME"

    argv = command_line(spec, prompt, "/run/prompt.txt")

    # The prompt is one argument, as is; a placeholder inside the prompt is not filled again.
    assert argv == ["agent", "--model=my-model-v3", "--task-file", "/run/prompt.txt", prompt, "{literal}"]


def test_command_line_never_holds_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("TOOL_TOKEN", "tok-123456789")
    spec = AgentSpec(adapter="claude-code", model=CLAUDE_MODEL, secrets=["TOOL_TOKEN"])
    secrets = secret_values(spec, os.environ)

    argv = command_line(spec, "Fix the bug", "/run/prompt.txt")

    assert not any(value in arg for value in secrets.values() for arg in argv)
    assert set(secrets) == {"ANTHROPIC_API_KEY", "TOOL_TOKEN"}


def test_unknown_placeholder_is_a_clear_error() -> None:
    spec = AgentSpec(adapter="cli", command=["agent", "--key={api_key}"])

    with pytest.raises(SpecError, match=r"agent\.command\[1\] '--key=\{api_key\}': unknown placeholder "):
        command_line(spec, "p", "/f")


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ("{prompt!r}", "takes no format or conversion"),
        ("{prompt:>10}", "takes no format or conversion"),
        ("{prompt", "literal brace"),
        ("}", "literal brace"),
        ("{prompt.upper}", "unknown placeholder"),
    ],
)
def test_malformed_placeholders_are_refused(part: str, message: str) -> None:
    spec = AgentSpec(adapter="cli", command=[part])
    with pytest.raises(SpecError, match=message):
        command_line(spec, "p", "/f")
    assert any(message in p for p in preflight(spec, {}))


def test_model_placeholder_without_a_model_is_an_error() -> None:
    spec = AgentSpec(adapter="cli", command=["agent", "{model}"])
    with pytest.raises(SpecError, match=r"\{model\} is used but agent.model is not set"):
        command_line(spec, "p", "/f")


# -- secrets and the env-file ------------------------------------------------------------------


def test_env_file_holds_one_variable_per_line_taken_literally() -> None:
    values = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "EXTRA": "a = b # not a comment $HOME", "EMPTY_OK": " x"}
    assert env_file_text(values) == (
        f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}\nEXTRA=a = b # not a comment $HOME\nEMPTY_OK= x\n"
    )


@pytest.mark.parametrize("value", ["line one\nline two", "carriage\rreturn", "nul\x00byte"])
def test_env_file_refuses_values_it_cannot_carry(value: str) -> None:
    with pytest.raises(InputError, match="the value of BAD holds a line break or NUL") as caught:
        env_file_text({"GOOD": "fine", "BAD": value})
    assert value not in str(caught.value)  # the value itself is never shown


def test_env_file_refuses_bad_names_and_undecodable_values() -> None:
    with pytest.raises(InputError) as caught:
        env_file_text({"NOT A NAME": "x", "RAW": "caf\udce9"})
    assert caught.value.problems == [
        "'NOT A NAME' is not an environment variable name (letters, digits, _)",
        "the value of RAW is not valid UTF-8",
    ]


def test_secret_values_reads_provider_keys_and_secrets() -> None:
    spec = AgentSpec(adapter="codex", model=CODEX_MODEL, secrets=["GH_TOKEN", "OPENAI_API_KEY"])
    environ = {"OPENAI_API_KEY": OPENAI_KEY, "GH_TOKEN": "ghp_abc", "UNRELATED": "nope"}

    assert secret_values(spec, environ) == {"OPENAI_API_KEY": OPENAI_KEY, "GH_TOKEN": "ghp_abc"}


def test_secret_values_names_what_is_missing() -> None:
    spec = AgentSpec(adapter="claude-code", model=CLAUDE_MODEL, secrets=["GH_TOKEN"])
    with pytest.raises(InputError, match="not set \\(or empty\\): ANTHROPIC_API_KEY, GH_TOKEN"):
        secret_values(spec, {"ANTHROPIC_API_KEY": "", "GH_TOKEN": ""})


def test_secret_values_redact_a_transcript_with_the_capture_redactor() -> None:
    spec = AgentSpec(adapter="cli", command=["agent"], secrets=["TOOL_TOKEN"])
    secrets = secret_values(spec, {"TOOL_TOKEN": "tok-9f8e7d6c5b"})
    transcript = '{"type":"tool_result","content":"export TOOL_TOKEN=tok-9f8e7d6c5b"}'

    assert Redactor(list(secrets.values()), []).text(transcript) == (
        '{"type":"tool_result","content":"export TOOL_TOKEN=[REDACTED]"}'
    )


# -- preflight ---------------------------------------------------------------------------------

KEYS = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "OPENAI_API_KEY": OPENAI_KEY}


@pytest.mark.parametrize(
    "spec",
    [
        AgentSpec(adapter="claude-code", model=CLAUDE_MODEL),
        AgentSpec(adapter="codex", model="gpt-6-sol"),
        AgentSpec(adapter="cli", command=["agent", "{prompt}"]),
        AgentSpec(adapter="cli", command=["agent", "-m", "{model}"], model="gpt-4o-2024-08-06"),
    ],
)
def test_preflight_passes_a_runnable_agent(spec: AgentSpec) -> None:
    assert preflight(spec, KEYS) == []


def test_preflight_unknown_adapter_lists_the_known_ones() -> None:
    spec = AgentSpec(adapter="aider", model=CLAUDE_MODEL)
    assert preflight(spec, KEYS) == [
        "agent.adapter 'aider' is not a known adapter; known: claude-code, cli, codex"
    ]


def test_preflight_missing_provider_key_names_it_and_never_a_value() -> None:
    spec = AgentSpec(adapter="claude-code", model=CLAUDE_MODEL)
    problems = preflight(spec, {"OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ""})

    assert problems == [
        (
            "agent.adapter claude-code needs the provider key variable ANTHROPIC_API_KEY, "
            "which is not set (or empty) in the host environment"
        )
    ]
    assert OPENAI_KEY not in " ".join(problems)


def test_preflight_missing_secret_variable() -> None:
    spec = AgentSpec(adapter="codex", model=CODEX_MODEL, secrets=["GH_TOKEN"])
    assert preflight(spec, KEYS) == [
        "agent.secrets names host environment variables that are not set (or empty): GH_TOKEN"
    ]


@pytest.mark.parametrize("adapter", ["claude-code", "codex"])
def test_preflight_builtins_need_a_model(adapter: str) -> None:
    assert preflight(AgentSpec(adapter=adapter), KEYS) == [
        f"agent.model is required by the {adapter} adapter: name an exact, dated model version"
    ]


def test_preflight_cli_needs_a_command_and_a_model_when_it_uses_one() -> None:
    assert preflight(AgentSpec(adapter="cli"), {}) == [
        'agent.command is required for the cli adapter: the argv to run, e.g. ["my-agent", "--task", "{prompt}"]'
    ]
    assert preflight(AgentSpec(adapter="cli", command=["a", "--model={model}"]), {}) == [
        "agent.model is required: agent.command uses {model}; name an exact model version"
    ]


def test_preflight_unpinned_model() -> None:
    spec = AgentSpec(adapter="claude-code", model="claude-sonnet-4")
    assert preflight(spec, KEYS) == [
        (
            "agent.model 'claude-sonnet-4' is not pinned: Anthropic names without a date stamp move to new "
            "snapshots; name a dated version such as claude-sonnet-4-20250514"
        )
    ]


@pytest.mark.parametrize("model", ["gpt-5-2025-08-07", "o3-2025-04-16", "gpt-4-0613"])
def test_codex_refuses_a_dated_model_its_catalog_does_not_know(model: str) -> None:
    """Codex 0.171's catalog holds undated names: a dated one runs on fallback metadata with
    another tool set (measured: an `error` item says so, and `apply_patch` is not offered)."""
    (problem,) = preflight(AgentSpec(adapter="codex", model=model), KEYS)
    assert problem.startswith(f"agent.model {model!r} is dated, and Codex's model catalog knows undated")
    assert "Name the undated model (e.g. gpt-5.5)" in problem and "agent_version" in problem


def test_codex_pins_by_undated_name_but_not_by_latest() -> None:
    assert preflight(AgentSpec(adapter="codex", model="gpt-5.5"), KEYS) == []
    assert preflight(AgentSpec(adapter="codex", model="gpt-daybreak-red-latest"), KEYS) == [
        (
            "agent.model 'gpt-daybreak-red-latest' is a moving alias ('latest'); name a model of Codex's "
            "catalog, e.g. gpt-5.5"
        )
    ]


def test_preflight_plain_and_secret_variable_overlap() -> None:
    spec = AgentSpec(adapter="claude-code", model=CLAUDE_MODEL, env={"ANTHROPIC_API_KEY": "oops"})
    assert preflight(spec, KEYS) == [
        "agent.env and agent.secrets both name ANTHROPIC_API_KEY: a variable is either plain or secret"
    ]


def test_preflight_reports_every_problem_at_once() -> None:
    spec = AgentSpec(
        adapter="codex",
        model="latest",
        command=["codex", "exec", "{task}"],
        secrets=["GH_TOKEN"],
        env={"GH_TOKEN": "x"},
    )
    problems = preflight(spec, {})

    assert len(problems) == 5
    assert problems[0].startswith("agent.command[2] '{task}': unknown placeholder {task}")
    assert problems[1] == (
        "agent.model 'latest' is a moving alias ('latest'); name a model of Codex's catalog, e.g. gpt-5.5"
    )
    assert "OPENAI_API_KEY" in problems[2]
    assert problems[3].endswith(": GH_TOKEN")
    assert problems[4].startswith("agent.env and agent.secrets both name GH_TOKEN")


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-20250514",
        "claude-3-5-sonnet-20241022",
        "claude-opus-4-1-20250805",
        "anthropic/claude-sonnet-4-20250514",
        "claude-sonnet-4@20250514",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "gpt-4o-2024-08-06",
        "gpt-4o-mini-2024-07-18",
        "gpt-5-2025-08-07",
        "o3-2025-04-16",
        "o3-mini-2025-01-31",
        "gpt-4-0613",
        "gpt-3.5-turbo-0125",
        "ft:gpt-4o-2024-08-06:acme::9xYz",
        "llama3.1:8b-instruct-q4_K_M",
        "my-finetune-v7",
    ],
)
def test_pinned_models_pass(model: str) -> None:
    assert model_pin_problem(model) is None


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("latest", "moving alias"),
        ("LATEST", "moving alias"),
        ("claude-3-5-sonnet-latest", "moving alias"),
        ("chatgpt-4o-latest", "moving alias"),
        ("codex-mini-latest", "moving alias"),
        ("qwen2.5-coder:latest", "moving alias"),
        ("sonnet", "Claude Code alias"),
        ("opus", "Claude Code alias"),
        ("sonnet[1m]", "Claude Code alias"),
        ("claude-sonnet-4", "Anthropic names without a date stamp"),
        ("claude-sonnet-4-5", "Anthropic names without a date stamp"),
        ("claude-sonnet-4-2025", "Anthropic names without a date stamp"),
        ("gpt-4o", "OpenAI names without a date stamp"),
        ("gpt-5", "OpenAI names without a date stamp"),
        ("gpt-5-codex", "OpenAI names without a date stamp"),
        ("openai/gpt-4.1", "OpenAI names without a date stamp"),
        ("o3", "OpenAI names without a date stamp"),
        ("o4-mini", "OpenAI names without a date stamp"),
        ("gpt-4o-2024-13-06", "OpenAI names without a date stamp"),
        ("   ", "blank"),
    ],
)
def test_moving_aliases_are_refused(model: str, why: str) -> None:
    problem = model_pin_problem(model)
    assert problem is not None and why in problem


# -- the spec ----------------------------------------------------------------------------------


def test_agent_spec_is_strict_and_frozen() -> None:
    with pytest.raises(ValidationError, match="extra_forbidden"):
        AgentSpec(adapter="cli", command=["x"], api_key="sk-123")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="frozen"):
        AgentSpec(adapter="cli", command=["x"]).model = "m"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="literal_error"):
        AgentSpec(adapter="cli", command=["x"], parser="xml")  # type: ignore[arg-type]


def test_agent_spec_checks_variable_names_and_plain_values() -> None:
    with pytest.raises(ValidationError, match="'MY-KEY' is not an environment variable name"):
        AgentSpec(adapter="cli", command=["x"], secrets=["MY-KEY"])
    with pytest.raises(ValidationError, match="the value of NOTE holds a line break"):
        AgentSpec(adapter="cli", command=["x"], env={"NOTE": "a\nb"})


# -- what each adapter sets up for its CLI -----------------------------------------------------


def test_codex_gets_the_key_as_codex_api_key_through_the_env_file() -> None:
    """`codex exec` reads CODEX_API_KEY only: with OPENAI_API_KEY alone its requests go out
    without Authorization. The host's OPENAI_API_KEY reaches the container under that name."""
    spec = AgentSpec(adapter="codex", model=CODEX_MODEL, secrets=["GH_TOKEN"])
    inside = container_secrets(spec, secret_values(spec, {"OPENAI_API_KEY": OPENAI_KEY, "GH_TOKEN": "g"}))
    assert inside == {"CODEX_API_KEY": OPENAI_KEY, "GH_TOKEN": "g"}
    assert env_file_text(inside) == f"CODEX_API_KEY={OPENAI_KEY}\nGH_TOKEN=g\n"
    assert not any(OPENAI_KEY in arg for arg in command_line(spec, "p", "/assay/prompt.txt"))
    claude = AgentSpec(adapter="claude-code", model=CLAUDE_MODEL)
    assert container_secrets(claude, {"ANTHROPIC_API_KEY": "k"}) == {"ANTHROPIC_API_KEY": "k"}


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [(None, "https://api.openai.com/v1"), ("http://10.1.2.3:8000/v1", "http://10.1.2.3:8000/v1")],
)
def test_codex_config_names_the_endpoint_as_a_provider_without_websockets(
    base_url: str | None, expected: str
) -> None:
    """Codex ignores OPENAI_BASE_URL and first tries a WebSocket (five `error` events, ~6 s)
    unless its provider says `supports_websockets = false`."""
    settings = agent_settings(AgentSpec(adapter="codex", model=CODEX_MODEL, base_url=base_url))
    config = tomllib.loads(settings.home_files[".codex/config.toml"])
    assert config["model_provider"] == "assay"
    assert config["check_for_update_on_startup"] is False
    assert config["model_providers"]["assay"] == {
        "name": "assay",
        "base_url": expected,
        "env_key": "CODEX_API_KEY",
        "wire_api": "responses",
        "supports_websockets": False,
    }
    assert settings.env == {}


def test_claude_code_never_makes_other_calls_and_takes_the_endpoint_as_its_base_url() -> None:
    plain = agent_settings(AgentSpec(adapter="claude-code", model=CLAUDE_MODEL))
    assert plain.env == {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"} and plain.home_files == {}
    pointed = agent_settings(AgentSpec(adapter="claude-code", model=CLAUDE_MODEL, base_url="http://gw:9"))
    assert pointed.env == {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ANTHROPIC_BASE_URL": "http://gw:9",
    }


def test_base_url_is_for_the_built_in_adapters_only() -> None:
    spec = AgentSpec(adapter="cli", command=["agent"], base_url="http://gw:9")
    assert preflight(spec, {}) == [
        (
            "agent.base_url is for the built-in adapters' CLIs (claude-code, codex); the cli adapter's "
            "command gets its endpoint from agent.env"
        )
    ]


def test_a_refused_key_stops_the_run_at_its_first_retry() -> None:
    """Claude Code retries a 401 ten times over ~3 minutes, Codex five times: the first retry
    event stops the run, with a failure naming the variable (never its value)."""
    claude = stop_watch(AgentSpec(adapter="claude-code", model=CLAUDE_MODEL))
    assert claude is not None
    assert not claude.feed(b'{"type":"system","subtype":"init"}\n{"type":"system","subtype":"api_')
    assert not claude.feed(b'retry","error_status":529}\n')  # overloaded: worth its retries
    assert claude.feed(b'{"type":"system","subtype":"api_retry","attempt":1,"error_status":401}\n')
    assert claude.stop == Stop(
        "the provider refused the key (HTTP 401): ANTHROPIC_API_KEY is wrong or revoked", 401
    )

    codex = stop_watch(AgentSpec(adapter="codex", model=CODEX_MODEL))
    assert codex is not None
    assert not codex.feed(b'{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}\n')
    refused = "Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided., url: x)"
    assert codex.feed(json.dumps({"type": "error", "message": refused}).encode() + b"\n")
    assert codex.stop == Stop(
        "the provider refused the key (HTTP 401): OPENAI_API_KEY (passed to Codex as CODEX_API_KEY) is "
        "wrong or revoked",
        401,
    )
    assert stop_watch(AgentSpec(adapter="cli", command=["x"])) is None
    assert stop_watch(AgentSpec(adapter="claude-code", model=CLAUDE_MODEL, parser="jsonl")) is None


def test_a_resumed_conversations_totals_become_the_runs_own() -> None:
    """After `--continue` / `exec resume --last` the CLIs report the conversation's totals: a
    turn keeps what it added, so summing the turns never counts one twice."""
    first = AgentReport(final_report="a", input_tokens=100, output_tokens=10, cost_usd=0.5)
    second = AgentReport(final_report="b", input_tokens=260, output_tokens=25, cost_usd=0.75)
    totals = frozenset({"input_tokens", "output_tokens", "cost_usd"})
    delta = second.since(first, totals)
    assert (delta.input_tokens, delta.output_tokens, delta.cost_usd) == (160, 15, 0.25)
    assert delta.final_report == "b"

    unknown = AgentReport(final_report="c", input_tokens=None, output_tokens=None, cost_usd=None)
    kept = unknown.latest_totals(second, totals)
    assert (kept.input_tokens, kept.cost_usd) == (260, 0.75)  # a run that said nothing keeps the last

    down = AgentReport(input_tokens=50, output_tokens=30, cost_usd=1.0).since(second, totals)
    assert down.input_tokens is None and down.output_tokens == 5
    assert down.problems == ["input_tokens went down after the resume (260 → 50): not split"]


def test_check_keys_tries_the_endpoint_the_spec_names() -> None:
    """`--check-keys` asks `agent.base_url` (where the CLI will go), not the provider's default."""
    from assay.spec import ContainerTarget
    from assay.targets.container.keys import key_problems

    with ScriptedModels(host="127.0.0.1", key="k") as server:  # answers 404 off its model routes
        agent = {"adapter": "codex", "model": CODEX_MODEL, "base_url": f"{server.base_url}/v1"}
        spec = ContainerTarget(kind="container", image="x", agent=agent)
        assert key_problems(spec, {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9"}) == [
            (
                f"target.agent: OPENAI_API_KEY (--check-keys, GET {server.base_url}/v1/models): "
                "the provider answered HTTP 404"
            )
        ]
        assert [(s.method, s.path) for s in server.seen] == [("GET", "/v1/models")]
