"""One vocabulary: every stored word in assay/outcomes.py, every exception in assay/errors.py,
every record type checked against the Parquet schema it is stored under, every file written
whole through assay/_files.py. These tests fail when a second definition creeps back in."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import types
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict, Union, get_args, get_origin, get_type_hints

import polars as pl
import pyarrow as pa
import pytest

from assay import _schema, errors, outcomes
from assay.analysis.compare import estimate_columns
from assay.analysis.stats import PairedEstimate
from assay.analysis.summary import RunSummary
from assay.analysis.tallies import run_accounting
from assay.calls.accounting import Accounting, Budget, BudgetColumns, Usage, token_columns
from assay.calls.capture import CaptureManifest, Recorder, Redactor
from assay.errors import StoreError
from assay.store import Store
from tests.conftest import REPO
from tests.helpers.layout import sources


def _update_schema() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("update_schema", REPO / "docs" / "update_schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- words --------------------------------------------------------------------------------------


def _enums() -> list[type[StrEnum]]:
    return [
        value
        for value in vars(outcomes).values()
        if isinstance(value, type) and issubclass(value, StrEnum) and value.__module__ == outcomes.__name__
    ]


def test_every_enum_of_outcomes_has_a_row_in_the_docs_table() -> None:
    documented = [enum for enum, _ in _update_schema().ENUMS]
    assert sorted(e.__name__ for e in documented) == sorted(e.__name__ for e in _enums())


def test_docs_schema_is_what_update_schema_writes() -> None:
    doc = (REPO / "docs" / "schema.md").read_text()
    assert _update_schema().updated(doc) == doc, "run .venv/bin/python docs/update_schema.py"


def test_token_columns_of_every_dataset_are_the_token_kinds() -> None:
    assert outcomes.TOKEN_KINDS == tuple(kind.value for kind in outcomes.TokenKind)
    for schema in (_schema.ITEMS, _schema.SCORES, _schema.RUNS, _schema.TURNS):
        columns = tuple(n for n in schema.names if n.startswith("tokens_") and n != "tokens_known")
        assert columns == outcomes.TOKEN_COLUMNS
    # Captured requests hold the two kinds every provider reports.
    assert {n for n in _schema.REQUESTS.names if n.startswith("tokens_")} < set(outcomes.TOKEN_COLUMNS)


def test_usage_has_one_field_per_token_kind_in_order() -> None:
    assert [f.name for f in dataclasses.fields(Usage)] == [f"{kind}_tokens" for kind in outcomes.TOKEN_KINDS]
    usage = Usage.of_kinds({"input": 3, "cache_write": 1})
    assert usage == Usage(input_tokens=3, cache_write_tokens=1)
    assert token_columns(usage) == {
        "tokens_input": 3,
        "tokens_output": None,
        "tokens_reasoning": None,
        "tokens_cached": None,
        "tokens_cache_write": 1,
    }
    assert token_columns(None) == dict.fromkeys(outcomes.TOKEN_COLUMNS)


def test_accounting_columns_are_runs_columns_by_spend_and_token_kind() -> None:
    record = Accounting()
    assert list(record.tokens) == list(outcomes.TOKEN_KINDS)
    assert list(record.breakdown) == list(outcomes.SPEND_KINDS)
    assert set(record.columns()) <= set(_schema.RUNS.names)
    assert {outcomes.spend_column(kind) for kind in outcomes.SpendKind} <= set(record.columns())


def test_column_descriptions_list_the_words_of_their_enum() -> None:
    def described(schema: pa.Schema, name: str) -> str:
        return schema.field(name).metadata[b"description"].decode()

    for schema, column, enum in (
        (_schema.ITEMS, "outcome", outcomes.ItemOutcome),
        (_schema.ITEMS, "failure_kind", outcomes.FailureKind),
        (_schema.RUNS, "status", outcomes.RunStatus),
        (_schema.RUNS, "capture_status", outcomes.CaptureStatus),
        (_schema.RUNS, "budget_closed_by", outcomes.BudgetClosedBy),
        (_schema.REQUESTS, "phase", outcomes.RequestPhase),
        (_schema.REQUESTS, "outcome", outcomes.RequestOutcome),
        (_schema.REQUESTS, "kind", outcomes.SpendKind),
        (_schema.COMPARISONS, "verdict", outcomes.Verdict),
    ):
        text = described(schema, column)
        assert all(member.value in text for member in enum), (column, text)


def test_the_target_kind_column_lists_every_target_kind() -> None:
    from assay.spec import TARGET_KINDS

    text = _schema.RUNS.field("target_kind").metadata[b"description"].decode()
    assert all(kind in text.split(":")[0].split(" | ") for kind in TARGET_KINDS), text


# -- records and their schemas ----------------------------------------------------------------


def _python_types(annotation: Any) -> set[type]:
    """The classes an annotation admits (None left out), through unions and generics."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return {t for arg in get_args(annotation) for t in _python_types(arg)}
    if origin is Literal:
        return {type(arg) for arg in get_args(annotation)}
    if origin is not None:
        return {origin}
    if annotation is type(None):
        return set()
    return {annotation}


