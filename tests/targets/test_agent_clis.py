"""The real agent CLIs in Assay's sandbox: Codex (`@openai/codex`) and Claude Code
(`@anthropic-ai/claude-code`), the pinned versions `tests/helpers/sandbox_images.py` installs from npm,
against a scripted model server (`assay.testing.agent_models`: the Responses API for Codex, the
Messages API for Claude Code, every event checked against the official SDK's types).

The server runs on the host, bound to the gateway of an internal Docker network this module
creates: the attempt's egress proxy joins that network (`target.egress_network`) and lets through
only the server's address, so the CLIs' calls elsewhere (api.anthropic.com, chatgpt.com, GitHub)
are refused and nothing leaves the machine. Each test scripts the model to make the agent do
real work (run a shell command, apply a patch, write a file), then asserts what Assay stored.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assay.store import Store
from assay.testing.agent_models import Call, Reply, ScriptedModels
from tests.conftest import write_jsonl, write_spec
from tests.helpers.sandbox_images import (
    CLAUDE_CODE_VERSION,
    CODEX_VERSION,
    agents_image,
    engine,
    python_image,
)

pytestmark = [pytest.mark.docker]

KEY = "sk-scripted-" + "7f3a" * 8
CODEX_MODEL = "gpt-5.5"
CLAUDE_MODEL = "claude-sonnet-4-20250514"
# What Claude Code 2.1.332 prices claude-sonnet-4-20250514 at (USD per token): its
# `total_cost_usd` is computed from the usage the server reports.
SONNET_INPUT, SONNET_OUTPUT = 3e-6, 15e-6
# The one field Codex sends that the SDK's request type does not have.
CODEX_EXTENSIONS = ["unknown field 'client_metadata'"]


@dataclass(frozen=True)
class Lab:
    """The scripted server, on the gateway of an internal network of this module's own, and the
    images: what each test's spec points at."""

    models: ScriptedModels
    network: str
    agents_image: str
    proxy_image: str

    def spec(self, tmp_path: Path, agent: dict[str, Any], *, check: str, policy: str | None = None) -> Path:
        """A one-item eval of `agent` on the agents image, reaching only the scripted server."""
        write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "input": "Create hello.txt saying hello."}])
        extra: dict[str, Any] = {}
        if policy is not None:
            module = f"policy_{uuid.uuid4().hex[:10]}"
            (tmp_path / f"{module}.py").write_text(textwrap.dedent(policy))
            extra["policy"] = f"{module}:policy"
        base = self.models.base_url + ("/v1" if agent["adapter"] == "codex" else "")
        return write_spec(
            tmp_path,
            name=f"real-{agent['adapter']}",
            dataset={"path": "data.jsonl", "id": "id"},
            target={
                "kind": "container",
                "image": self.agents_image,
                "agent": {**agent, "base_url": base},
                "output": "report",
                "egress": [f"{self.models.host}:{self.models.port}"],
                "egress_proxy_image": self.proxy_image,
                "egress_network": self.network,
                "limits": {"memory": "2g", "cpus": 1.0},
                "deadlines": {"agent": 120},
            },
            scorers=[{"kind": "code_exec", "checks": [check]}],
            fail_on_item_error_rate=1,
            **extra,
        )


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    client = engine()
    images = agents_image(client), python_image(client)
    network = client.networks.create(
        f"assay-test-models-{uuid.uuid4().hex[:8]}",
        driver="bridge",
        internal=True,
        labels={"assay.test": "1"},
    )
    try:
        network.reload()
        gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
        with ScriptedModels(host=gateway, key=KEY) as models:
            yield Lab(models, network.name, *images)
    finally:
        network.remove()


def _run(spec: Path, store: Path) -> tuple[str, Store, float]:
    from assay.flows.run import run_eval  # Prefect: imported by the test that needs it, not at collection
    from assay.orchestrate.run import RunRequest

    started = time.monotonic()
    summary = asyncio.run(run_eval.fn(RunRequest(spec=str(spec), store=str(store))))
    return summary["run_id"], Store(store), time.monotonic() - started


def _stored(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file())


