"""The tool loop (issue 26 §3b): with `tool_loop: true` a chat target runs its model's calls of its
Python tools (sync and async, under `tool_timeout`), sends the results back as each provider
documents (OpenAI a `tool` message, on the Responses API a `function_call_output` item; Anthropic
a `tool_result` block, `is_error: true` for a tool that failed) and asks again, until the model answers in words or `max_tool_rounds` rounds were
run (`failure_kind` `max_tool_rounds`). Against the scripted server on uvicorn, which checks every
request — the tool-result turns too — against the SDK's create-params and every reply against its
response types. The exchange is the item's trajectory: kept as `trajectory.json`, scored by the
`trajectory` scorer in the run and in a rescore of it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.cli import main
from assay.store import Store
from assay.testing.scripted import Reply, ScriptedServer, Stream
from tests.conftest import write_jsonl, write_spec
from tests.helpers.wire_payloads import (
    CLAUDE,
    OPENAI_MODEL,
    RESPONSES_MODEL,
    anthropic,
    function_call,
    openai,
    output_message,
    response,
    responses,
    text,
)
from tests.run.test_sessions import write_policy

TOOLS_MODULE = '''
import asyncio
import time


def get_weather(city: str) -> str:
    """The weather in a city now.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


async def population(city: str) -> dict:
    """How many live in a city."""
    await asyncio.sleep(0)
    return {"city": city, "people": {"Oslo": 709000}.get(city, 0)}


def explode(city: str) -> str:
    """A tool that fails."""
    raise ValueError(f"no station in {city}")


async def hang(city: str) -> str:
    """A tool that never returns."""
    await asyncio.sleep(3600)
    return "never"


def stall(city: str) -> str:
    """A sync tool that takes too long."""
    time.sleep(1.5)
    return "late"