def _admits(arrow: pa.DataType, python: set[type], *, text_for_json: bool = False) -> bool:
    """Whether a column of type `arrow` can hold what an annotation admitting `python` allows."""
    if pa.types.is_boolean(arrow):
        return python == {bool}
    if pa.types.is_integer(arrow):
        return bool(python) and all(issubclass(t, int) and t is not bool for t in python)
    if pa.types.is_floating(arrow):
        return bool(python) and python <= {float, int}
    if pa.types.is_string(arrow):
        return text_for_json or (bool(python) and all(issubclass(t, str) for t in python))
    if pa.types.is_timestamp(arrow):
        return python == {datetime}
    if pa.types.is_list(arrow):
        return python == {list}
    return False


# Every dataset's row type, whose keys' annotations are its columns (assay/_schema/).
ROW_TYPES: list[tuple[type, pa.Schema]] = [
    (_schema.RunRecord, _schema.RUNS),
    (_schema.ItemRow, _schema.ITEMS),
    (_schema.ScoreRow, _schema.SCORES),
    (_schema.RequestColumns, _schema.REQUESTS),
    (_schema.TurnRow, _schema.TURNS),
    (_schema.BatchRow, _schema.BATCHES),
    (_schema.ComparisonRow, _schema.COMPARISONS),
    (_schema.LeaderboardRow, _schema.LEADERBOARDS),
]


def _python_annotations(row: type) -> dict[str, Any]:
    fields = getattr(row, "model_fields", None)
    if fields is not None:
        return {name: info.annotation for name, info in fields.items()}
    return get_type_hints(row)


@pytest.mark.parametrize(("row", "schema"), ROW_TYPES, ids=[row.__name__ for row, _ in ROW_TYPES])
def test_each_columns_python_type_fits_its_arrow_type(row: type, schema: pa.Schema) -> None:
    hints = _python_annotations(row)
    partition_key = ["run_id"] if row is _schema.RunRecord else []  # read_run adds it
    assert list(hints) == [*partition_key, *schema.names]
    for column in schema:
        python = _python_types(hints[column.name])
        if row is _schema.RequestColumns and column.name == "started_at":
            # ISO-8601 text in a JSONL line, a timestamp in Parquet
            assert pa.types.is_timestamp(column.type) and python == {str}
            continue
        # A request body is any JSON value in a JSONL line, JSON text in Parquet.
        json_body = row is _schema.RequestColumns and column.name in ("request", "response")
        assert _admits(column.type, python, text_for_json=json_body), (row.__name__, column.name)


def test_schema_of_refuses_a_key_without_a_column() -> None:
    class Row(TypedDict, total=False):
        stored: Annotated[int | None, _schema.Column(pa.int64(), "a stored count")]
        forgotten: int | None

    with pytest.raises(TypeError, match=r"Row.forgotten has no Column"):
        _schema.schema_of(Row)
    schema = _schema.schema_of(Row, besides=("forgotten",))
    assert schema.names == ["stored"] and schema.field("stored").metadata == {
        b"description": b"a stored count"
    }