def _the_wire_was_clean(models: ScriptedModels, path: str, extensions: list[str]) -> list[Any]:
    """Every request went to `path` with the key, was a valid SDK request, and none tried a
    WebSocket or another route; returns their bodies."""
    seen = list(models.seen)
    assert [(s.method, s.path.split("?")[0]) for s in seen] == [("POST", path)] * len(seen)
    assert all(s.key_ok and s.upgrade is None for s in seen)
    assert all(s.problems == extensions for s in seen), [s.problems for s in seen]
    return [s.body for s in seen]


# -- Codex -------------------------------------------------------------------------------------


PATCH = "*** Begin Patch\n*** Add File: notes.md\n+patched by codex\n*** End Patch\n"


def test_codex_runs_its_shell_and_patch_tools_against_the_endpoint_its_config_names(
    tmp_path: Path, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key reaches `codex exec` as CODEX_API_KEY (every request carries it), the endpoint is
    its config's model provider (no WebSocket try, no error events), and what it did is stored:
    its answer, its thread's usage with the new fields, its trajectory and the workspace's diff."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    lab.models.script(
        responses=[
            Reply(
                calls=(Call("exec_command", {"cmd": "printf 'hello from codex\\n' > hello.txt"}),),
                input_tokens=1200,
                cached_tokens=200,
                cache_write_tokens=300,
                output_tokens=40,
                reasoning_tokens=12,
            ),
            Reply(
                calls=(Call("apply_patch", PATCH),), input_tokens=1300, cached_tokens=1000, output_tokens=30
            ),
            Reply(
                text="Wrote hello.txt and notes.md.", input_tokens=1400, cached_tokens=1200, output_tokens=8
            ),
        ]
    )
    spec = lab.spec(
        tmp_path,
        {"adapter": "codex", "model": CODEX_MODEL},
        check="grep -qx 'hello from codex' /workspace/hello.txt && grep -qx 'patched by codex' /workspace/notes.md",
    )
    run_id, store, _ = _run(spec, tmp_path / "store")

    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert json.loads(row["output"]) == "Wrote hello.txt and notes.md."
    (score,) = store.run_scores(run_id).to_dicts()
    assert score["score"] == 1.0, score["error"]
    # The turn's usage: its three requests', with cache writes and reasoning as their own kinds.
    assert json.loads(row["caller_reserved"]) == {
        "tokens": {"input": 3900, "output": 78, "cached": 2400, "cache_write": 300, "reasoning": 12}
    }
    assert row["caller_cost_usd"] is None  # Codex reports no cost
    metadata = json.loads(row["caller_metadata"])
    assert "problems" not in metadata, metadata["problems"]  # no WebSocket fallback, no fallback metadata
    assert metadata["tool_calls"] == 2
    # Three requests, each with the key, valid, none a WebSocket upgrade; the tools' results went back.
    bodies = _the_wire_was_clean(lab.models, "/v1/responses", CODEX_EXTENSIONS)
    assert len(bodies) == 3 and {b["model"] for b in bodies} == {CODEX_MODEL}
    returned = [
        i for i in bodies[2]["input"] if i.get("type") in ("function_call_output", "custom_tool_call_output")
    ]
    assert [i["type"] for i in returned] == ["function_call_output", "custom_tool_call_output"]
    folder = store.artifacts_dir(run_id, "a", 0)
    diff = (folder / "diff.patch").read_text()
    assert "+hello from codex" in diff and "+patched by codex" in diff
    steps = json.loads((folder / "trajectory.json").read_text())["steps"]
    calls = [c["name"] for s in steps for c in s["tool_calls"]]
    assert calls == ["command_execution", "file_change"]
    assert steps[-1] == {"role": "assistant", "content": "Wrote hello.txt and notes.md.", "tool_calls": []}
    snapshot = json.loads(store.read_run(run_id)["target_snapshot"])
    assert snapshot["agent_version"] == f"codex-cli {CODEX_VERSION}"
    assert snapshot["egress_allowlist"] == [f"{lab.models.host}:{lab.models.port}"]
    assert KEY.encode() not in _stored(tmp_path / "store")


