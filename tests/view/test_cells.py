"""The compare page's cell picker over a real matrix run (three python cells) and a lone run in
the same store, through HTTP in process: `/compare?matrix=` lists the matrix's cells with a pair
chosen, its form's submission compares that pair with the picker above, another pair can be
chosen from there, a run outside the matrix is a 400 naming its field, an unknown matrix a 404,
and the runs page links each matrix to its picker."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import polars as pl
import pytest
from markupsafe import escape

from assay.cli import main
from assay.store import Store
from tests.conftest import write_jsonl, write_spec
from tests.run.test_matrix import SOLVERS
from tests.view.conftest import SCRIPT, client

N = 40
# The cells in the spec's order: the first is the leaderboard's baseline.
CELLS = ("sloppy", "perfect", "awful")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("cells")
    (folder / "cells_solvers.py").write_text(SOLVERS)
    write_jsonl(
        folder / "data.jsonl", [{"id": f"i{i}", "input": str(i), "expected": str(2 * i)} for i in range(N)]
    )
    store = folder / "store"
    common = {
        "dataset": {"path": "data.jsonl", "id": "id"},
        "scorers": [{"kind": "exact_match", "name": "exact"}],
    }
    targets = {cell: {"kind": "python", "function": f"cells_solvers:{cell}"} for cell in CELLS}
    spec = write_spec(folder, name="cells", targets=targets, fail_on_item_error_rate=1, **common)
    assert main(["run", str(spec), "--store", str(store), "-q"]) == 0
    lone = write_spec(folder, name="lone", target=targets["perfect"], **common)
    assert main(["run", str(lone), "--store", str(store), "-q"]) == 0
    runs = Store(store).runs().collect()
    cells = runs.filter(pl.col("matrix_id").is_not_null())
    ids = {row["cell"]: row["run_id"] for row in cells.iter_rows(named=True)}
    return {
        "store": str(store),
        "matrix": cells["matrix_id"][0],
        "lone": runs.filter(pl.col("name") == "lone")["run_id"][0],
        **ids,
    }


class _Form(HTMLParser):
    """The fields a browser would submit from the form `#cell-picker`: its hidden inputs and its
    checked radios."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        if tag == "form":
            self.inside = given.get("id") == "cell-picker"
        elif (
            tag == "input"
            and self.inside
            and (given.get("type") == "hidden" or (given.get("type") == "radio" and "checked" in given))
        ):
            self.fields[given["name"] or ""] = given.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def _submitted(page: str) -> dict[str, str]:
    form = _Form()
    form.feed(page)
    return form.fields


def test_the_picker_lists_the_cells_with_a_pair_chosen(matrix):
    with client(matrix["store"]) as http:
        page = http.get("/compare", params={"matrix": matrix["matrix"]})
    assert page.status_code == 200, page.text
    shown = re.findall(r'<tr class="cell" data-cell="([^"]*)" data-run="([^"]*)"', page.text)
    assert shown == [(cell, matrix[cell]) for cell in CELLS]  # in the spec's order
    assert matrix["lone"] not in page.text
    assert f"{N} / {N}" in page.text and "completed" in page.text
    # The leaderboard's baseline (the spec's first cell) against the next.
    assert _submitted(page.text) == {
        "matrix": matrix["matrix"],
        "a": matrix["sloppy"],
        "b": matrix["perfect"],
    }
    assert 'id="n-changed"' not in page.text  # nothing compared yet


def test_submitting_the_picker_compares_the_pair_and_offers_another(matrix):
    with client(matrix["store"]) as http:
        picker = http.get("/compare", params={"matrix": matrix["matrix"]})
        first = http.get("/compare", params=_submitted(picker.text))
        again = _submitted(first.text) | {"b": matrix["awful"]}
        second = http.get("/compare", params=again)
    assert first.status_code == 200, first.text
    # sloppy misses i % 4 == 0, perfect misses none: those items changed.
    assert '<span id="n-changed">10</span>' in first.text
    assert _submitted(first.text) == {
        "matrix": matrix["matrix"],
        "a": matrix["sloppy"],
        "b": matrix["perfect"],
        "scorer": "exact",
        "adjust": "none",
    }
    assert second.status_code == 200, second.text
    # awful also misses i % 4 == 2: changed from sloppy, for the worse.
    assert '<span id="n-changed">10</span>' in second.text and "(10 worse)" in second.text
    assert _submitted(second.text)["b"] == matrix["awful"]
    # The link reproduces the view, matrix and picker included.
    link = re.search(r'id="permalink" href="([^"]*)"', second.text)
    assert link and f"matrix={matrix['matrix']}" in link.group(1) and matrix["awful"] in link.group(1)


@pytest.mark.parametrize(
    ("pair", "fields"),
    [(("lone", "perfect"), ["a"]), (("sloppy", "lone"), ["b"]), (("lone", "lone"), ["a", "b"])],
)
def test_a_run_outside_the_matrix_is_refused(matrix, pair, fields):
    a, b = (matrix[name] for name in pair)
    with client(matrix["store"]) as http:
        page = http.get("/compare", params={"matrix": matrix["matrix"], "a": a, "b": b})
    assert page.status_code == 400
    problem = re.search(r'<p class="problem" id="problem">([^<]*)</p>', page.text)
    assert problem, page.text
    for field in fields:
        assert f"{field}: run &#39;{matrix['lone']}&#39; is not a cell of matrix" in problem.group(1)
    assert len(re.findall(r"is not a cell", problem.group(1))) == len(fields)


@pytest.mark.parametrize("pair", [False, True])
@pytest.mark.parametrize("name", ["no-such-matrix", SCRIPT])
def test_an_unknown_matrix_is_not_found(matrix, pair, name):
    params = {"matrix": name} | ({"a": matrix["sloppy"], "b": matrix["perfect"]} if pair else {})
    with client(matrix["store"]) as http:
        page = http.get("/compare", params=params)
    assert page.status_code == 404
    assert f"no run of matrix &#39;{escape(name)}&#39;" in page.text
    assert SCRIPT not in page.text  # the name from the URL is shown as text


def test_the_runs_page_links_a_matrix_to_its_picker(matrix):
    link = f'href="/compare?matrix={matrix["matrix"]}"'
    with client(matrix["store"]) as http:
        runs = http.get("/")
        cells = http.get("/", params={"matrix": matrix["matrix"]})
    rows = re.findall(r'<tr data-run="([^"]*)">(.*?)</tr>', runs.text, re.DOTALL)
    linked = {run for run, row in rows if link in row}
    assert linked == {matrix[cell] for cell in CELLS}  # every cell's row, not the lone run's
    assert f'id="compare-matrix" {link}' in cells.text