'''

TOOLS = [f"loop_tools:{name}" for name in ("get_weather", "population", "explode", "hang", "stall")]


def _call(provider: str, call_id: str, name: str, city: str) -> dict[str, Any]:
    if provider == "responses":
        return function_call(call_id, name, {"city": city})
    if provider == "openai":
        arguments = json.dumps({"city": city})
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"city": city}}


def _calls(provider: str, *calls: tuple[str, str, str], stream: bool = False) -> Reply | Stream:
    made = [_call(provider, *call) for call in calls]
    if provider == "responses":
        return responses(response(made), stream=stream)
    if provider == "openai":
        return openai({"tool_calls": made}, "tool_calls", stream=stream)
    return anthropic(made, "tool_use", stream=stream)


def _words(provider: str, answer: str, stream: bool = False) -> Reply | Stream:
    if provider == "responses":
        return responses(response([output_message(answer)]), stream=stream)
    if provider == "openai":
        return openai({"content": answer}, stream=stream)
    return anthropic(text(answer), stream=stream)


def _target(provider: str, base_url: str, **fields: Any) -> dict[str, Any]:
    common = {
        "base_url": base_url,
        "prompt": "{question}",
        "max_retries": 0,
        "tools": TOOLS,
        "tool_loop": True,
        **fields,
    }
    if provider == "responses":
        return {"kind": "openai", "api": "responses", "model": RESPONSES_MODEL, **common}
    if provider == "openai":
        return {"kind": "openai", "model": OPENAI_MODEL, **common}
    return {"kind": "anthropic", "model": CLAUDE, "max_tokens": 64, **common}


def _spec(folder: Path, target: dict[str, Any], rows: list[dict[str, Any]], **fields: Any) -> Path:
    (folder / "loop_tools.py").write_text(TOOLS_MODULE)
    write_jsonl(folder / "data.jsonl", rows)
    return write_spec(
        folder,
        name="loop",
        dataset={"path": "data.jsonl", "id": "id", "input": "question"},
        target=target,
        concurrency=2,
        **fields,
    )


def _run(spec: Path, store: Path, capsys: pytest.CaptureFixture[str], code: int = 0) -> str:
    assert main(["run", str(spec), "--store", str(store), "--json"]) == code
    return str(json.loads(capsys.readouterr().out)["run_id"])


def _items(store: Path, run_id: str) -> dict[str, dict[str, Any]]:
    return {row["item_id"]: row for row in Store(store).run_items(run_id).iter_rows(named=True)}


def _bodies(server: ScriptedServer, question: str) -> list[dict[str, Any]]:
    """The bodies the server received for the item asking `question`, in order."""
    return [body for _, body in server.requests if question in json.dumps(body)]


def _results(provider: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results a request sends, as `{id, content, is_error}`."""
    if provider == "responses":
        return [
            {"id": i["call_id"], "content": i["output"], "is_error": False}
            for i in body["input"]
            if i.get("type") == "function_call_output"
        ]
    if provider == "openai":
        return [
            {"id": m["tool_call_id"], "content": m["content"], "is_error": False}
            for m in body["messages"]
            if m["role"] == "tool"
        ]
    return [
        {"id": b["tool_use_id"], "content": b["content"], "is_error": b.get("is_error", False)}
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def _turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's conversation: its messages, or (the Responses API) its input items."""
    return body["messages"] if "messages" in body else body["input"]


PROVIDERS = ["openai", "anthropic", "responses"]
PREFIX = {"openai": "call_", "anthropic": "toolu_", "responses": "call_"}
USAGE = {
    "openai": (9, 7),
    "anthropic": (12, 6),
    "responses": (36, 87),
}  # one reply's input and output tokens (wire_payloads)
TRAJECTORY = {"kind": "trajectory", "name": "tools_used", "mode": "exact"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_rounds_of_tool_calls_then_an_answer(tmp_path, scripted, capsys, provider, stream):
    prefix = PREFIX[provider]
    scripted.script(
        _calls(provider, (f"{prefix}1", "get_weather", "Paris"), stream=stream),
        _calls(
            provider,
            (f"{prefix}2", "get_weather", "Oslo"),
            (f"{prefix}3", "population", "Oslo"),
            stream=stream,
        ),
        _words(provider, "Paris and Oslo are sunny; Oslo has 709000 people.", stream=stream),
    )
    expected = ["get_weather", {"name": "get_weather", "arguments": {"city": "Oslo"}}, "population"]
    spec = _spec(
        tmp_path,
        _target(provider, scripted.base_url, stream=stream),
        [{"id": "one", "question": "weather in Paris and Oslo?"}],
        scorers=[{**TRAJECTORY, "expected": expected}],
        capture_requests=True,
    )
    store = tmp_path / "store"
    run_id = _run(spec, store, capsys)

    item = _items(store, run_id)["one"]
    assert (item["outcome"], item["failure_kind"]) == ("completed", None)
    assert json.loads(item["output"]) == "Paris and Oslo are sunny; Oslo has 709000 people."
    assert item["tool_calls"] is None  # the calls were run, not the answer
    # Usage summed over the three replies.
    tokens_in, tokens_out = USAGE[provider]
    assert (item["tokens_input"], item["tokens_output"]) == (3 * tokens_in, 3 * tokens_out)
    assert item["operations"] == 3  # each round a measured call of the target's one client

    # The server got three requests: the first as asked, then each with the tool results.
    first, second, third = _bodies(scripted, "weather in Paris and Oslo?")
    assert len(scripted.requests) == 3
    assert _results(provider, first) == []
    assert _results(provider, second) == [
        {"id": f"{prefix}1", "content": "sunny in Paris", "is_error": False}
    ]
    assert _results(provider, third) == [
        {"id": f"{prefix}1", "content": "sunny in Paris", "is_error": False},
        {"id": f"{prefix}2", "content": "sunny in Oslo", "is_error": False},
        {"id": f"{prefix}3", "content": '{"city":"Oslo","people":709000}', "is_error": False},
    ]
    # The assistant's calls are sent back before their results, in the provider's form.
    if provider == "openai":
        assert [m["role"] for m in third["messages"]] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "tool",
        ]
        assert third["messages"][3]["tool_calls"][1]["function"] == {
            "name": "population",
            "arguments": '{"city": "Oslo"}',
        }
    elif provider == "anthropic":
        assert [m["role"] for m in third["messages"]] == ["user", "assistant", "user", "assistant", "user"]
        assert [b["name"] for b in third["messages"][3]["content"]] == ["get_weather", "population"]
    else:  # output items: each call as its `function_call` item, each result a `function_call_output`
        assert [i.get("type", i.get("role")) for i in third["input"]] == [
            "user",
            "function_call",
            "function_call_output",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
        ]
        assert third["input"][4] == {
            "type": "function_call",
            "call_id": f"{prefix}3",
            "name": "population",
            "arguments": '{"city": "Oslo"}',
        }

    # The exchange is the trajectory the scorer read, kept as the item's `trajectory.json`.
    assert Store(store).run_scores(run_id).select("item_id", "score").rows() == [("one", 1.0)]
    [kept] = item["artifacts"]
    assert kept.endswith("/trajectory.json")
    steps = json.loads(Store(store).read_artifact(kept))["steps"]
    assert [(s["role"], [c["name"] for c in s["tool_calls"]]) for s in steps] == [
        ("user", []),
        ("assistant", ["get_weather"]),
        ("tool", []),
        ("assistant", ["get_weather", "population"]),
        ("tool", []),
        ("tool", []),
        ("assistant", []),
    ]
    assert [s.get("tool_call_id") for s in steps if s["role"] == "tool"] == [
        f"{prefix}{n}" for n in (1, 2, 3)
    ]

    # Each round's request was captured as the run's own, the tool results in its body.
    requests = Store(store).run_requests(run_id)
    sent = [json.loads(body) for body in requests.filter(pl.col("request").is_not_null())["request"]]
    assert sorted(len(_turns(body)) for body in sent) == [1, 3, len(_turns(third))]
    assert _turns(max(sent, key=lambda body: len(_turns(body)))) == _turns(third)

    # A rescore's scorer reads the kept trajectory, and `assay trajectories export` makes it ATIF.
    assert main(["rescore", run_id, "--spec", str(spec), "--store", str(store), "--json"]) == 0
    rescored = json.loads(capsys.readouterr().out)["run_id"]
    assert Store(store).run_scores(rescored).select("item_id", "score").rows() == [("one", 1.0)]
    assert main(["trajectories", "export", run_id, "--store", str(store)]) == 0
    [atif] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    agent = [step for step in atif["steps"] if step["source"] == "agent"]
    assert [[c["function_name"] for c in step.get("tool_calls", [])] for step in agent] == [
        ["get_weather"],
        ["get_weather", "population"],
        [],
    ]
    assert [r["source_call_id"] for r in agent[1]["observation"]["results"]] == [f"{prefix}2", f"{prefix}3"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_tool_that_raises_or_hangs_sends_the_model_its_error(tmp_path, scripted, capsys, provider):
    prefix = PREFIX[provider]
    scripted.script(
        _calls(provider, (f"{prefix}e", "explode", "Paris")),
        _words(provider, "no station there"),
        when="q-raises",
    )
    scripted.script(
        _calls(provider, (f"{prefix}h", "hang", "Oslo"), (f"{prefix}s", "stall", "Oslo")),
        _words(provider, "the tools are slow"),
        when="q-hangs",
    )
    spec = _spec(
        tmp_path,
        _target(provider, scripted.base_url, tool_timeout=0.3),
        [{"id": "raises", "question": "q-raises"}, {"id": "hangs", "question": "q-hangs"}],
        scorers=[{**TRAJECTORY, "expected": ["explode"], "mode": "subset"}],
    )
    store = tmp_path / "store"
    run_id = _run(spec, store, capsys)

    items = _items(store, run_id)
    assert {k: (row["outcome"], json.loads(row["output"])) for k, row in items.items()} == {
        "raises": ("completed", "no station there"),
        "hangs": ("completed", "the tools are slow"),
    }
    [_, raised] = _bodies(scripted, "q-raises")
    assert _results(provider, raised) == [
        {
            "id": f"{prefix}e",
            "content": "Error: ValueError: no station in Paris",
            "is_error": provider == "anthropic",
        }
    ]
    [_, hung] = _bodies(scripted, "q-hangs")
    assert _results(provider, hung) == [
        {
            "id": f"{prefix}h",
            "content": "Error: the tool hang timed out after 0.3 s",
            "is_error": provider == "anthropic",
        },
        {
            "id": f"{prefix}s",
            "content": "Error: the tool stall timed out after 0.3 s",
            "is_error": provider == "anthropic",
        },
    ]
    scores = dict(Store(store).run_scores(run_id).select("item_id", "score").rows())
    assert scores == {"raises": 1.0, "hangs": 0.0}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_that_never_stops_calling_tools_fails_at_max_tool_rounds(
    tmp_path, scripted, capsys, provider
):
    prefix = PREFIX[provider]
    scripted.script(*(_calls(provider, (f"{prefix}{n}", "get_weather", "Paris")) for n in range(3)))
    spec = _spec(
        tmp_path,
        _target(provider, scripted.base_url, max_tool_rounds=2),
        [{"id": "loops", "question": "q-loops"}],
        scorers=[{**TRAJECTORY, "expected": ["get_weather"]}],
    )
    store = tmp_path / "store"
    run_id = _run(spec, store, capsys, code=1)  # its one item failed: the error-rate gate

    item = _items(store, run_id)["loops"]
    assert (item["outcome"], item["failure_kind"]) == ("failed", "max_tool_rounds")
    assert "after 2 rounds of tool calls" in item["error"]
    # The row keeps every call the model made, the last reply's among them.
    assert [(c["id"], c["name"]) for c in item["tool_calls"]] == [
        (f"{prefix}{n}", "get_weather") for n in range(3)
    ]
    # Two rounds run, so three model calls, all counted; the trajectory is kept as evidence.
    assert len(scripted.requests) == 3
    tokens_in, tokens_out = USAGE[provider]
    assert (item["tokens_input"], item["tokens_output"]) == (3 * tokens_in, 3 * tokens_out)
    [kept] = item["artifacts"]
    steps = json.loads(Store(store).read_artifact(kept))["steps"]
    assert [s["role"] for s in steps].count("assistant") == 3
    assert Store(store).run_scores(run_id).height == 0  # a failure is never scored


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"batch": True}, "tool_loop cannot be combined with batch"),
        (
            {"tools": ["loop_tools:get_weather", {"name": "lookup"}]},
            "tools.1 (lookup): tool_loop runs Python tools",
        ),
        ({"tool_choice": "required"}, "the model could never answer in words"),
        ({"tool_loop": None, "max_tool_rounds": 3}, "max_tool_rounds needs `tool_loop: true`"),
        ({"tools": None}, "tool_loop needs `tools`"),
    ],
)
def test_a_tool_loop_that_cannot_run_is_a_spec_error(tmp_path, capsys, fields, said):
    target = {
        k: v
        for k, v in {**_target("openai", "http://127.0.0.1:9/v1", max_tokens=16), **fields}.items()
        if v is not None
    }
    spec = _spec(tmp_path, target, [{"id": "one", "question": "q"}])
    assert main(["run", str(spec), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert said in err and "target" in err
    assert not (tmp_path / "store").exists()


OPENAI_ERROR = {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}}
ERRORS = {
    "openai": OPENAI_ERROR,
    "responses": OPENAI_ERROR,
    "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
}
THOUGHT = {"type": "thinking", "thinking": "Paris first.", "signature": "EqQBCkYIBxgCKkA"}
# A Responses reasoning item as `include: [reasoning.encrypted_content]` has it sent: the one form a
# request that is not stored can send back.
SEALED = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Paris first."}],
    "encrypted_content": "gAAAAABo",
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_round_is_retried_as_any_call_and_a_thought_is_sent_back_signed(
    tmp_path, scripted, capsys, provider
):
    prefix = PREFIX[provider]
    first = _calls(provider, (f"{prefix}1", "get_weather", "Paris"))
    fields: dict[str, Any] = {"max_retries": 1}
    if provider == "anthropic":  # extended thinking: the signed thought goes back with the call
        first = anthropic([THOUGHT, _call(provider, f"{prefix}1", "get_weather", "Paris")], "tool_use")
        fields |= {"thinking": {"budget_tokens": 1024}, "max_tokens": 2048}
    if provider == "responses":  # the sealed reasoning goes back before the call; a message's text too
        calls = [
            SEALED,
            output_message("Let me look."),
            _call(provider, f"{prefix}1", "get_weather", "Paris"),
        ]
        first = responses(response(calls))
        fields |= {"params": {"include": ["reasoning.encrypted_content"]}}
    scripted.script(first, Reply(provider, ERRORS[provider], status=503), _words(provider, "sunny"))
    spec = _spec(
        tmp_path,
        _target(provider, scripted.base_url, **fields),
        [{"id": "one", "question": "q-retried"}],
        scorers=[{**TRAJECTORY, "expected": ["get_weather"]}],
    )
    store = tmp_path / "store"
    run_id = _run(spec, store, capsys)

    item = _items(store, run_id)["one"]
    assert (item["outcome"], json.loads(item["output"]), item["retries"]) == ("completed", "sunny", 1)
    _, retried, again = _bodies(scripted, "q-retried")
    assert retried == again  # the same round's request, sent again
    if provider == "anthropic":
        assert again["messages"][1]["content"][0] == THOUGHT
        assert item["reasoning"] == "Paris first."
    if provider == "responses":
        assert again["include"] == ["reasoning.encrypted_content"]
        assert again["input"][1:4] == [
            SEALED,
            {"role": "assistant", "content": "Let me look."},
            {
                "type": "function_call",
                "call_id": f"{prefix}1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
        ]
        assert item["reasoning"] == "Paris first."


TWO_PROMPTS = """
async def policy(session):
    await session.start(session.prompt)
    await session.resume("and in Oslo?")
"""


@pytest.mark.parametrize("provider", ["anthropic", "responses"])
def test_a_sessions_turns_keep_their_tool_exchanges_as_the_attempts_trajectory(
    tmp_path, scripted, capsys, provider
):
    """Each turn of a policy runs its own loop, kept as `<session>/turn-<n>/trajectory.json`: the
    attempt's artifacts list them in order, a rescore's scorers read them, and `assay trajectories
    export` makes one ATIF trajectory of them."""
    prefix = PREFIX[provider]
    scripted.script(
        _calls(provider, (f"{prefix}1", "get_weather", "Paris")),
        _words(provider, "sunny in Paris"),
        _calls(provider, (f"{prefix}2", "population", "Oslo")),
        _words(provider, "709000 people"),
    )
    policy = write_policy(tmp_path, TWO_PROMPTS)
    expected = ["get_weather", "population"]
    spec = _spec(
        tmp_path,
        _target(provider, scripted.base_url),
        [{"id": "one", "question": "weather in Paris?"}],
        scorers=[{**TRAJECTORY, "expected": expected}],
        policy=policy,
    )
    store = tmp_path / "store"
    run_id = _run(spec, store, capsys)

    item = _items(store, run_id)["one"]
    assert (item["outcome"], json.loads(item["output"])) == ("completed", "709000 people")
    first, second = item["artifacts"]
    assert re.fullmatch(r".*/[^/]+/turn-0/trajectory\.json", first), first
    assert re.fullmatch(r".*/[^/]+/turn-1/trajectory\.json", second), second
    kept = [json.loads(Store(store).read_artifact(path))["steps"] for path in (first, second)]
    assert [[c["name"] for s in steps for c in s["tool_calls"]] for steps in kept] == [
        ["get_weather"],
        ["population"],
    ]
    assert Store(store).run_scores(run_id).select("item_id", "score").rows() == [("one", 1.0)]

    assert main(["rescore", run_id, "--spec", str(spec), "--store", str(store), "--json"]) == 0
    rescored = json.loads(capsys.readouterr().out)["run_id"]
    assert Store(store).run_scores(rescored).select("item_id", "score").rows() == [("one", 1.0)]
    assert main(["trajectories", "export", run_id, "--store", str(store)]) == 0
    [atif] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    called = [c["function_name"] for step in atif["steps"] for c in step.get("tool_calls", [])]
    assert called == expected
