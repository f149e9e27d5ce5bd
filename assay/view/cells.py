"""The compare page's cell picker: a matrix's cells (each a run sharing the matrix's
`matrix_id`), which of them the picker offers as baseline and candidate, and the check that a
compared pair are cells of the matrix the URL names. Nothing here knows about HTTP or HTML."""

from __future__ import annotations

from typing import Any

import polars as pl

from assay.errors import InputError, RunNotFoundError
from assay.store import Store

# The picker's columns, as the store's `runs` holds them.
CELL_COLUMNS = (
    "run_id",
    "cell",
    "name",
    "model",
    "status",
    "created_at",
    "n_planned",
    "n_completed",
    "n_failed",
)


def matrix_cells(store: Store, matrix_id: str) -> list[dict[str, Any]]:
    """The matrix's cells, each its run's current record (`CELL_COLUMNS`), in the order they were
    opened (a matrix opens its cells in its spec's order), then by cell name.

    Args:
        store: the store.
        matrix_id: the matrix (`matrix_id` of its cells' runs).

    Raises:
        RunNotFoundError: no run of the store belongs to that matrix (a 404, as an unknown run).
    """
    cells = (
        store.runs()
        .filter(pl.col("matrix_id") == matrix_id)
        .select(*CELL_COLUMNS)
        .sort("created_at", "cell", nulls_last=True)
        .collect()
        .to_dicts()
    )
    if not cells:
        raise RunNotFoundError(f"matrix: no run of matrix {matrix_id!r} in store {str(store.root)!r}")
    return cells


def baseline_of(store: Store, matrix_id: str, cells: list[dict[str, Any]]) -> str:
    """The run the picker offers as baseline: the cell the matrix's current leaderboard compares
    against (its spec's first, or the one `assay leaderboard --baseline` chose), else the first
    cell opened.

    Args:
        store: the store.
        matrix_id: the matrix.
        cells: its cells (`matrix_cells`).
    """
    board = (
        store.leaderboards()
        .filter(pl.col("matrix_id") == matrix_id)
        .filter(pl.col("revision") == pl.col("revision").max())
        .select("baseline_cell")
        .drop_nulls()
        .head(1)
        .collect()
    )
    named = board["baseline_cell"][0] if board.height else None
    by_name = {cell["cell"]: cell["run_id"] for cell in cells}
    return by_name.get(named, cells[0]["run_id"]) if named else cells[0]["run_id"]


def check_pair(matrix_id: str, cells: list[dict[str, Any]], a: str, b: str) -> None:
    """Refuse a compared run that is not a cell of the matrix (one problem per field).

    Args:
        matrix_id: the matrix the URL names.
        cells: its cells (`matrix_cells`).
        a: the baseline run.
        b: the candidate run.

    Raises:
        InputError: `a` or `b` is no cell of the matrix (a 400 naming the field).
    """
    ids = {cell["run_id"] for cell in cells}
    names = ", ".join(f"{cell['cell']} ({cell['run_id']})" for cell in cells)
    problems = [
        f"{field}: run {run!r} is not a cell of matrix {matrix_id!r} (its cells: {names})"
        for field, run in (("a", a), ("b", b))
        if run not in ids
    ]
    if problems:
        raise InputError(problems)


def picker(store: Store, matrix_id: str, a: str = "", b: str = "") -> dict[str, Any]:
    """What the cell picker shows: the matrix, its cells, and the baseline and candidate it has
    chosen — the compared pair when given (checked to be cells), else the leaderboard's baseline
    (`baseline_of`) and the first other cell.

    Args:
        store: the store.
        matrix_id: the matrix.
        a: the compared baseline run, if any.
        b: the compared candidate run, if any.

    Raises:
        RunNotFoundError: no such matrix.
        InputError: `a` or `b` given and not a cell of it.
    """
    cells = matrix_cells(store, matrix_id)
    if a or b:
        check_pair(matrix_id, cells, a, b)
    else:
        a = baseline_of(store, matrix_id, cells)
        b = next((cell["run_id"] for cell in cells if cell["run_id"] != a), a)
    return {"matrix": matrix_id, "cells": cells, "a": a, "b": b}
