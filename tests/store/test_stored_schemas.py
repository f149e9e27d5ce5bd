"""Every stored column pinned: each dataset's name, Arrow type, nullability and description, in
order, as `tests/data/stored_schemas.json` holds them. The file was written from the schemas of
commit 9c1cb0d, before the row types became their columns' one definition; a change to a stored
column is a change of the store's contract and updates it in the same commit:

    .venv/bin/python -m tests.store.test_stored_schemas > tests/data/stored_schemas.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pyarrow as pa

from assay import _schema
from tests.conftest import REPO

PINNED = REPO / "tests" / "data" / "stored_schemas.json"
DATASETS = (
    "runs",
    "items",
    "scores",
    "requests",
    "turns",
    "batches",
    "comparisons",
    "leaderboards",
    "labels",
)


def described(schema: pa.Schema) -> list[dict[str, Any]]:
    """A schema as the pinned file holds it: a field per column, in order."""
    assert schema.metadata is None
    return [
        {
            "name": field.name,
            "type": str(field.type),
            "nullable": field.nullable,
            "metadata": {key.decode(): value.decode() for key, value in (field.metadata or {}).items()},
        }
        for field in schema
    ]


def current() -> dict[str, list[dict[str, Any]]]:
    return {name: described(getattr(_schema, name.upper())) for name in DATASETS}


def test_every_stored_column_is_the_pinned_one() -> None:
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    now = current()
    assert list(now) == list(pinned)
    for name in DATASETS:
        assert now[name] == pinned[name], name


if __name__ == "__main__":
    json.dump(current(), sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