RESUME = """
async def policy(session):
    await session.start(session.prompt)
    await session.resume("Now say what you did.")
"""


def test_codex_resume_reports_the_threads_total_and_each_prompt_keeps_its_own(
    tmp_path: Path, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `exec resume --last` Codex's `turn.completed.usage` is the thread's total: the
    second prompt's figures are what it added, and the attempt's are the thread's, not more."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    lab.models.script(
        responses=[
            Reply(
                calls=(Call("exec_command", {"cmd": "echo hello > hello.txt"}),),
                input_tokens=1000,
                output_tokens=20,
            ),
            Reply(text="Created it.", input_tokens=1100, output_tokens=5),
            Reply(text="I wrote hello.txt.", input_tokens=1500, cached_tokens=1100, output_tokens=7),
        ]
    )
    spec = lab.spec(
        tmp_path,
        {"adapter": "codex", "model": CODEX_MODEL},
        check="grep -qx hello /workspace/hello.txt",
        policy=RESUME,
    )
    run_id, store, _ = _run(spec, tmp_path / "store")

    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert json.loads(row["output"]) == "I wrote hello.txt."
    # The thread's total (3600 in, 32 out), not the first prompt's counted twice (5700, 57).
    assert json.loads(row["caller_reserved"])["tokens"] == {
        "input": 3600, "output": 32, "cached": 1100, "cache_write": 0, "reasoning": 0
    }  # fmt: skip
    transcripts = store.artifacts_dir(run_id, "a", 0) / "attempt-1"
    second = [json.loads(line) for line in (transcripts / "transcript-1.txt").read_text().splitlines()]
    (usage,) = [e["usage"] for e in second if e.get("type") == "turn.completed"]
    assert usage["input_tokens"] == 3600  # what Codex said: the thread's, after the resume
    _the_wire_was_clean(lab.models, "/v1/responses", CODEX_EXTENSIONS)


