"""The page: Jinja2 templates from the package (autoescape on) filled with what `sections` gives
them, the package's CSS and JS and plotly.js inlined, written as one self-contained file."""

from __future__ import annotations

import functools
import os
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from assay import __version__, numbers
from assay._files import write_atomic
from assay.outcomes import TOKEN_KINDS
from assay.report import figures, sections, style
from assay.report.data import RunData, cut, json_text
from assay.store import Store


@functools.cache
def environment() -> Environment:
    """The report's Jinja2 environment: templates from `assay/report/templates/`, every printed
    value HTML-escaped, an undefined name an error, and `tojson` safe inside `<script>`."""
    env = Environment(
        loader=PackageLoader("assay.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # `tojson` escapes <, >, & and ' itself; these make it strict (no NaN) and compact.
    env.policies["json.dumps_kwargs"] = {"ensure_ascii": True, "allow_nan": False, "separators": (",", ":")}
    env.filters.update(
        dash=numbers.dash,
        num=numbers.num,
        pct=numbers.pct,
        ms=numbers.ms,
        usd=numbers.usd,
        signed=style.signed,
        when=style.when,
        reasons=numbers.reasons_text,
        cut=cut,
        json_text=json_text,
    )
    env.tests["long"] = sections.is_long
    env.globals.update(
        money_parts=numbers.money_parts,
        gauge_value=numbers.gauge,
        TOKEN_KINDS=TOKEN_KINDS,
        TOKEN_HEADINGS=style.TOKEN_HEADINGS,
        NEUTRAL=style.NEUTRAL,
        OUTCOME_COLOURS=style.OUTCOME_COLOURS,
        VERDICT_COLOURS=style.VERDICT_COLOURS,
        STATUS_COLOURS=style.STATUS_COLOURS,
        COMPLETENESS_COLOURS=style.COMPLETENESS_COLOURS,
    )
    return env


@functools.cache
def _static(name: str) -> str:
    return (files("assay.report") / "static" / name).read_text(encoding="utf-8")


def money(usd: float | None, completeness: str | None, reasons: dict[str, int] | None = None) -> str:
    """Cost as HTML (the `money` macro of the templates) that never shows a bare $0 for accounting
    that is not complete: complete figures as they are, incomplete ones as a lower bound (or
    "unknown" when nothing was measured) with the reasons.

    Args:
        usd: the measured dollars.
        completeness: the accounting's completeness.
        reasons: why it is incomplete, counted.
    """
    macros = environment().get_template("macros.html.j2").module
    return macros.money(usd, completeness, reasons)  # type: ignore[attr-defined]


def default_path(store: Store, run_id: str) -> Path:
    """`<store>/reports/<run_id>.html`.

    Args:
        store: the store.
        run_id: the run.
    """
    return Path(store.root) / "reports" / f"{run_id}.html"


def build_report(
    store: Store, run_id: str, *, baseline: str | None = None, artifacts_href: str = "../artifacts"
) -> str:
    """The report as one HTML document (a string).

    Args:
        store: the store.
        run_id: the run.
        baseline: a run of the same dataset to compare with.
        artifacts_href: the store's artifacts folder, relative to where the page will be; the
            items' kept files (transcripts, diffs) link into it.
    """
    data = RunData(store, run_id)
    # First: a baseline that cannot be compared fails before any other work.
    against = sections.baseline(store, data, baseline) if baseline is not None else None
    return (
        environment()
        .get_template("page.html.j2")
        .render(
            title=f"{data.record['name']} · {run_id} — Assay report",
            version=__version__,
            generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            css=_static("report.css"),
            js=_static("report.js"),
            plotlyjs=figures.plotlyjs(),
            run=sections.header(data),
            baseline=against,
            sequential=sections.sequential(store, data),
            scores=sections.scores(data),
            labels=sections.labels(store, data),
            outcomes=figures.outcomes(data),
            timing=sections.timing(data),
            models=sections.models(data),
            failures=sections.failures(data),
            browser=sections.browser(data, artifacts_href),
        )
    )


def write_report(
    store: Store, run_id: str, *, baseline: str | None = None, out: str | Path | None = None
) -> Path | str:
    """Write the report of `run_id` (compared with `baseline` when given); returns its path
    (its URL, when written into an object store).

    Args:
        store: the store.
        run_id: the run to report on (the candidate when a baseline is given).
        baseline: a run of the same dataset to compare with.
        out: the HTML file to write (default `<store>/reports/<run_id>.html`).
    """
    if out is None and not store.local:
        # Into the object store, beside its artifacts as in a local store.
        page = build_report(store, run_id, baseline=baseline)
        key = f"reports/{run_id}.html"
        store.location.write(key, page.encode())
        return store.location.reader_path(key)
    path = Path(out) if out is not None else default_path(store, run_id)
    # Links to what attempts kept (transcripts, diffs, workspaces), relative to where the page is.
    if store.local:
        href = Path(os.path.relpath(store.artifacts_root.resolve(), path.parent.resolve())).as_posix()
    else:  # a page outside the bucket names where the files are: `s3://bucket/prefix/artifacts`
        href = store.location.reader_path("artifacts")
    page = build_report(store, run_id, baseline=baseline, artifacts_href=href)
    write_atomic(path, page)
    return path
