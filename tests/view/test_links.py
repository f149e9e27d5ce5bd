"""Links into the view from what Assay writes elsewhere, when `ASSAY_VIEW_URL` is set: `assay
report`'s header links to the run's page, its baseline section to the compare page, and each link
opens that page of the view (the Prefect artifacts' links: tests/flows/test_prefect_server.py).
Unset, nothing links; a value that is no web address is bad input naming the variable."""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

from assay.cli import EXIT_INPUT
from tests.helpers.cli import assay_out
from tests.view.conftest import client

VIEW = "http://127.0.0.1:8484"


def _report(capsys, view_runs, tmp_path, code: int = 0) -> str:
    out = tmp_path / "report.html"
    args = ("report", view_runs["cand"], "--baseline", view_runs["base"], "--store", view_runs["store"])
    printed = assay_out(capsys, *args, "--out", out, code=code)
    return out.read_text() if code == 0 else printed.err


def test_the_report_links_to_the_run_and_the_compare_page(monkeypatch, capsys, view_runs, tmp_path):
    monkeypatch.setenv("ASSAY_VIEW_URL", VIEW + "/")  # a trailing slash makes no double one
    page = _report(capsys, view_runs, tmp_path)
    run_link = html.unescape(re.search(r'id="view-run" href="([^"]+)"', page)[1])
    compare_link = html.unescape(re.search(r'id="view-compare" href="([^"]+)"', page)[1])
    assert run_link == f"{VIEW}/runs/{view_runs['cand']}"
    assert compare_link == f"{VIEW}/compare?a={view_runs['base']}&b={view_runs['cand']}"
    with client(view_runs["store"]) as http:
        for link in (run_link, compare_link):
            parts = urlsplit(link)
            opened = http.get(parts.path + (f"?{parts.query}" if parts.query else ""))
            assert opened.status_code == 200, link
    assert view_runs["cand"] in opened.text and 'id="fig-forest"' in opened.text


def test_without_a_view_url_the_report_links_nowhere(monkeypatch, capsys, view_runs, tmp_path):
    monkeypatch.delenv("ASSAY_VIEW_URL", raising=False)
    page = _report(capsys, view_runs, tmp_path)
    assert 'id="view-run"' not in page and 'id="view-compare"' not in page


def test_a_view_url_that_is_no_web_address_is_bad_input(monkeypatch, capsys, view_runs, tmp_path):
    monkeypatch.setenv("ASSAY_VIEW_URL", "127.0.0.1:8484")
    said = _report(capsys, view_runs, tmp_path, code=EXIT_INPUT)
    assert "ASSAY_VIEW_URL='127.0.0.1:8484' is no http:// or https:// address" in said
    assert not (tmp_path / "report.html").exists()
