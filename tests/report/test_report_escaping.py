"""Every string a dataset, a target or a scorer controls is inert in the HTML report.

Two real runs of a python target over a dataset whose ids, inputs and expected answers are HTML
and script; the candidate answers with more of it, fails with it, and its scorer explains and
fails with it; a tag and a scorer name carry it too. The report (with the baseline: every place a
string can appear) is opened in headless Chromium: no dialog opens, no element or attribute is
injected, and each string is shown as the text it is wherever the report shows it.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from assay.cli import main
from assay.store import Store
from tests.conftest import write_jsonl, write_spec
from tests.report.test_report import Opened, browser, report  # noqa: F401  (browser is a fixture)

pytestmark = [pytest.mark.browser]


def hostile(field: str) -> str:
    """A string that runs script if any context of the page treats it as markup."""
    return (
        f'<script>alert("{field}")</script>"><img src=x onerror=alert("{field}")>'
        f"'></script><svg onload=alert('{field}')>{{{{7*7}}}}"
        # Tags Plotly draws in figure labels: shown as text too.
        f'<b>b</b><a href="javascript:alert(1)">a</a>'
    )


SCORER = hostile("scorer")
FIELDS = ("id", "input", "expected", "output", "error", "explanation", "scorer error", "tag")
HOSTILE = {field: hostile(field) for field in FIELDS}

SOLVERS = (
    "from assay.evaluators._base import Score\n\n"
    f"HOSTILE = {HOSTILE!r}\n"
    """
def base(x, item_id):
    return "fine"

def cand(x, item_id):
    if item_id == "b":
        raise RuntimeError(HOSTILE["error"])
    return HOSTILE["output"] if item_id.startswith("<") else "fine"

def judge(output, input):
    if input == "c":
        raise ValueError(HOSTILE["scorer error"])
    return Score(0.0 if output == HOSTILE["output"] else 1.0, HOSTILE["explanation"])
"""
)


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("hostile")
    rows = [
        {"id": hostile("id"), "input": hostile("input"), "expected": hostile("expected")},
        {"id": "b", "input": "b", "expected": "b"},
        {"id": "c", "input": "c", "expected": "c"},
    ]
    ids = {}
    for name in ("base", "cand"):
        sub = folder / name
        sub.mkdir()
        write_jsonl(sub / "data.jsonl", rows)
        (sub / "hostile_solvers.py").write_text(SOLVERS)
        spec = write_spec(
            sub,
            name=f"hostile-{name}",
            dataset={"path": "data.jsonl", "id": "id"},
            target={"kind": "python", "function": f"hostile_solvers:{name}"},
            scorers=[{"kind": "user_code", "name": SCORER, "function": "hostile_solvers:judge"}],
            tags=[hostile("tag")],
            fail_on_item_error_rate=1,
            fail_on_scorer_error_rate=1,  # not what this test is about: its scorer may fail on hostile text
        )
        assert main(["run", str(spec), "--store", str(folder / "store"), "-q"]) == 0
        runs = Store(folder / "store").runs().filter(pl.col("name") == f"hostile-{name}").collect()
        ids[name] = runs["run_id"][0]
    return {"store": str(folder / "store"), **ids}


def test_hostile_strings_are_stored_as_given(hostile_runs):
    """The runs really hold the strings (else the page test below would prove nothing)."""
    store = Store(hostile_runs["store"])
    items = store.run_items(hostile_runs["cand"])
    scores = store.run_scores(hostile_runs["cand"])
    assert hostile("id") in items["item_id"].to_list()
    assert any(hostile("error") in (text or "") for text in items["error"].to_list())
    assert json.dumps(hostile("output")) in items["output"].to_list()  # JSON text
    assert set(scores["scorer"]) == {SCORER}
    assert hostile("explanation") in scores["explanation"].to_list()
    assert any(hostile("scorer error") in (text or "") for text in scores["error"].to_list())


def test_hostile_strings_are_inert_in_chromium(hostile_runs, browser, capsys, tmp_path):  # noqa: F811
    out = tmp_path / "r.html"
    path = report(
        capsys,
        hostile_runs["cand"],
        "--baseline",
        hostile_runs["base"],
        "--store",
        hostile_runs["store"],
        "--out",
        str(out),
    )
    source = path.read_text()
    for field in FIELDS:
        assert hostile(field) not in source, f"{field} is written into the file unescaped"
    assert "</script><svg" not in source, "a string closes a <script> element"

    opened = Opened(browser, path)
    page = opened.page
    try:
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 5")
        assert opened.dialogs == [], "a dataset string ran as script"
        assert opened.errors == [] and opened.requests == []
        injected = page.evaluate(
            """() => ({
                images: document.querySelectorAll('img').length,
                links: document.querySelectorAll('a[href^="javascript"], svg a').length,
                handlers: [...document.querySelectorAll('*')].filter(
                    el => [...el.attributes].some(a => a.name.startsWith('on'))).length,
                scripts: document.scripts.length,
                figures: document.querySelectorAll('.js-plotly-plot').length,
            })"""
        )
        # Scripts: the Plotly config and plotly.js, one per figure, the items' data, the browser's.
        # Figures: means, distributions, outcomes, latency, forest (a python target has no cost).
        assert injected == {
            "images": 0,
            "links": 0,
            "handlers": 0,
            "scripts": 4 + 5,
            "figures": 5,
        }

        def shown(selector: str) -> str:
            return page.locator(selector).first.inner_text()

        header = shown("header")
        assert hostile("tag") in header
        scores = shown("#scores table")
        assert SCORER in scores
        failures = shown("#failures")
        for field in ("error", "scorer error"):
            assert hostile(field) in failures, field
        changed = shown("table.changed")
        for field in ("id", "input", "expected", "output", "error"):
            assert hostile(field) in changed, field
        rows = shown("#items")
        for field in ("id", "input", "expected", "output", "error"):
            assert hostile(field) in rows, field
        assert SCORER in rows  # the browser's column head
        options = page.eval_on_selector_all("#f-scorer option", "os => os.map(o => o.value)")
        assert SCORER in options
        # The scorer's name labels the figures as text (Plotly reads a few tags in labels).
        assert SCORER in page.locator("#fig-scores").inner_text()
        # Scorer explanations are stored (see above) but the report does not show them.
        assert 'alert("explanation")' not in page.locator("body").inner_text()
    finally:
        opened.close()
