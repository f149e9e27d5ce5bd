"""The eval spec: defaults, the documented shape, and one readable message per problem.

The requirement: a bad spec gets exit status 2 and one message per problem naming the field and
the bad value; nothing is written to the store.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.cli import main
from assay.errors import InputError, SpecError
from assay.evaluators import SCORER_KINDS
from assay.spec import EvalSpec, OpenAITarget, PythonTarget, load_spec, parse_spec
from tests.conftest import REPO, write_jsonl, write_spec

DOCUMENTED = """\
name: arith-gpt
description: Arithmetic against an OpenAI-compatible endpoint.
dataset:
  path: data.jsonl
  id: id
  input: question
  expected: answer
target:
  kind: openai
  base_url: https://api.example.com/v1
  model: gpt-4o-mini-2024-07-18
  api_key_env: OPENAI_API_KEY
  prompt: "{question}"
scorers:
  - {kind: exact_match, name: exact}
  - {kind: regex, name: digits, pattern: "\\\\d+"}
"""


def minimal(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "e",
        "dataset": {"path": "data.jsonl"},
        "target": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        "scorers": [{"kind": "exact_match"}],
    }
    spec.update(copy.deepcopy(overrides))
    return spec


def problems_of(data: Any) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert isinstance(caught.value, InputError)
    return caught.value.problems


def one_problem(data: Any) -> str:
    problems = problems_of(data)
    assert len(problems) == 1, problems
    return problems[0]


# -- what a valid spec means ----------------------------------------------------------------------


def test_defaults():
    spec = parse_spec(minimal())
    assert spec.concurrency == 5
    assert spec.scorer_concurrency == 5
    assert spec.trials == 1
    assert spec.seed == 0
    assert spec.fail_on_item_error_rate == 0.05
    assert spec.item_timeout is None
    assert spec.tags == []
    assert spec.description is None
    assert spec.dataset.input == "input" and spec.dataset.expected == "expected"
    assert spec.dataset.id is None and spec.dataset.annotations is None and spec.dataset.limit is None
    target = spec.target
    assert isinstance(target, OpenAITarget)
    assert target.prompt == "{input}" and target.api_key_env is None and target.system is None
    assert target.timeout == 60.0 and target.max_retries == 4
    assert [s.name for s in spec.scorers] == ["exact_match"], "a scorer's name defaults to its kind"


def test_documented_example_parses(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(DOCUMENTED)
    spec = load_spec(path)
    assert spec.name == "arith-gpt"
    assert (spec.dataset.path, spec.dataset.id, spec.dataset.input, spec.dataset.expected) == (
        "data.jsonl",
        "id",
        "question",
        "answer",
    )
    assert isinstance(spec.target, OpenAITarget)
    assert spec.target.api_key_env == "OPENAI_API_KEY"
    assert spec.target.prompt == "{question}"
    assert spec.target.base_url == "https://api.example.com/v1"
    assert [(s.kind, s.name) for s in spec.scorers] == [("exact_match", "exact"), ("regex", "digits")]
    assert spec.scorers[1].pattern == "\\d+"


def test_every_field_set(tmp_path):
    spec = parse_spec(
        minimal(
            target={"kind": "python", "function": "solver:solve"},
            dataset={
                "path": "d.csv",
                "id": "id",
                "input": "q",
                "expected": None,
                "annotations": "topic",
                "limit": 3,
            },
            concurrency=2,
            scorer_concurrency=1,
            trials=3,
            seed=7,
            item_timeout=2.5,
            fail_on_item_error_rate=1,
            tags=["nightly", "smoke"],
        )
    )
    assert isinstance(spec.target, PythonTarget) and spec.target.function == "solver:solve"
    assert spec.dataset.annotations == ["topic"], "one annotation name is a list of one"
    assert spec.dataset.expected is None and spec.dataset.limit == 3
    assert (spec.concurrency, spec.scorer_concurrency, spec.trials, spec.seed) == (2, 1, 3, 7)
    assert spec.item_timeout == 2.5 and spec.fail_on_item_error_rate == 1.0
    assert spec.tags == ["nightly", "smoke"]


def test_json_spec_file_loads(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(
        '{"name": "j", "dataset": {"path": "d.jsonl"}, "target": {"kind": "python", '
        '"function": "m:f"}, "scorers": [{"kind": "token_f1"}]}'
    )
    assert load_spec(path).name == "j"


def test_quickstart_example_spec_is_valid():
    spec = load_spec(REPO / "examples" / "quickstart" / "spec.yaml")
    assert isinstance(spec, EvalSpec) and len(spec.scorers) == 4


# -- one problem, named with its field and value ---------------------------------------------------


def test_missing_name():
    data = minimal()
    del data["name"]
    assert one_problem(data) == "name: required field is missing"


def test_missing_nested_field_is_named_without_the_union_tag():
    data = minimal()
    del data["target"]["model"]
    assert one_problem(data) == "target.model: required field is missing"


def test_unknown_top_level_field():
    message = one_problem(minimal(concurency=4))
    assert message.startswith("concurency: unknown field")
    assert "4" in message
    assert "did you mean 'concurrency'" in message


def test_unknown_target_kind_lists_the_allowed_kinds():
    message = one_problem(minimal(target={"kind": "gemini", "base_url": "http://x", "model": "m"}))
    assert message.startswith("target.kind:")
    assert "'gemini'" in message and "anthropic" in message
    assert "openai" in message and "python" in message


def test_target_without_kind():
    message = one_problem(minimal(target={"base_url": "http://x", "model": "m"}))
    assert message.startswith("target.kind: required field is missing")
    assert "openai" in message and "python" in message


def test_target_given_as_a_string():
    message = one_problem(minimal(target="openai"))
    assert message.startswith("target:") and "'openai'" in message


def test_bad_base_url():
    message = one_problem(minimal(target={"kind": "openai", "base_url": "api.example.com/v1", "model": "m"}))
    assert message.startswith("target.base_url:")
    assert "'api.example.com/v1'" in message
    assert "http://" in message, "say what a base_url must look like, not the regex"


def test_unknown_target_field_under_its_kind():
    message = one_problem(minimal(target={"kind": "python", "function": "m:f", "model": "x"}))
    assert message.startswith("target.model: unknown field")
    assert "'x'" in message


@pytest.mark.parametrize("field", ["concurrency", "scorer_concurrency", "trials"])
def test_zero_is_not_a_count(field):
    message = one_problem(minimal(**{field: 0}))
    assert message.startswith(f"{field}:")
    assert "got 0" in message and "greater than or equal to 1" in message


@pytest.mark.parametrize("rate", [1.5, -0.1])
def test_fail_on_item_error_rate_out_of_range(rate):
    message = one_problem(minimal(fail_on_item_error_rate=rate))
    assert message.startswith("fail_on_item_error_rate:")
    assert f"got {rate}" in message


@pytest.mark.parametrize("rate", [0, 0.5, 1])
def test_fail_on_item_error_rate_bounds_are_allowed(rate):
    assert parse_spec(minimal(fail_on_item_error_rate=rate)).fail_on_item_error_rate == rate


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fail_on_item_error_rate", True),  # YAML `true`/`yes`: would be taken as 1, disabling the gate
        ("concurrency", True),
        ("trials", "3"),
        ("seed", 1.5),
        ("item_timeout", False),
    ],
)
def test_numbers_must_be_numbers(field, value):
    message = one_problem(minimal(**{field: value}))
    assert message.startswith(f"{field}:") and f"got {value!r}" in message


def test_item_timeout_must_be_positive():
    message = one_problem(minimal(item_timeout=0))
    assert message.startswith("item_timeout:") and "got 0" in message


def test_duplicate_scorer_names():
    message = one_problem(
        minimal(
            scorers=[{"kind": "exact_match", "name": "s"}, {"kind": "regex", "name": "s", "pattern": "x"}]
        )
    )
    assert message.startswith("scorers:")
    assert "'s'" in message and "scorers.0" in message and "scorers.1" in message
    assert "{" not in message, "the message names the scorers, it does not dump the spec"


def test_scorer_names_default_to_kind_and_clash():
    message = one_problem(minimal(scorers=[{"kind": "exact_match"}, {"kind": "exact_match"}]))
    assert "'exact_match'" in message and "scorers.0 and scorers.1" in message


def test_unknown_scorer_kind_lists_the_allowed_kinds():
    message = one_problem(minimal(scorers=[{"kind": "exact_match"}, {"kind": "fuzzy_match", "name": "f"}]))
    assert message.startswith("scorers.1.kind:")
    assert "'fuzzy_match'" in message
    assert all(kind in message for kind in SCORER_KINDS)


def test_bad_regex():
    message = one_problem(minimal(scorers=[{"kind": "regex", "pattern": "(unclosed"}]))
    assert message.startswith("scorers.0")
    assert "'(unclosed'" in message and "regular expression" in message
    assert "Value error" not in message


def test_bad_scorer_param_value():
    message = one_problem(minimal(scorers=[{"kind": "regex", "pattern": "x", "mode": "anywhere"}]))
    assert message.startswith("scorers.0.mode:")
    assert "'anywhere'" in message and "search" in message


def test_unknown_scorer_param():
    message = one_problem(minimal(scorers=[{"kind": "numeric", "tolerance": 0.1}]))
    assert message.startswith("scorers.0.tolerance: unknown field")
    assert "0.1" in message and "abs_tol" in message, "names the fields that kind does take"


def test_no_scorers():
    assert one_problem(minimal(scorers=[])).startswith("scorers:")


def test_bad_name():
    message = one_problem(minimal(name="my eval"))
    assert message.startswith("name:") and "'my eval'" in message and "letters" in message


def test_dataset_limit_must_be_positive():
    message = one_problem(minimal(dataset={"path": "d.jsonl", "limit": 0}))
    assert message.startswith("dataset.limit:") and "got 0" in message


@pytest.mark.parametrize(
    ("prompt", "words"),
    [
        ("{question", "expected '}'"),
        ("Q: {}", "positional"),
        ("Q: {0}", "positional"),
        ("Q: {question.upper}", "attribute"),
    ],
)
def test_bad_prompt_template(prompt, words):
    message = one_problem(
        minimal(target={"kind": "openai", "base_url": "http://x", "model": "m", "prompt": prompt})
    )
    assert message.startswith("target.prompt:")
    assert repr(prompt) in message and words in message


def test_prompt_template_may_index_nested_fields():
    spec = parse_spec(
        minimal(
            target={"kind": "openai", "base_url": "http://x", "model": "m", "prompt": "{meta[lang]} {{x}}"}
        )
    )
    assert spec.target.prompt == "{meta[lang]} {{x}}"


# -- several problems at once ---------------------------------------------------------------------


def test_every_problem_is_reported_once():
    data = minimal(
        concurrency=0,
        fail_on_item_error_rate=1.5,
        bogus=True,
        target={"kind": "openai", "base_url": "ftp://x", "model": "m"},
        scorers=[{"kind": "regex", "pattern": "("}, {"kind": "nope"}],
    )
    del data["name"]
    problems = problems_of(data)
    assert len(problems) == 7, problems
    heads = sorted(p.split(":", 1)[0] for p in problems)
    assert heads == sorted(
        [
            "name",
            "concurrency",
            "fail_on_item_error_rate",
            "bogus",
            "target.base_url",
            "scorers.0",
            "scorers.1.kind",
        ]
    )
    assert all("\n" not in p for p in problems), "one line per problem"


# -- the file ------------------------------------------------------------------------------------


def test_invalid_yaml_names_the_line(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("name: e\ndataset:\n  path: d.jsonl\n target: [oops\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    (message,) = caught.value.problems
    assert "line 4" in message and "not valid YAML" in message
    assert "target: [oops" in message, "shows the offending line"
    assert caught.value.source == str(path)


def test_unclosed_quote_names_a_line(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text('name: "e\ndataset: {path: d.jsonl}\n')
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert "line " in caught.value.problems[0]


def test_repeated_key_is_refused(tmp_path):
    # Plain YAML keeps the last value, so the first `concurrency` would silently vanish.
    path = write_spec(tmp_path, **minimal())
    path.write_text(path.read_text() + "concurrency: 2\nconcurrency: 50\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    (message,) = caught.value.problems
    assert "duplicate key 'concurrency'" in message
    assert "line " in message


@pytest.mark.parametrize(("text", "words"), [("- a\n- b\n", "list"), ("just text\n", "str"), ("", "empty")])
def test_top_level_must_be_a_mapping(tmp_path, text, words):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    (message,) = caught.value.problems
    assert words in message


def test_parse_spec_refuses_a_non_mapping():
    (message,) = problems_of(["name", "e"])
    assert "mapping" in message and "list" in message


def test_missing_spec_file(tmp_path):
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "nope.yaml")
    assert "cannot read spec" in caught.value.problems[0]


def test_spec_that_is_not_utf8(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert "UTF-8" in caught.value.problems[0]


def test_spec_with_byte_order_mark_loads(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + DOCUMENTED.encode())
    assert load_spec(path).name == "arith-gpt"


# -- through the command line --------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], spec: Path, store: Path) -> tuple[int, list[str]]:
    code = main(["run", str(spec), "--store", str(store), "-q"])
    return code, capsys.readouterr().err.strip().splitlines()


def test_cli_reports_every_spec_problem_and_writes_nothing(tmp_path, capsys):
    write_jsonl(tmp_path / "data.jsonl", [{"input": "a", "expected": "a"}])
    spec = write_spec(
        tmp_path,
        **minimal(
            concurrency=0,
            fail_on_item_error_rate=1.5,
            target={"kind": "bedrock", "model": "m"},
            scorers=[{"kind": "exact_match", "name": "x"}, {"kind": "regex", "name": "x", "pattern": "a"}],
        ),
    )
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)

    assert code == 2
    assert lines[0] == f"error: {spec}: 4 problems"
    body = lines[1:]
    assert len(body) == 4 and all(line.startswith("  - ") for line in body), lines
    text = "\n".join(body)
    assert "concurrency:" in text and "got 0" in text
    assert "fail_on_item_error_rate:" in text and "1.5" in text
    assert "target.kind:" in text and "'bedrock'" in text
    assert "scorers:" in text and "'x'" in text
    assert not store.exists(), "a bad spec writes nothing"


def test_cli_single_problem_is_one_line(tmp_path, capsys):
    spec = write_spec(tmp_path, **minimal(fail_on_item_error_rate=-0.1))
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2
    assert lines == [
        f"error: {spec}: fail_on_item_error_rate: Input should be greater than or equal to 0 (got -0.1)"
    ]
    assert not store.exists()


def test_cli_invalid_yaml(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: e\n  bad: indent\n")
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2 and len(lines) == 1 and "line 2" in lines[0]
    assert not store.exists()


def test_cli_missing_api_key_env(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ASSAY_TEST_SPEC_KEY", raising=False)
    write_jsonl(tmp_path / "data.jsonl", [{"input": "a"}])
    target = {
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "api_key_env": "ASSAY_TEST_SPEC_KEY",
    }
    spec = write_spec(tmp_path, **minimal(target=target))
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2 and len(lines) == 1
    assert "target.api_key_env" in lines[0] and "ASSAY_TEST_SPEC_KEY" in lines[0]
    assert not store.exists()


REFERENCED = """\
def ok(output):
    return 1.0