def test_codex_with_a_refused_key_is_stopped_at_once_and_says_the_key_is_wrong(
    tmp_path: Path, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-revoked-" + "0" * 20)
    lab.models.script(responses=[Reply(text="never")])
    spec = lab.spec(tmp_path, {"adapter": "codex", "model": CODEX_MODEL}, check="true")
    run_id, store, _ = _run(spec, tmp_path / "store")

    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "failed"
    assert row["error"] == (
        "the agent was stopped: the provider refused the key (HTTP 401): OPENAI_API_KEY (passed to "
        "Codex as CODEX_API_KEY) is wrong or revoked"
    )
    assert (row["failure_kind"], row["failure_http_status"]) == ("http", 401)
    # Stopped at its first retry: without that, it would send six requests, then exit 1.
    assert 1 <= len(lab.models.requests("/v1/responses")) <= 2


# -- Claude Code -------------------------------------------------------------------------------


def _claude_cost(*replies: Reply) -> float:
    return sum(r.input_tokens * SONNET_INPUT + r.output_tokens * SONNET_OUTPUT for r in replies)


def test_claude_code_writes_a_file_and_its_cost_and_usage_are_stored(
    tmp_path: Path, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code's Write tool edits the sandbox's workspace; its answer, usage, cost and
    trajectory are stored; with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC it calls nothing but
    the model (the egress proxy refused nothing)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    replies = [
        Reply(
            text="Writing it.",
            calls=(Call("Write", {"file_path": "/workspace/hello.txt", "content": "hello from claude\n"}),),
            input_tokens=900,
            output_tokens=30,
        ),
        Reply(text="Created hello.txt.", input_tokens=1000, output_tokens=6),
    ]
    lab.models.script(messages=list(replies))
    spec = lab.spec(
        tmp_path,
        {"adapter": "claude-code", "model": CLAUDE_MODEL},
        check="grep -qx 'hello from claude' /workspace/hello.txt",
    )
    run_id, store, _ = _run(spec, tmp_path / "store")

    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert json.loads(row["output"]) == "Created hello.txt."
    (score,) = store.run_scores(run_id).to_dicts()
    assert score["score"] == 1.0, score["error"]
    assert row["caller_cost_usd"] == pytest.approx(_claude_cost(*replies))
    assert json.loads(row["caller_reserved"]) == {
        "tokens": {"input": 1900, "output": 36, "cached": 0, "cache_write": 0}
    }
    assert json.loads(row["caller_metadata"]) == {"turns": 2, "tool_calls": 1}
    bodies = _the_wire_was_clean(lab.models, "/v1/messages", [])
    assert len(bodies) == 2 and {b["model"] for b in bodies} == {CLAUDE_MODEL}
    folder = store.artifacts_dir(run_id, "a", 0)
    assert "+hello from claude" in (folder / "diff.patch").read_text()
    steps = json.loads((folder / "trajectory.json").read_text())["steps"]
    assert [c["name"] for s in steps for c in s["tool_calls"]] == ["Write"]
    assert json.loads((folder / "egress-denials.json").read_text()) == []
    snapshot = json.loads(store.read_run(run_id)["target_snapshot"])
    assert snapshot["agent_version"] == f"{CLAUDE_CODE_VERSION} (Claude Code)"
    assert KEY.encode() not in _stored(tmp_path / "store")


def test_claude_code_continue_reports_the_conversations_cost_and_each_prompt_keeps_its_own(
    tmp_path: Path, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `--continue` Claude Code's `total_cost_usd` is the conversation's: the attempt's
    cost is the conversation's, never the first prompt's counted twice."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    first = [
        Reply(
            calls=(Call("Bash", {"command": "echo hello > hello.txt"}),), input_tokens=800, output_tokens=20
        ),
        Reply(text="Created it.", input_tokens=900, output_tokens=5),
    ]
    second = Reply(text="I wrote hello.txt with echo.", input_tokens=1200, output_tokens=9)
    lab.models.script(messages=[*first, second])
    spec = lab.spec(
        tmp_path,
        {"adapter": "claude-code", "model": CLAUDE_MODEL},
        check="grep -qx hello /workspace/hello.txt",
        policy=RESUME,
    )
    run_id, store, _ = _run(spec, tmp_path / "store")

    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "completed", row["error"]
    assert json.loads(row["output"]) == "I wrote hello.txt with echo."
    said = []
    for turn in (0, 1):
        transcript = (
            store.artifacts_dir(run_id, "a", 0) / "attempt-1" / f"transcript-{turn}.txt"
        ).read_text()
        said += [json.loads(line)["total_cost_usd"] for line in transcript.splitlines() if '"result"' in line]
    assert said[1] == pytest.approx(_claude_cost(*first, second))  # the conversation's, as measured
    assert row["caller_cost_usd"] == pytest.approx(_claude_cost(*first, second))
    # Its `usage`, unlike its cost, is the run's own (measured): summed over the prompts.
    assert json.loads(row["caller_reserved"])["tokens"] == {
        "input": 2900,
        "output": 34,
        "cached": 0,
        "cache_write": 0,
    }
    _the_wire_was_clean(lab.models, "/v1/messages", [])


def test_claude_code_with_a_refused_key_is_stopped_at_its_first_retry(
    tmp_path: Path, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left alone, Claude Code retries a 401 ten times over ~3 minutes and ends `subtype:
    success, is_error: true`; Assay stops it at the first `api_retry` and says the key is wrong."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-revoked-" + "0" * 20)
    lab.models.script(messages=[Reply(text="never")])
    spec = lab.spec(tmp_path, {"adapter": "claude-code", "model": CLAUDE_MODEL}, check="true")
    run_id, store, took = _run(spec, tmp_path / "store")

    (row,) = store.run_items(run_id).to_dicts()
    assert row["outcome"] == "failed"
    assert row["error"] == (
        "the agent was stopped: the provider refused the key (HTTP 401): ANTHROPIC_API_KEY is wrong or revoked"
    )
    assert (row["failure_kind"], row["failure_http_status"]) == ("http", 401)
    assert 1 <= len(lab.models.requests("/v1/messages")) <= 2
    assert took < 60, f"the run took {took:.0f} s"
