"""`assay view`: a local web app over one store (local or s3://), read-only but for people's labels:
the runs, a run's summary, its items filtered and paged on the server, one item whole, two runs
(or two cells of a matrix) compared item by item (the triage view), and a labelling page over a
sample. docs/view.md.

The package, one job per module:
    runs.py      the runs page's rows (main scores with intervals) and a run's page (its summary)
    items.py     a page of a run's items (Polars over the parts, lazily) and one item x trial
    diffs.py     an item's workspace diffs (`diff.patch`, `*.patch`, `*.diff`): read, cut, lines marked
    triage.py    the compare page: the paired statistics, changed items ranked, word diffs, slices
    cells.py     the compare page's cell picker: a matrix's cells, the pair offered, the pair checked
    labelling.py the labelling page: the sample, one task, its label checked and written, agreement
    app.py       the Starlette routes, the Jinja2 pages, the token and same-origin checks, `serve`
    templates/   the pages (`*.html.j2`)   static/   view.css, htmx.min.js (vendored, 0BSD)

Every stored string reaches a page through Jinja2's autoescape, or Plotly's JSON (figures); the
only `|safe` is Plotly's figure HTML. No page shows a secret: run records' spec JSON is left out,
and captured requests were redacted before they were stored.
"""

from assay.view.app import build_app, is_loopback, serve

__all__ = ["build_app", "is_loopback", "serve"]