def test_store_refuses_a_run_record_key_that_is_no_column(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with pytest.raises(StoreError, match="no column of runs is named timing_by_model"):
        store.write_run("r1", {"name": "x", "timing_by_model": "[]"})  # type: ignore[typeddict-unknown-key]
    assert not (tmp_path / "store" / "runs").exists()
    store.write_run("r1", {"name": "x", "status": outcomes.RunStatus.RUNNING})
    assert store.read_run("r1")["name"] == "x"


def test_summary_parts_are_columns_of_the_run_record() -> None:
    runs = set(_schema.RUNS.names)
    assert set(get_type_hints(BudgetColumns)) <= runs
    assert set(get_type_hints(CaptureManifest)) <= runs
    assert set(Budget(5.0).columns()) == set(get_type_hints(BudgetColumns))
    assert set(Recorder(None, Redactor([], [])).manifest()) == set(get_type_hints(CaptureManifest))
    empty_items = pl.from_arrow(_schema.ITEMS.empty_table())
    empty_scores = pl.from_arrow(_schema.SCORES.empty_table())
    assert isinstance(empty_items, pl.DataFrame) and isinstance(empty_scores, pl.DataFrame)
    assert set(run_accounting(empty_items, empty_scores)) <= runs
    for key in ("run_id", "name", "matrix_id", "cell", "status", "error", "item_error_rate", "wall_ms"):
        assert key in get_type_hints(RunSummary)


def test_a_paired_estimates_fields_are_columns_of_the_comparisons_table() -> None:
    estimate = PairedEstimate(*(0 for _ in dataclasses.fields(PairedEstimate)))
    assert set(estimate_columns(estimate)) <= set(_schema.COMPARISONS.names)


# -- exceptions --------------------------------------------------------------------------------

# Private control flow that never leaves its module (assay/errors.py's docstring says why).
PRIVATE_EXCEPTIONS = {
    "assay.calls.http.AttemptFailed",
    "assay.calls.wire.StreamFailed",
    "assay.calls.request_codec._BadFile",
    "assay.targets.http_agent._artifacts._TooLarge",
    "assay.targets.http_agent._protocol.CapabilitiesError",
    "assay.sandbox._egress_proxy.Refused",
    # ValueErrors a room turns into a problem's words before it leaves (a row's line, a field's
    # validator): never raised to another room's caller.
    "assay.calls.media.MediaError",
    "assay.targets._conversation.ConversationError",
    "assay.evaluators._call_matching.UnreadableCalls",
}


@pytest.mark.slow
def test_every_exception_is_defined_in_errors_or_listed_as_private() -> None:
    found = set()
    for name, path in sources().items():
        if name == "assay.errors" or not any(
            isinstance(node, ast.ClassDef) for node in ast.walk(ast.parse(path.read_text()))
        ):
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found.add(f"{name}.{value.__qualname__}")
    assert found == PRIVATE_EXCEPTIONS


def test_every_exception_of_errors_is_drawn_in_its_tree() -> None:
    doc = errors.__doc__ or ""
    classes = [
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    ]
    assert len(classes) >= 15
    for cls in classes:
        assert f" {cls.__name__} " in doc, f"{cls.__name__} is not drawn in assay/errors.py's docstring"


# -- files written whole --------------------------------------------------------------------------


@pytest.mark.slow
def test_files_are_renamed_or_linked_into_place_only_by_assay_files_and_the_store() -> None:
    allowed = {
        "assay/_files.py",
        "assay/store/_publish.py",
        "assay/store/local.py",
        "assay/store/_folder.py",
    }
    found = []
    for path in sources().values():
        relative = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in ("replace", "rename", "link")
                and relative not in allowed
            ):
                found.append(f"{relative}:{node.lineno} os.{node.attr}")
    assert found == []
