"""Tools on the chat targets, "the call is the answer" (issue 26 §3a): `tools:` (definitions, or
Python callables whose signature and docstring give them), `tool_choice` and
`parallel_tool_calls`, sent in each provider's wire form to the scripted server on uvicorn (which
checks every request against the SDK's create-params and every reply against its response
types); a reply of tool calls is the item's answer, stored structured in `items.tool_calls` and
given to scorers as `Sample.tool_calls` — in a run and in a rescore of it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.calls.messages import FunctionTool, function_tool
from assay.cli import main
from assay.run.identity import identity_of
from assay.spec import parse_spec
from assay.store import Store
from assay.testing.scripted import ScriptedServer
from tests.conftest import write_jsonl, write_spec
from tests.helpers.wire_payloads import CLAUDE, OPENAI_MODEL, anthropic, openai, text

# A module of the spec's folder: a tool given as `module:function`, and a scorer reading the calls.
TOOLS_MODULE = '''
from typing import Literal


def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    """The weather in a city now.

    Args:
        city: the city's name, e.g. Paris.
        unit: degrees Celsius or Fahrenheit.
    """
    return "sunny"


def called(sample):
    """1 when the calls are the expected ones (`name(city)`, in order), else 0; 0.5 for words."""
    if sample.tool_calls is None:
        return 0.5
    made = [f"{c.name}({c.arguments.get('city')})" for c in sample.tool_calls]
    return float(made == sample.expected.split(";"))
'''

LOOKUP = {
    "name": "lookup",
    "description": "Look a word up in the dictionary.",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
}

ROWS = [
    {"id": "one", "question": "q-one", "answer": "get_weather(Paris)"},
    {"id": "two", "question": "q-two", "answer": "get_weather(Paris);get_weather(Oslo)"},
    {"id": "words", "question": "q-words", "answer": "-"},
]


def _openai_call(call_id: str, city: str) -> dict[str, Any]:
    arguments = json.dumps({"city": city})
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}


def _anthropic_call(call_id: str, city: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "get_weather", "input": {"city": city}}


def _script(server: ScriptedServer, provider: str, stream: bool) -> None:
    if provider == "openai":
        replies = {
            "q-one": openai(
                {"content": "Let me check.", "tool_calls": [_openai_call("call_1", "Paris")]},
                "tool_calls",
                stream=stream,
            ),
            "q-two": openai(
                {"tool_calls": [_openai_call("call_2", "Paris"), _openai_call("call_3", "Oslo")]},
                "tool_calls",
                stream=stream,
            ),
            "q-words": openai({"content": "no tool needed"}, stream=stream),
        }
    else:
        replies = {
            # Claude often says what it will do before the call: the call is still the answer.
            "q-one": anthropic(
                [*text("Let me check."), _anthropic_call("toolu_1", "Paris")], "tool_use", stream=stream
            ),
            "q-two": anthropic(
                [_anthropic_call("toolu_2", "Paris"), _anthropic_call("toolu_3", "Oslo")],
                "tool_use",
                stream=stream,
            ),
            "q-words": anthropic(text("no tool needed"), stream=stream),
        }
    for question, reply in replies.items():
        server.script(reply, when=question)


def _target(provider: str, base_url: str, stream: bool, **fields: Any) -> dict[str, Any]:
    common = {"base_url": base_url, "prompt": "{question}", "stream": stream, "max_retries": 0, **fields}
    if provider == "openai":
        return {"kind": "openai", "model": OPENAI_MODEL, **common}
    return {"kind": "anthropic", "model": CLAUDE, "max_tokens": 64, **common}


def _spec(folder: Path, target: dict[str, Any]) -> Path:
    (folder / "weather_tools.py").write_text(TOOLS_MODULE)
    write_jsonl(folder / "data.jsonl", ROWS)
    return write_spec(
        folder,
        name="tools",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target=target,
        scorers=[{"kind": "user_code", "name": "called", "function": "weather_tools:called"}],
        concurrency=2,
    )


def _stored_calls(store: Store, run_id: str) -> dict[str, Any]:
    items = store.run_items(run_id).select("item_id", "outcome", "tool_calls", "tool_call_text", "output")
    return {row["item_id"]: row for row in items.iter_rows(named=True)}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_reply_of_tool_calls_is_the_answer_stored_as_a_column_and_scored(
    tmp_path, scripted, capsys, provider, stream
):
    _script(scripted, provider, stream)
    target = _target(
        provider,
        scripted.base_url,
        stream,
        tools=["weather_tools:get_weather", LOOKUP],
        tool_choice="auto",
        parallel_tool_calls=True,
    )
    spec = _spec(tmp_path, target)
    store = tmp_path / "store"
    assert main(["run", str(spec), "--store", str(store), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]

    prefix = {"openai": "call_", "anthropic": "toolu_"}[provider]
    items = _stored_calls(Store(store), run_id)
    assert {k: row["outcome"] for k, row in items.items()} == dict.fromkeys(items, "completed")
    assert items["one"]["tool_calls"] == [
        {"id": f"{prefix}1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
    ]
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in items["two"]["tool_calls"]] == [
        (f"{prefix}2", "get_weather", {"city": "Paris"}),
        (f"{prefix}3", "get_weather", {"city": "Oslo"}),
    ]
    assert items["words"]["tool_calls"] is None
    # The text said beside the calls is kept apart; the calls alone are the answer.
    assert {k: row["tool_call_text"] for k, row in items.items()} == {
        "one": "Let me check.",
        "two": None,
        "words": None,
    }
    # The output is the calls too (JSON text of objects), for what reads `output` alone.
    assert json.loads(items["one"]["output"]) == [
        {"name": "get_weather", "arguments": {"city": "Paris"}, "id": f"{prefix}1"}
    ]
    assert json.loads(items["words"]["output"]) == "no tool needed"
    # The column's type is the schema's: a list of structs, queryable as such.
    frame = Store(store).run_items(run_id)
    names = frame.select(pl.col("tool_calls").list.eval(pl.element().struct.field("name"))).to_series()
    assert sorted(len(n or []) for n in names.to_list()) == [0, 1, 2]

    scores = Store(store).run_scores(run_id).select("item_id", "score").rows()
    assert sorted(scores) == [("one", 1.0), ("two", 1.0), ("words", 0.5)]

    # Every request offered the tools in the provider's own form (the server checked its types).
    _, body = scripted.requests[0]
    if provider == "openai":
        assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "lookup"]
        weather = body["tools"][0]["function"]
        assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is True
        schema = weather["parameters"]
    else:
        assert [t["name"] for t in body["tools"]] == ["get_weather", "lookup"]
        weather = body["tools"][0]
        assert body["tool_choice"] == {"type": "auto"}
        schema = weather["input_schema"]
    assert weather["description"] == "The weather in a city now."
    assert schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "the city's name, e.g. Paris."},
            "unit": {
                "type": "string",
                "enum": ["c", "f"],
                "default": "c",
                "description": "degrees Celsius or Fahrenheit.",
            },
        },
        "required": ["city"],
    }

    # A rescore's scorers see the stored calls as the run's did.
    assert main(["rescore", run_id, "--spec", str(spec), "--store", str(store), "--json"]) == 0
    rescored = json.loads(capsys.readouterr().out)["run_id"]
    assert sorted(Store(store).run_scores(rescored).select("item_id", "score").rows()) == sorted(scores)


@pytest.mark.parametrize(
    ("provider", "choice", "parallel", "sent"),
    [
        ("openai", "required", False, {"tool_choice": "required", "parallel_tool_calls": False}),
        (
            "openai",
            {"name": "lookup"},
            None,
            {"tool_choice": {"type": "function", "function": {"name": "lookup"}}},
        ),
        ("openai", "none", None, {"tool_choice": "none"}),
        ("anthropic", "required", None, {"tool_choice": {"type": "any"}}),
        (
            "anthropic",
            {"name": "lookup"},
            False,
            {"tool_choice": {"type": "tool", "name": "lookup", "disable_parallel_tool_use": True}},
        ),
        ("anthropic", None, False, {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}),
        ("anthropic", "none", None, {"tool_choice": {"type": "none"}}),
    ],
)
def test_tool_choice_and_parallel_calls_in_each_providers_words(
    tmp_path, scripted, capsys, provider, choice, parallel, sent
):
    for row in ROWS:
        scripted.script(
            (openai({"content": "ok"}) if provider == "openai" else anthropic(text("ok"))),
            when=row["question"],
        )
    fields: dict[str, Any] = {"tools": [LOOKUP, {**LOOKUP, "name": "define", "strict": True}]}
    if choice is not None:
        fields["tool_choice"] = choice
    if parallel is not None:
        fields["parallel_tool_calls"] = parallel
    spec = _spec(tmp_path, _target(provider, scripted.base_url, False, **fields))
    assert main(["run", str(spec), "--store", str(tmp_path / "store"), "--json"]) == 0
    _, body = scripted.requests[0]
    assert {k: body[k] for k in ("tool_choice", "parallel_tool_calls") if k in body} == sent
    if provider == "openai":  # `strict` is OpenAI's alone
        assert [t["function"].get("strict") for t in body["tools"]] == [None, True]
    else:
        assert all("strict" not in t for t in body["tools"])


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"tool_choice": "auto"}, r"target: .*tool_choice needs `tools`"),
        ({"parallel_tool_calls": False}, r"target: .*parallel_tool_calls needs `tools`"),
        ({"tools": [LOOKUP, LOOKUP]}, r"tools: lookup defined twice"),
        ({"tools": [{**LOOKUP, "parameters": {"type": "string"}}]}, r"target\.tools\.0\..*type: object"),
        ({"tools": ["weather_tools:nowhere"]}, r"target\.tools\.0: cannot import 'weather_tools:nowhere'"),
        (
            {"tools": ["weather_tools:get_weather"], "tool_choice": {"name": "lookup"}},
            r"target\.tool_choice: 'lookup' is none of the tools \(get_weather\)",
        ),
    ],
)
def test_a_tool_that_cannot_be_offered_is_a_spec_error_naming_its_field(tmp_path, capsys, fields, said):
    spec = _spec(tmp_path, _target("openai", "http://127.0.0.1:9/v1", False, **fields))
    assert main(["run", str(spec), "--store", str(tmp_path / "store")]) == 2
    assert pytest.importorskip("re").search(said, capsys.readouterr().err), said
    assert not (tmp_path / "store").exists()


def test_a_python_callable_is_a_tool_by_its_signature_and_docstring():
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(TOOLS_MODULE), namespace)  # noqa: S102 - the test's own module text
    tool = function_tool(namespace["get_weather"])
    assert (tool.name, tool.description) == ("get_weather", "The weather in a city now.")
    assert tool.parameters["required"] == ["city"]

    def search(query: str, limit: int = 10, *, exact: bool = False) -> list[str]:
        """Search the index.

        Longer prose the model need not read twice.

        Args:
            query: what to look for; it may run
                over two lines.
            limit (int): how many hits at most.

        Returns:
            the hits.
        """
        return []

    tool = function_tool(search)
    assert tool.description == "Search the index. Longer prose the model need not read twice."
    properties = tool.parameters["properties"]
    assert properties["query"]["description"] == "what to look for; it may run over two lines."
    assert properties["limit"] == {"type": "integer", "default": 10, "description": "how many hits at most."}
    assert properties["exact"] == {"type": "boolean", "default": False}

    def spread(*values: int) -> int:
        return 0

    with pytest.raises(TypeError, match=r"takes \*values"):
        function_tool(spread)
    assert FunctionTool(name="f").parameters == {"type": "object", "properties": {}}


def test_a_python_tools_identity_is_its_schema_not_its_modules_name(tmp_path):
    """A run's identity holds a `module:function` tool as the definition the model is offered:
    moved to a module of another name it is the same run; its signature changed, another one."""

    def digest(folder: Path, module: str, source: str) -> str:
        folder.mkdir()
        (folder / f"{module}.py").write_text(source)
        spec = parse_spec(
            {
                "name": "tools",
                "dataset": {"path": "d.jsonl"},
                "target": {
                    "kind": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": OPENAI_MODEL,
                    "prompt": "{input}",
                    "tools": [f"{module}:get_weather", LOOKUP],
                },
                "scorers": [{"kind": "exact_match"}],
            }
        )
        return identity_of(spec, [], folder).target

    first = digest(tmp_path / "a", "weather_tools", TOOLS_MODULE)
    assert digest(tmp_path / "b", "forecast_tools", TOOLS_MODULE) == first
    wider = TOOLS_MODULE.replace('unit: Literal["c", "f"] = "c"', 'unit: Literal["c", "f", "k"] = "c"')
    assert digest(tmp_path / "c", "weather_tools", wider) != first
    described = TOOLS_MODULE.replace("The weather in a city now.", "Today's weather in a city.")
    assert digest(tmp_path / "d", "weather_tools", described) != first
