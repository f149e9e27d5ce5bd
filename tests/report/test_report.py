"""`assay report`: a self-contained HTML report, checked in a real headless Chromium.

Two real runs against the mock model server (a baseline and a worse candidate with failures, a
priced model and an unpriced judge, an input holding `<script>alert(1)</script>`), reported with
and without the baseline. The page is opened from file:// with every other request aborted and
recorded; the test asserts that none was attempted, that Plotly drew every figure, that nothing
was logged as an error, that the injected script never ran, and that the item browser's filters
and search change what is shown.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.cli import main
from assay.report import money
from assay.store import Store
from assay.testing.mock_openai import MockOpenAIServer
from tests.conftest import mock_target, openai_spec, run_assay, write_jsonl, write_spec

pytestmark = [pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
N = 16
SCRIPT = "<script>alert(1)</script>"
HTML_ANSWER = "<img src=x onerror=alert(2)>"
LONG = "What is 7 + 7? " + "Show every step of your working, carefully and in full. " * 12
PRICES = {"mock-1": {"input": 10.0, "output": 30.0}}  # the judge's model stays unpriced


def questions() -> list[dict[str, Any]]:
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(N)]
    rows[5]["question"] = f"{SCRIPT} What is 5 + 5?"
    rows[7]["question"] = LONG
    return rows


# Candidate: four wrong answers (one of them HTML) and one more failure than the baseline.
WRONG = {2: "5", 6: HTML_ANSWER, 9: "I don't know", 12: "23"}
FAULTS_BASE = [{"status": 500, "times": -1, "match": "What is 3 + 3?"}]
FAULTS_CAND = FAULTS_BASE + [{"status": 400, "times": -1, "match": "What is 11 + 11?"}]


def _spec(folder: Path, base_url: str, name: str, gate: float) -> Path:
    folder.mkdir()
    write_jsonl(folder / "data.jsonl", questions())
    return write_spec(
        folder,
        name=name,
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target=mock_target(base_url, max_retries=0),
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {"kind": "token_f1", "name": "f1"},
            {
                "kind": "llm_judge",
                "name": "judge",
                "base_url": base_url,
                "model": "mock-judge",
                "rubric": "Grade {output} for {input}.",
                "scale": 10,
                "gold_check": False,  # the mock judge grades the gold answer 8/10
            },
        ],
        prices=PRICES,
        concurrency=4,
        fail_on_item_error_rate=gate,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mock_server) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("report")
    store = folder / "store"
    rows = questions()
    ids = {}
    for name, wrong, faults, gate in (
        ("arith", {}, FAULTS_BASE, 1.0),
        ("arith-v2", WRONG, FAULTS_CAND, 0.05),
    ):
        answers = {row["question"]: wrong.get(i, row["answer"]) for i, row in enumerate(rows)}
        answers["*"] = "Score: 9/10"  # anything not a question is the judge's rubric
        for i, answer in wrong.items():
            answers[f"Grade {answer} for {rows[i]['question']}."] = "Score: 2/10"
        mock_server.reset()
        mock_server.configure(latency_ms=3, answers=answers, faults=faults)
        code = main(
            ["run", str(_spec(folder / name, mock_server.base_url, name, gate)), "--store", str(store), "-q"]
        )
        assert code == (1 if name == "arith-v2" else 0), "the candidate trips its item-error-rate gate"
        ids[name] = Store(store).runs().filter(pl.col("name") == name).collect()["run_id"][0]
    mock_server.reset()
    return {"store": store, "base": ids["arith"], "cand": ids["arith-v2"]}


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian's chromium package; ./scripts/test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        yield instance
        instance.close()


def report(capsys, *argv: str) -> Path:
    assert main(["report", *argv]) == 0
    return Path(capsys.readouterr().out.strip())


class Opened:
    """A report open in Chromium, with everything it tried to fetch, logged or popped up."""

    def __init__(self, browser, path: Path) -> None:
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.requests: list[str] = []  # every request but the page itself
        self.aborted: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.context.route("**/*", self._route)
        page = self.page = self.context.new_page()
        page.on("request", lambda r: r.url != self.url and self.requests.append(r.url))
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("dialog", self._dialog)
        page.goto(self.url, wait_until="load")

    def _route(self, route) -> None:
        if route.request.url == self.url:
            route.continue_()
        else:
            self.aborted.append(route.request.url)
            route.abort()

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def visible_rows(self) -> int:
        return self.page.locator("#items tbody tr:visible").count()

    def close(self) -> None:
        self.context.close()


def check_page(opened: Opened, figures: int) -> None:
    page = opened.page
    page.wait_for_function(
        "n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= n", arg=figures, timeout=20_000
    )
    assert page.locator(".js-plotly-plot").count() == figures
    drawn = page.eval_on_selector_all(
        ".js-plotly-plot",
        "plots => plots.filter(p => p.querySelector('.main-svg .cartesianlayer .trace')"
        " && p.querySelector('.cartesianlayer path.point, .cartesianlayer .bars path')).length",
    )
    assert drawn == figures, "every figure drew its marks"
    page.wait_for_timeout(200)
    assert opened.requests == [] and opened.aborted == [], f"the page tried to fetch {opened.requests}"
    assert opened.errors == []
    assert opened.dialogs == [], "a dataset string ran as script"


def test_report_with_baseline_in_chromium(runs, browser, capsys, tmp_path):
    store, base, cand = str(runs["store"]), runs["base"], runs["cand"]
    path = report(capsys, cand, "--baseline", base, "--store", store, "--out", str(tmp_path / "r.html"))
    assert path == tmp_path / "r.html" and path.stat().st_size < 6_000_000
    opened = Opened(browser, path)
    page = opened.page
    try:
        check_page(opened, figures=6)  # forest, means, distributions, outcomes, latency, cost
        assert page.locator("#fig-forest .main-svg").first.is_visible()
        forest_text = page.locator("#fig-forest").inner_text()
        assert "exact" in forest_text and "regressed" in forest_text

        # The items that changed most, side by side: the HTML answer shown as text.
        changed = page.locator("table.changed tbody tr")
        assert changed.count() == len(WRONG) + 1, "four wrong answers and one newly failed item"
        assert HTML_ANSWER in page.locator("table.changed").inner_text()
        assert page.locator("table.changed img").count() == 0

        # The failure table: kind, provider, HTTP status, retryable, request id.
        failures = page.locator("#failures table.failures").first
        text = failures.inner_text()
        assert failures.locator("tbody tr").count() == 2
        assert "500" in text and "400" in text and "http" in text and "req_" in text and "openai:" in text

        # The item browser: filters and search change the rows shown.
        assert opened.visible_rows() == N
        page.select_option("#f-outcome", "failed")
        assert opened.visible_rows() == 2
        page.select_option("#f-outcome", "")
        page.select_option("#f-scorer", "exact")
        page.select_option("#f-op", "<")
        page.fill("#f-value", "1")
        assert opened.visible_rows() == len(WRONG)
        page.select_option("#f-op", ">=")
        assert opened.visible_rows() == N - 2 - len(WRONG)
        page.select_option("#f-scorer", "")
        page.fill("#f-search", "alert(1)")
        assert opened.visible_rows() == 1
        row = page.locator("#items tbody tr:visible")
        assert SCRIPT in row.inner_text(), "the script is shown as text"
        assert page.locator("#f-count").inner_text() == f"1 of {N} items"
        page.fill("#f-search", "")
        assert opened.visible_rows() == N

        # A long input is cut, and "more" shows all of it.
        page.fill("#f-search", "every step")
        box = page.locator("#items tbody tr:visible td.text .clip.long").first
        short = box.bounding_box()["height"]
        box.locator("xpath=following-sibling::button[1]").click()
        assert box.bounding_box()["height"] > short * 2
        page.fill("#f-search", "")

        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
        if os.environ.get("ASSAY_REPORT_SCREENSHOT"):
            page.set_viewport_size({"width": 1400, "height": 1000})
            page.screenshot(path=os.environ["ASSAY_REPORT_SCREENSHOT"], full_page=True)
        check_page(opened, figures=6)
    finally:
        opened.close()


def test_report_without_baseline_in_chromium(runs, browser, capsys, tmp_path):
    store, base = runs["store"], runs["base"]
    path = report(capsys, base, "--store", str(store))
    assert path == store / "reports" / f"{base}.html" and path.is_file()
    opened = Opened(browser, path)
    try:
        check_page(opened, figures=5)
        assert opened.page.locator("#baseline").count() == 0
        assert opened.visible_rows() == N
        opened.page.select_option("#f-outcome", "completed")
        assert opened.visible_rows() == N - 1
        opened.page.fill("#f-search", "What is 1")  # q1 and q10 to q15
        assert opened.visible_rows() == 7
        shot = tmp_path / "plain.png"
        opened.page.screenshot(path=str(shot))
        assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 20_000
    finally:
        opened.close()


def test_the_file_is_self_contained_and_escaped(runs, capsys, tmp_path):
    store, base, cand = str(runs["store"]), runs["base"], runs["cand"]
    page = report(
        capsys, cand, "--baseline", base, "--store", store, "--out", str(tmp_path / "r.html")
    ).read_text()
    # Nothing is loaded from anywhere: no external script, style, image or frame, and a CSP that says so.
    assert not re.search(r"<(script|img|iframe|link)[^>]+(src|href)=", page)
    assert "default-src 'none'" in page and "connect-src 'none'" in page
    assert page.count("* plotly.js v") == 1, "plotly.js is inlined once"
    assert page.count("Plotly.newPlot(") == 6
    # Dataset strings never appear unescaped.
    assert SCRIPT not in page and HTML_ANSWER not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page  # server-rendered (the changed items)
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page  # the item browser's data
    # Money: the priced model's figure, and never a bare $0 for the unpriced judge.
    models = page[page.index('id="models"') : page.index('id="failures"')]
    judge_row = next(row for row in models.split("<tr>") if "judging · judge" in row)
    assert "unknown" in judge_row and "unpriced ×" in judge_row and "$0" not in judge_row
    generation = next(row for row in models.split("<tr>") if ">generation<" in row)
    assert 'class="money">$' in generation and "complete" in generation


def test_report_cli_errors_and_json(runs, capsys, tmp_path):
    store = str(runs["store"])
    assert main(["report", "nope", "--store", store]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    out = tmp_path / "deep" / "x.html"
    assert main(["report", runs["base"], "--store", store, "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"path": str(out)} and out.is_file()


@pytest.mark.parametrize(
    ("usd", "completeness", "reasons", "shown", "absent"),
    [
        (0.0012, "complete", {}, "$0.0012", "incomplete"),
        (0.0, "complete", {}, "$0", "unknown"),
        (0.0, "incomplete", {"unpriced": 3}, "unknown", "$0"),
        (0.5, "incomplete", {"uninstrumented": 2}, "≥ $0.5", "unknown"),
        (0.0, "unverified", {}, "unverified", "$0"),
    ],
)
def test_money_never_shows_an_incomplete_zero(usd, completeness, reasons, shown, absent):
    text = money(usd, completeness, reasons)
    assert shown in text and absent not in text


def test_the_rate_controllers_history_in_chromium(browser, capsys, tmp_path):
    """A run that met its account's limit: the report shows the controller's figures (peak and
    final window, answers refused, time paused) and draws its window over time."""
    with MockOpenAIServer(latency_ms=20) as mock:
        mock.configure(rate_limits={"rpm": 600})
        spec = openai_spec(tmp_path, mock.base_url, n=30, concurrency=8)
        store = tmp_path / "store"
        # A process of its own: Playwright's loop runs in this thread.
        done = run_assay("run", str(spec), "--store", str(store), "-q")
        assert done.returncode == 0, done.stderr
        refused = mock.stats()["by_status"]["429"]
    run_id = Store(store).runs().collect()["run_id"][0]
    opened = Opened(browser, report(capsys, run_id, "--store", str(store)))
    try:
        page = opened.page
        cells = page.locator("table.rate tbody td").all_inner_texts()
        assert cells[0] == "8" and cells[4] == str(refused) and cells[5].endswith(" s"), cells
        page.wait_for_function("() => document.querySelector('#fig-rate .main-svg .scatterlayer .trace')")
        assert page.locator("#fig-rate .scatterlayer .trace").count() == 3  # window, in flight, 429s
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.close()


def test_the_changed_items_carry_their_input_and_expected_answer(runs):
    """The report's changed items read only the rows' columns they show (`Side.texts`): the
    item's input, expected answer and place in the dataset among them, beside both outputs."""
    from assay.analysis.compare import load_sides
    from assay.report.data import changed_items

    base, cand = load_sides(Store(runs["store"]), [runs["base"]], [runs["cand"]])
    changed = {row["item_id"]: row for row in changed_items(base, cand)}
    rows = {row["id"]: (i, row) for i, row in enumerate(questions())}
    assert changed, "the candidate answers some items wrong"
    for item_id, row in changed.items():
        index, question = rows[item_id]
        assert json.loads(row["input"]) == question["question"], row
        assert json.loads(row["expected"]) == question["answer"] and row["index"] == index, row
