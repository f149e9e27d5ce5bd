"""Links to `assay view`'s pages from what Assay writes elsewhere (Prefect artifacts, `assay
report`), when `ASSAY_VIEW_URL` says where the view is served; None when it is not set.

    view_run(run_id)          the run's page
    view_items(run_id, ...)   its items page, filtered (`outcome=failed`)
    view_compare(a, b)        the compare (triage) page of a baseline and a candidate run

The paths are the view's routes (assay/view/app.py); tests/view/test_links.py opens each link.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from assay.settings import settings


def view_run(run_id: str) -> str | None:
    """The view's page of run `run_id`, or None without `ASSAY_VIEW_URL`."""
    base = settings().view_url
    return f"{base}/runs/{quote(run_id, safe='')}" if base else None


def view_items(run_id: str, **filters: str) -> str | None:
    """The view's items page of run `run_id` (filtered, e.g. `outcome="failed"`), or None without
    `ASSAY_VIEW_URL`."""
    base = settings().view_url
    query = f"?{urlencode(filters)}" if filters else ""
    return f"{base}/runs/{quote(run_id, safe='')}/items{query}" if base else None


def view_compare(baseline: str, candidate: str) -> str | None:
    """The view's compare page of `baseline` against `candidate`, or None without `ASSAY_VIEW_URL`."""
    base = settings().view_url
    return f"{base}/compare?{urlencode({'a': baseline, 'b': candidate})}" if base else None
