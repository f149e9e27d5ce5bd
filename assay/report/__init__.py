"""`assay report`: one self-contained HTML file describing a run, optionally against a baseline.

The page works offline and makes no network request: plotly.js, the package's CSS and JS are
inlined, every figure is a `Plotly.newPlot` call over inline JSON, the item browser is plain
JavaScript over an inline JSON block, and a Content-Security-Policy forbids loading anything.

The package, one job per module:
    data.py      what the report shows, computed from the store with Polars (no HTML)
    conversation.py  an item's conversation as turns (its images named, thumbnails when reachable)
    style.py     how values are written (the templates' filters) and the colours of words
    figures.py   the Plotly figures
    sections.py  what each section's template gets
    render.py    the Jinja2 environment, the page, the file
    templates/   the page and its sections (`*.html.j2`)   static/   report.css, report.js

Every string from a dataset, a target or a scorer (inputs, outputs, errors, ids, model and
scorer names, tags) reaches the page through Jinja2's autoescape (server-rendered parts), through
`tojson`, which writes `<`, `>`, `&` and `'` as `\\u003c`… and which the page's script puts into
the page as `textContent` (the item browser), or through Plotly's JSON encoder, which escapes
`<`, `>` and `/` (figures; their labels are also HTML-escaped because Plotly reads a few tags in
labels). The only `|safe` in the templates are the package's own CSS and JS, plotly.js, and
Plotly's figure HTML.
"""

from assay.report.data import RunData, browser_rows, changed_items, model_rows, scorer_table
from assay.report.render import build_report, default_path, money, write_report

__all__ = [
    "RunData",
    "browser_rows",
    "build_report",
    "changed_items",
    "default_path",
    "model_rows",
    "money",
    "scorer_table",
    "write_report",
]
