"""Two real runs of a python target for the view's tests: 60 items with a `topic` annotation, one
whose id, input and expected answer are HTML and script; the candidate answers a few items worse
(one with more HTML), fails one with HTML in its error, and its scorer explains in HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from starlette.testclient import TestClient

from assay.cli import main
from assay.store import Store
from assay.view import build_app
from tests.conftest import write_jsonl, write_spec

SCRIPT = '<script>alert("x")</script><img src=x onerror=alert(1)>'
N = 60
WORSE = {3, 8, 17, 25}

SOLVERS = f"""
from assay.evaluators._base import Score

SCRIPT = {SCRIPT!r}
WORSE = {sorted(WORSE)!r}

def base(x, item_id):
    return "the answer is " + x

def cand(x, item_id):
    if item_id == "q40":
        raise RuntimeError("boom " + SCRIPT)
    if item_id.startswith("<"):
        return SCRIPT
    if int(item_id.removeprefix("q")) in WORSE:
        return "no idea at all"
    return "the answer is " + x

def judge(output, expected):
    return Score(1.0 if output == "the answer is " + expected else 0.0, "judged " + SCRIPT)
"""


def rows() -> list[dict[str, Any]]:
    out = [
        {"id": f"q{i}", "input": str(i), "expected": str(i), "topic": "maths" if i % 2 else "words"}
        for i in range(N)
    ]
    out[5] = {"id": SCRIPT, "input": SCRIPT, "expected": SCRIPT, "topic": "maths"}
    return out


@pytest.fixture(scope="session")
def view_runs(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("view")
    store = folder / "store"
    ids = {}
    for name in ("base", "cand"):
        sub = folder / name
        sub.mkdir()
        write_jsonl(sub / "data.jsonl", rows())
        (sub / "view_solvers.py").write_text(SOLVERS)
        spec = write_spec(
            sub,
            name=f"view-{name}",
            dataset={"path": "data.jsonl", "id": "id", "annotations": ["topic"]},
            target={"kind": "python", "function": f"view_solvers:{name}"},
            scorers=[{"kind": "user_code", "name": "judge", "function": "view_solvers:judge"}],
            tags=["view", SCRIPT],
            fail_on_item_error_rate=1,
        )
        assert main(["run", str(spec), "--store", str(store), "-q"]) == 0
        ids[name] = Store(store).runs().filter(pl.col("name") == f"view-{name}").collect()["run_id"][0]
    return {"store": str(store), **ids}


def client(store: str | Path, token: str | None = None) -> TestClient:
    """An HTTP client of the view's ASGI app, in process (httpx through Starlette's portal)."""
    return TestClient(build_app(Store(store), token=token), base_url="http://127.0.0.1")
