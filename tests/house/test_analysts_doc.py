"""docs/analysts.md cannot rot: every snippet runs against a real store and Polars agrees with DuckDB.

The store is built with the suite's own machinery (the mock model server, `assay run`): two runs of
the spec `arith` with priced models, failing items, a failing judge, a rate-limited call and
captured requests, plus a three-cell matrix run (one cell on an unpriced model) for the leaderboard.

Snippet conventions (stated at the top of the doc too):
- every ```python block holds the line `STORE = "assay-store"` exactly once, the test points it at
  the temporary store, executes the block in a fresh namespace and reads `result`: a non-empty
  `polars.DataFrame`;
- every ```sql block is one DuckDB statement naming files under `'assay-store/...'`; the test
  replaces that prefix and requires a non-empty `fetchall()`, in a session whose time zone is not
  UTC (the queries must not depend on it);
- under each numbered heading (`### 1. ...`) the python and the sql block return the same columns
  in the same order and the same rows in the same order; the test compares them cell by cell.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from assay.cli import main
from assay.testing.mock_openai import MockOpenAIServer
from assay.testing.scripted import ScriptedServer
from tests.conftest import REPO, arithmetic_rows, openai_spec, write_jsonl, write_spec
from tests.helpers.wire_payloads import OPENAI_MODEL, openai

DOC_PATH = REPO / "docs" / "analysts.md"
PLACEHOLDER = "assay-store"
STORE_LINE = f'STORE = "{PLACEHOLDER}"'
N_QUERIES = 13

PRICES = {
    "mock-1": {"input": 10.0, "output": 30.0},
    "mock-2": {"input": 2.0, "output": 6.0},
    "mock-judge": {"input": 1.0, "output": 2.0},
    OPENAI_MODEL: {"input": 0.15, "output": 0.6},
}  # mock-3 is deliberately unpriced
JUDGE_REPLY = '{"score": 1, "explanation": "fine"}'
N_ITEMS = 8


def question(i: int) -> str:
    return f"What is {i} + {i}?"


def build_store(folder: Path, mock: MockOpenAIServer) -> Path:
    """A run whose answers are tool calls, one matrix run, then two nightly runs of `arith` (the
    newest runs), in `folder / "store"`."""
    store = folder / "store"
    tool_calls_run(folder / "weather", store)
    nightly = folder / "nightly"
    nightly.mkdir()
    matrix = folder / "matrix"
    matrix.mkdir()
    write_jsonl(matrix / "data.jsonl", arithmetic_rows(N_ITEMS))
    cell = {"kind": "openai", "base_url": mock.base_url}
    spec = write_spec(
        matrix,
        name="arith-models",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        targets={
            "small": {**cell, "model": "mock-1", "prompt": "Q: {question}"},
            "large": {**cell, "model": "mock-2", "prompt": "{question}"},
            "unpriced": {**cell, "model": "mock-3", "prompt": "{question}"},
        },
        scorers=[{"kind": "exact_match", "name": "exact"}],
        prices=PRICES,
        fail_on_item_error_rate=1,
    )
    mock.reset()
    answers = {question(i): str(2 * i) for i in range(N_ITEMS)}
    answers |= {f"Q: {question(i)}": str(2 * i) if i % 4 else "?" for i in range(N_ITEMS)}
    mock.configure(latency_ms=0, answers=answers, faults=[])
    assert main(["run", str(spec), "--store", str(store), "--quiet"]) == 0
    mock.reset()
    spec = openai_spec(
        nightly,
        mock.base_url,
        n=N_ITEMS,
        target={
            "kind": "openai",
            "base_url": mock.base_url,
            "model": "mock-1",
            "prompt": "{question}",
            "max_retries": 2,
        },
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {"kind": "regex", "name": "digits", "pattern": "\\d+"},
            {
                "kind": "llm_judge",
                "name": "judge",
                "base_url": mock.base_url,
                "model": "mock-judge",
                "rubric": "Grade {output} for {input}",
            },
        ],
        prices=PRICES,
        capture_requests=True,
        fail_on_item_error_rate=1,
        fail_on_scorer_error_rate=1,  # the judge fails on q6 on purpose
    )
    # The second night answers two more items wrong: scores change, the mean drops.
    for wrong in ({1}, {1, 2, 7}):
        mock.reset()
        answers = {question(i): "no idea" if i in wrong else str(2 * i) for i in range(N_ITEMS)}
        mock.configure(
            latency_ms=0,
            answers={**answers, "*": JUDGE_REPLY},
            faults=[
                {"status": 500, "times": 3, "retry_after": 0, "match": question(3)},  # fails after 2 retries
                {"status": 429, "times": 1, "retry_after": 0, "match": question(4)},  # rate-limited once
                {"status": 400, "times": 1, "match": question(5)},  # fails at once
                {"status": 400, "times": -1, "match": f"for {question(6)}"},  # the judge fails on q6
            ],
        )
        assert main(["run", str(spec), "--store", str(store), "--quiet"]) == 0
    # The second night's failures run again (the faults are spent): history rows for query 12,
    # which query 1 must leave out.
    runs = pl.read_parquet(f"{store}/runs/**/*.parquet", hive_partitioning=True)
    last = runs.sort("created_at")["run_id"][-1]
    assert main(["resume", last, "--store", str(store), "--retry-failed", "--quiet"]) == 0

    return store


WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def tool_calls_run(folder: Path, store: Path) -> None:
    """A run whose answers are tool calls (two calls in one reply, one call, words) for query 13,
    against the scripted server (which checks every body against the SDK's types)."""
    folder.mkdir()
    questions = {"both": "Weather in Paris and Oslo?", "one": "Weather in Rome?", "words": "Hello?"}
    rows = [{"id": k, "question": q, "answer": "Hello."} for k, q in questions.items()]
    write_jsonl(folder / "data.jsonl", rows)

    def call(n: int, city: str) -> dict[str, Any]:
        arguments = f'{{"city": "{city}"}}'
        return {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }

    with ScriptedServer() as server:
        server.script(openai({"tool_calls": [call(1, "Paris"), call(2, "Oslo")]}, "tool_calls"), when="Paris")
        server.script(openai({"tool_calls": [call(3, "Rome")]}, "tool_calls"), when="Rome")
        server.script(openai({"content": "Hello."}), when="Hello")
        spec = write_spec(
            folder,
            name="weather",
            dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
            target={
                "kind": "openai",
                "base_url": server.base_url,
                "model": OPENAI_MODEL,
                "prompt": "{question}",
                "tools": [WEATHER_TOOL],
                "max_retries": 0,
            },
            # `exact`, as the nightly runs: query 1 counts its passes (the calls are no "Hello.").
            scorers=[{"kind": "exact_match", "name": "exact"}],
            prices=PRICES,
            fail_on_item_error_rate=1,
        )
        assert main(["run", str(spec), "--store", str(store), "--quiet"]) == 0
        assert server.problems == []


@pytest.fixture(scope="module")
def store(analysts_store) -> Path:
    return analysts_store  # built once a session by conftest, with build_store


# -- the doc's snippets ---------------------------------------------------------------------------


def snippets() -> list[tuple[str, str, str]]:
    """(heading, language, code) of every fenced python and sql block, in order."""
    found, heading, fence = [], "", None
    for line in DOC_PATH.read_text().splitlines():
        if fence is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            elif line.startswith("```"):
                fence = (line[3:].strip(), [])
        elif line.startswith("```"):
            if fence[0] in ("python", "sql"):
                found.append((heading, fence[0], "\n".join(fence[1])))
            fence = None
        else:
            fence[1].append(line)
    assert fence is None, "an unclosed code block"
    return found


SNIPPETS = snippets()
PYTHON = [(h, code) for h, lang, code in SNIPPETS if lang == "python"]
SQL = [(h, code) for h, lang, code in SNIPPETS if lang == "sql"]
QUERIES = [h for h in dict.fromkeys(h for h, _, _ in SNIPPETS) if re.match(r"\d+\. ", h)]


def run_python(code: str, store: Path) -> pl.DataFrame:
    assert code.count(PLACEHOLDER) == 1 and STORE_LINE in code.splitlines(), (
        f"a python snippet sets {STORE_LINE} once and names the store only through STORE:\n{code}"
    )
    namespace: dict[str, Any] = {}
    code = code.replace(STORE_LINE, f"STORE = {str(store)!r}")
    exec(compile(code, str(DOC_PATH), "exec"), namespace)  # noqa: S102 - the repo's own doc, on purpose
    result = namespace.get("result")
    assert isinstance(result, pl.DataFrame), f"the snippet must leave a DataFrame in `result`:\n{code}"
    return result


def run_sql(code: str, store: Path) -> tuple[list[str], list[tuple]]:
    assert f"'{PLACEHOLDER}/" in code, f"a sql snippet reads files under '{PLACEHOLDER}/...':\n{code}"
    con = duckdb.connect()
    con.sql("SET TimeZone = 'Pacific/Kiritimati'")  # UTC+14: a query that assumes UTC gets other days
    relation = con.sql(code.replace(f"'{PLACEHOLDER}/", f"'{store}/"))
    return relation.columns, relation.fetchall()


def test_the_doc_has_twelve_worked_queries_in_both_languages():
    assert len(PYTHON) >= N_QUERIES and len(SQL) >= N_QUERIES
    assert len(QUERIES) == N_QUERIES, QUERIES
    for heading in QUERIES:
        langs = [lang for h, lang, _ in SNIPPETS if h == heading]
        assert langs == ["python", "sql"], f"{heading!r} has {langs}, expected one python then one sql block"


@pytest.mark.parametrize("heading, code", PYTHON, ids=[f"py{n}" for n in range(len(PYTHON))])
@pytest.mark.slow
def test_python_snippet_runs(store, heading, code):
    result = run_python(code, store)
    assert result.height > 0, f"{heading!r}: empty result"


@pytest.mark.parametrize("heading, code", SQL, ids=[f"sql{n}" for n in range(len(SQL))])
@pytest.mark.slow
def test_sql_snippet_runs(store, heading, code):
    _, rows = run_sql(code, store)
    assert rows, f"{heading!r}: empty result"


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and b is None
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    return a == b


def assert_agree(store: Path, heading: str, py: str | None = None, sql: str | None = None) -> pl.DataFrame:
    """The query's python and sql versions (or `py` and `sql`) return the same columns and rows;
    returns the python's."""
    if py is None or sql is None:
        (py,) = [code for h, code in PYTHON if h == heading]
        (sql,) = [code for h, code in SQL if h == heading]
    frame = run_python(py, store)
    columns, rows = run_sql(sql, store)
    assert frame.columns == columns, heading
    assert len(frame.rows()) == len(rows), (heading, frame, rows)
    for got, want in zip(frame.rows(), rows, strict=True):
        assert all(same(a, b) for a, b in zip(got, want, strict=True)), (heading, got, want)
    return frame


@pytest.mark.parametrize("heading", QUERIES)
@pytest.mark.slow
def test_polars_and_duckdb_agree(store, heading):
    assert_agree(store, heading)


# -- the same snippets on the quickstart's store: no matrix, no captured requests, one run ----------


@pytest.fixture(scope="module")
def quickstart_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("quickstart") / "assay-store"
    assert main(["run", str(REPO / "examples/quickstart/spec.yaml"), "--store", str(store), "--quiet"]) == 0
    assert not (store / "leaderboards").exists() and not (store / "requests").exists()
    return store


@pytest.mark.parametrize("heading, code", PYTHON, ids=[f"py{n}" for n in range(len(PYTHON))])
@pytest.mark.slow
def test_python_snippet_runs_on_the_quickstart_store(quickstart_store, heading, code):
    run_python(code, quickstart_store)


@pytest.mark.parametrize("heading", QUERIES)
@pytest.mark.slow
def test_polars_and_duckdb_agree_on_the_quickstart_store(quickstart_store, heading):
    assert_agree(quickstart_store, heading)


@pytest.mark.slow
def test_on_the_quickstart_store_the_queries_that_find_nothing_return_no_rows(quickstart_store):
    """One run: nothing to pair (6), no matrix (7), no captured requests (10)."""
    for prefix in ("6. ", "7. ", "10. "):
        (code,) = [c for h, c in PYTHON if h.startswith(prefix)]
        assert run_python(code, quickstart_store).height == 0, prefix
        (code,) = [c for h, c in SQL if h.startswith(prefix)]
        assert run_sql(code, quickstart_store)[1] == [], prefix  # DuckDB: no rows, not "No files found"
    (four,) = [c for h, c in PYTHON if h.startswith("4. ")]
    assert set(run_python(four, quickstart_store)["scorer"]) == {
        "exact",
        "numeric",
        "mentions_answer",
        "bare_number",
    }


@pytest.mark.slow
def test_the_store_has_what_the_queries_need(store):
    """Guards the fixture: each query has something real to find."""
    items = pl.read_parquet(f"{store}/items/**/*.parquet", hive_partitioning=True)
    scores = pl.read_parquet(f"{store}/scores/**/*.parquet", hive_partitioning=True)
    requests = pl.read_parquet(f"{store}/requests/**/*.parquet", hive_partitioning=True)
    runs = pl.read_parquet(f"{store}/runs/**/*.parquet", hive_partitioning=True)
    assert runs["revision"].max() > 1, "runs hold superseded revisions the queries must leave out"
    retried = items.filter(pl.col("retry") > 0)
    assert set(retried["item_id"]) == {"q3", "q5"} and set(retried["outcome"]) == {"completed"}, (
        "failed rows kept as history, which query 1 must leave out and query 12 finds"
    )
    runs = runs.filter(pl.col("revision") == pl.col("revision").max().over("run_id"))
    assert set(items["failure_http_status"].drop_nulls()) == {400, 500}
    assert scores.filter((pl.col("scorer") == "judge") & (pl.col("outcome") == "failed")).height == 2
    assert scores["cost_usd"].sum() > 0
    priced = runs.filter(pl.col("cost_completeness") == "complete")
    assert priced.height == 5 and priced["cost_usd"].min() > 0
    (unpriced,) = runs.filter(pl.col("cost_completeness") != "complete").rows(named=True)
    assert unpriced["model"] == "mock-3" and unpriced["cost_usd"] == 0, "the $0 that is not free"
    assert requests.filter(pl.col("http_status") == 429).height == 2
    assert runs.filter(pl.col("name") == "arith").height == 2 and runs["matrix_id"].n_unique() == 2
    gauges = scores.filter(pl.col("kind") == "gauge")
    assert {"gauge.duration_ms", "gauge.tokens_input", "gauge.cost_usd"} <= set(gauges["scorer"])
    # Gauge rows would count as scorers without the `kind` filter of queries 6 and 9.
    assert gauges.filter(pl.col("outcome") == "measured").height == gauges.height
    calls = items.filter(pl.col("tool_calls").is_not_null())
    assert sorted(calls["item_id"]) == ["both", "one"] and calls["tool_calls"].list.len().sum() == 3


def test_schema_md_and_this_guide_list_the_same_store_folders_and_globs():
    """The two pages an analyst reads first agree on what the store holds and how to glob it."""
    import pyarrow as pa

    from assay import _schema

    def layout(doc: str, prefix: str) -> dict[str, str]:
        block = doc.split("```\n" + prefix, 1)[1].split("```", 1)[0]
        folders: dict[str, str] = {}
        for line in (prefix + block).splitlines():
            for path in re.findall(re.escape(prefix) + r"[^\s,]+", line):
                name, _, rest = path.removeprefix(prefix).partition("/")
                folders.setdefault(name, rest.rsplit("/", 1)[-1] if rest.endswith(".parquet") else "")
        return folders

    schema_doc = (REPO / "docs/schema.md").read_text()
    schema = layout(schema_doc, "<store>/")
    guide = layout(DOC_PATH.read_text(), "assay-store/")
    assert set(schema) == set(guide), (sorted(schema), sorted(guide))
    for name, glob in guide.items():
        if glob and schema[name]:
            assert glob == schema[name], (name, glob, schema[name])
    # `__all__`, not `vars`: the requests schema is exported lazily (assay/_schema/__init__.py).
    parquet = [name for name in _schema.__all__ if isinstance(getattr(_schema, name), pa.Schema)]
    assert (
        f"writes {['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'][len(parquet) - 1]} Parquet datasets"
        in schema_doc
    )
    assert "leases/" in schema_doc and "lease" in schema_doc.split("leases/", 1)[1].split("\n", 1)[0]


@pytest.mark.slow
def test_the_regression_query_compares_each_cell_of_a_matrix_only_with_itself(store):
    """Query 4 on a matrix spec's name: its cells are runs of one name, and none is the "run
    before" another (each cell ran once here, so no cell has a change)."""
    (code,) = [c for h, c in PYTHON if h.startswith("4. ")]
    # The statement that picks the newest run's name (one line, or a parenthesised few), replaced.
    (picked,) = re.findall(r"^NAME = (?:\(\n(?:    .*\n)*\)|.*)$", code, flags=re.MULTILINE)
    result = run_python(code.replace(picked, 'NAME = "arith-models"'), store)
    assert sorted(result["cell"]) == ["large", "small", "unpriced"]
    assert result["change"].null_count() == result.height, result


@pytest.mark.slow
def test_the_pass_rate_counts_each_item_once_after_a_retry(store):
    """Query 1 over current rows: a failure retried since is not counted against its item."""
    (code,) = [c for h, c in PYTHON if h.startswith("1. ")]
    result = run_python(code, store)
    items = pl.read_parquet(f"{store}/items/**/*.parquet", hive_partitioning=True)
    runs = pl.read_parquet(f"{store}/runs/**/*.parquet", hive_partitioning=True)
    executed = items.join(runs.filter(pl.col("kind") == "run").select("run_id").unique(), on="run_id")
    pairs = executed.filter(pl.col("outcome").is_in(["completed", "failed"])).select(
        "run_id", "item_id", "trial"
    )
    assert pairs.height > pairs.unique().height, "the store holds retried items"
    assert result["attempted"].sum() == pairs.unique().height


def test_the_per_model_queries_keep_a_matrix_cell_apart_from_other_runs_of_its_model(store):
    """Queries 1 and 8 on the store's mock-1 runs: the two nightly runs and the matrix's `small`
    cell, which asks with another prompt. The cell's pass rate and spend are rows of their own."""
    (one,) = [c for h, c in PYTHON if h.startswith("1. ")]
    passes = (
        run_python(one, store)
        .filter(pl.col("model") == "mock-1")
        .group_by("cell")
        .agg(pl.col("attempted", "passed").sum())
    )
    by_cell = {row["cell"]: (row["attempted"], row["passed"]) for row in passes.iter_rows(named=True)}
    # The nightly runs: 8 passed at first, and the second night's two failures pass on retry.
    assert by_cell == {None: (2 * N_ITEMS, 10), "small": (N_ITEMS, 6)}, by_cell

    (eight,) = [c for h, c in PYTHON if h.startswith("8. ")]
    usage = run_python(eight, store).filter((pl.col("model") == "mock-1") & (pl.col("kind") == "generation"))
    spend = dict(usage.group_by("cell").agg(pl.col("cost_usd").sum()).iter_rows())
    runs = pl.read_parquet(f"{store}/runs/**/*.parquet", hive_partitioning=True)
    runs = runs.filter(pl.col("revision") == pl.col("revision").max().over("run_id"))
    assert set(spend) == {None, "small"}, spend
    assert spend["small"] == pytest.approx(
        runs.filter(pl.col("cell") == "small")["cost_generation_usd"].item()
    )


@pytest.mark.parametrize("heading, code", SQL, ids=[f"sql{n}" for n in range(len(SQL))])
@pytest.mark.slow
def test_no_sql_snippet_returns_a_128_bit_integer(store, heading, code):
    """DuckDB's `count_if` and `sum` of a BIGINT are HUGEINT (int128), which pandas holds as
    objects and Polars as Int128: the snippets cast counts and sums to BIGINT."""
    con = duckdb.connect()
    relation = con.sql(code.replace(f"'{PLACEHOLDER}/", f"'{store}/"))
    wide = [
        name for name, kind in zip(relation.columns, relation.types, strict=True) if str(kind) == "HUGEINT"
    ]
    assert not wide, f"{heading!r}: {wide} are HUGEINT"


@pytest.mark.slow
def test_the_join_of_items_and_scores_keeps_their_columns_of_one_name_apart(store):
    """`outcome`, `error`, `model`, `cost_usd` are in both: the doc's join names each side's."""
    (py,) = [code for _, code in PYTHON if "item_outcome" in code]
    (sql,) = [code for _, code in SQL if "item_outcome" in code]
    result = assert_agree(store, "items x scores", py, sql)
    judged = result.filter(pl.col("scorer") == "judge")
    # The judge failed on q6 while the target answered it: one name would have said only one.
    assert judged.filter(pl.col("item_outcome") == "completed")[
        "score_outcome"
    ].unique().sort().to_list() == [
        "failed",
        "scored",
    ]
    assert set(judged["judge_model"]) == {"mock-judge"} and "mock-judge" not in set(result["answered_by"])
    assert result.filter(pl.col("item_outcome") == "failed")["scorer"].null_count() > 0


def test_the_doc_installs_duckdb_through_the_analysts_extra():
    """The README's install leaves DuckDB out: the doc names the extra that brings it."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("duckdb") for requirement in extras["analysts"])
    assert 'pip install -q -e ".[analysts]"' in DOC_PATH.read_text()