def needs_context(output, context):
    return 1.0

NOT_CALLABLE = 1
"""

PY = {"kind": "python", "function": "refs_mod:ok"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"target": {"kind": "python", "function": "refs_mod:no_such_function"}},
            "target.function: cannot import 'refs_mod:no_such_function': 'refs_mod' has no attribute",
        ),
        (
            {"target": {"kind": "python", "function": "no_such_module_r:f"}},
            "target.function: cannot import 'no_such_module_r:f': No module named 'no_such_module_r'",
        ),
        (
            {"target": {"kind": "python", "function": "refs_broken:f"}},
            "target.function: importing 'refs_broken:f' raised RuntimeError: broken on import",
        ),
        (
            {"target": {"kind": "python", "function": "refs_mod:NOT_CALLABLE"}},
            "target.function: cannot use 'refs_mod:NOT_CALLABLE': int object is not callable",
        ),
        (
            {"target": None, "targets": {"a": PY, "b": {"kind": "python", "function": "refs_mod:nope"}}},
            "targets.b.function: cannot import 'refs_mod:nope'",
        ),
        (
            {"scorers": [{"kind": "user_code", "function": "refs_mod:nope"}]},
            "scorers.0.function: cannot import 'refs_mod:nope'",
        ),
        (
            {"scorers": [{"kind": "user_code", "function": "refs_mod:needs_context"}]},
            "scorers.0.function: user_code function 'refs_mod:needs_context' requires parameter 'context'",
        ),
        (
            {"scorers": [{"kind": "exact_match", "applies": "refs_mod:nope"}]},
            "scorers.0.applies: cannot import 'refs_mod:nope'",
        ),
        (
            {"scorers": [{"kind": "remote", "url": "http://"}]},
            "scorers.0.url: 'http://' is not a URL: it names no host",
        ),
        (
            {"scorers": [{"kind": "remote", "url": "http://127.0.0.1:99999/score"}]},
            "scorers.0.url: 'http://127.0.0.1:99999/score' is not a URL: port 99999 is out of range",
        ),
    ],
    ids=[
        "function",
        "module",
        "module-raises",
        "not-callable",
        "matrix-cell",
        "user-code",
        "user-code-params",
        "applies",
        "remote-no-host",
        "remote-port",
    ],
)
def test_cli_refuses_a_reference_that_does_not_resolve(tmp_path, capsys, monkeypatch, overrides, message):
    """Every `module:function` and endpoint the spec names is resolved before anything runs: one
    message naming the field, exit 2, nothing written (a python target's function that did not
    import used to crash the run and leave it `running`)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "refs_mod.py").write_text(REFERENCED)
    (tmp_path / "refs_broken.py").write_text("raise RuntimeError('broken on import')\n")
    write_jsonl(tmp_path / "data.jsonl", [{"input": "a", "expected": "a"}])
    spec = write_spec(tmp_path, **{k: v for k, v in minimal(**overrides).items() if v is not None})
    store = tmp_path / "store"
    code, lines = run_cli(capsys, spec, store)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec}: {message}"), lines
    assert not store.exists()
