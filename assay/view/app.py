"""The web app: Starlette routes over one store, its Jinja2 pages (autoescape on), the token
check, and `serve` (uvicorn), which refuses a host other than loopback without a token.

Every page is rendered on the server; htmx (vendored under static/, no Node) swaps the items
table as its filters change and polls a running run's rows. Each response forbids loading
anything from another origin (Content-Security-Policy), so no page makes a request that leaves
the view's own address.
"""

from __future__ import annotations

import hmac
import ipaddress
import tempfile
from collections.abc import Callable
from functools import cache, wraps
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import jinja2
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from assay import numbers
from assay.errors import InputError, RunNotFoundError
from assay.outcomes import ItemOutcome, RunStatus
from assay.report import figures, style
from assay.store import Store
from assay.view import cells, items, labelling, runs, triage

HERE = Path(__file__).parent
TOKEN_COOKIE = "assay_view_token"
_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# How often a page polls a running run (htmx `every`).
POLL = "2s"


@cache
def _environment() -> jinja2.Environment:
    """The pages' templates and their filters: one per process, whatever the store (each
    template is compiled once: 2-45 ms apiece)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
    )
    env.filters.update(
        num=numbers.num, pct=numbers.pct, usd=numbers.usd, ms=numbers.ms, dash=numbers.dash, when=style.when
    )
    env.globals.update(
        outcomes=[o.value for o in ItemOutcome],
        statuses=[s.value for s in RunStatus],
        status_colours=style.STATUS_COLOURS,
        outcome_colours=style.OUTCOME_COLOURS,
        verdict_colours=style.VERDICT_COLOURS,
        poll=POLL,
        urlencode=lambda **kw: urlencode({k: v for k, v in kw.items() if v not in (None, "")}),
    )
    return env


def _listing_once(page: Callable[[_Pages, Request], Response]) -> Callable[[_Pages, Request], Response]:
    """A page that lists each run's parts once (`Store.same_listings`): its queries read one
    snapshot of the run, and on s3 make one listing each, not one per query."""

    @wraps(page)
    def listed_once(pages: _Pages, request: Request) -> Response:
        with pages.store.same_listings():
            return page(pages, request)

    return listed_once


class _Pages:
    """The routes' handlers over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.env = _environment()

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        page = self.env.get_template(template).render(request=request, store=str(self.store.root), **context)
        return HTMLResponse(page, status_code=status)

    @_listing_once
    def runs(self, request: Request) -> Response:
        q = request.query_params
        rows = runs.run_list(
            self.store,
            text=q.get("text", ""),
            status=q.get("status", ""),
            matrix=q.get("matrix", ""),
            sort=q.get("sort", "created_at"),
            descending=q.get("order", "desc") != "asc",
        )
        template = "runs_rows.html.j2" if request.headers.get("hx-request") else "runs.html.j2"
        return self.render(request, template, rows=rows, running=runs.running(rows), q=q, sorts=runs.SORTS)

    @_listing_once
    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        page = runs.run_page(self.store, run_id)
        template = "run_body.html.j2" if request.headers.get("hx-request") else "run.html.j2"
        return self.render(request, template, run_id=run_id, **page)

    @_listing_once
    def items(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        query = items.ItemQuery.model_validate({k: v for k, v in request.query_params.items() if v != ""})
        page = items.items_page(self.store, run_id, query)
        template = "items_table.html.j2" if request.headers.get("hx-request") else "items.html.j2"
        return self.render(request, template, run_id=run_id, query=query, page=page, size=items.PAGE)

    @_listing_once
    def item(self, request: Request) -> Response:
        run_id, q = request.path_params["run_id"], request.query_params
        try:
            trial = int(q.get("trial", "0"))
        except ValueError:
            raise InputError(f"trial {q.get('trial')!r} is no number") from None
        shown = items.item_page(self.store, run_id, q.get("id", ""), trial)
        return self.render(request, "item.html.j2", run_id=run_id, **shown)

    @_listing_once
    def compare(self, request: Request) -> Response:
        given = {k: v for k, v in request.query_params.items() if v != ""}
        matrix = given.get("matrix", "")
        # A matrix and no pair yet: only its cell picker, which submits to this page with a pair.
        if matrix and "a" not in given and "b" not in given:
            return self.render(request, "cells.html.j2", picker=cells.picker(self.store, matrix), query=None)
        query = triage.CompareQuery.model_validate(given)
        # Checked before comparing: a run of another matrix is refused without loading either side.
        picker = cells.picker(self.store, query.matrix, query.a, query.b) if query.matrix else None
        shown = triage.compare_page(self.store, query)
        return self.render(request, "compare.html.j2", query=query, picker=picker, **shown)

    @_listing_once
    def labels(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        query = labelling.LabelQuery.model_validate(
            {k: v for k, v in request.query_params.items() if v != ""}
        )
        return self._labels(request, run_id, query)

    def _labels(self, request: Request, run_id: str, query: labelling.LabelQuery) -> Response:
        shown = labelling.label_page(self.store, run_id, query)
        template = "labels_task.html.j2" if request.headers.get("hx-request") else "labels.html.j2"
        return self.render(request, template, run_id=run_id, query=query, **shown)

    async def label(self, request: Request) -> Response:
        """A posted label: written, then the sample's next task (a fragment for htmx, which
        also moves the URL on; a redirect for a plain form)."""
        run_id = request.path_params["run_id"]
        # The page's form is url-encoded (htmx's too): read it so, without a multipart parser.
        if (
            request.headers.get("content-type", "").split(";")[0].strip()
            != "application/x-www-form-urlencoded"
        ):
            raise InputError("a label is posted as application/x-www-form-urlencoded (the page's form)")
        form = dict(parse_qsl((await request.body()).decode(errors="replace"), keep_blank_values=True))
        fields = labelling.LabelQuery.model_fields
        query = labelling.LabelQuery.model_validate(
            {k: v for k, v in form.items() if k in fields and v != ""}
        )
        await run_in_threadpool(labelling.record_label, self.store, run_id, query, form)
        following = await run_in_threadpool(self._next, run_id, query)
        url = f"/runs/{quote(run_id, safe='')}/labels?{urlencode(following.state())}"
        if not request.headers.get("hx-request"):
            return RedirectResponse(url, 303)
        answer = await run_in_threadpool(self._labels, request, run_id, following)
        answer.headers["HX-Push-Url"] = url
        return answer

    def _next(self, run_id: str, query: labelling.LabelQuery) -> labelling.LabelQuery:
        """`query` at the sample's next task, or at its last once there."""
        last = len(labelling.sample(self.store, run_id, query)) - 1
        return query.model_copy(update={"i": min(query.i + 1, last)})

    def plotly(self, request: Request) -> Response:
        return Response(_plotlyjs(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    # A page over a missing run, or a query that cannot be one, says why (no traceback, no secret).
    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.render(request, "error.html.j2", status=404, message=str(exc))

    async def bad_input(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, ValidationError):
            message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        else:
            message = "; ".join(exc.problems) if isinstance(exc, InputError) else str(exc)
        return self.render(request, "error.html.j2", status=400, message=message)


@cache
def _plotlyjs() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


class _Guard(BaseHTTPMiddleware):
    """Asks every request for the token when one is set (a `Bearer` header, the cookie, or
    `?token=` once, answered by a redirect that drops it from the URL and sets the cookie), and
    gives every response the headers that keep the page to its own origin."""

    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    def _holds(self, given: str | None) -> bool:
        return (
            given is not None
            and self.token is not None
            and hmac.compare_digest(given.encode(), self.token.encode())
        )

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if self.token is not None:
            bearer = request.headers.get("authorization", "")
            if self._holds(request.query_params.get("token")):
                kept = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
                answer: Response = RedirectResponse(request.url.path + (f"?{kept}" if kept else ""), 303)
                answer.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
                return self._secured(answer)
            if not (
                self._holds(bearer.removeprefix("Bearer ") if bearer.startswith("Bearer ") else None)
                or self._holds(request.cookies.get(TOKEN_COOKIE))
            ):
                return self._secured(
                    PlainTextResponse(
                        "this view asks for its token (ASSAY_VIEW_TOKEN): open it with ?token=… once, "
                        "or send Authorization: Bearer …",
                        status_code=401,
                    )
                )
        if request.method not in ("GET", "HEAD"):
            refused = self._cross_site(request)
            if refused:
                return self._secured(PlainTextResponse(refused, status_code=403))
        return self._secured(await call_next(request))

    def _cross_site(self, request: Request) -> str | None:
        """Why a request that writes (a label) is refused, if it is: it must come from a page of
        this view (its `Origin` is the view's own, and so is `Sec-Fetch-Site` when the browser
        sends one), and, without a token, be addressed to a loopback name, so that neither a
        form on another site nor a name rebound to 127.0.0.1 can write."""
        host = request.headers.get("host", "")
        origin = request.headers.get("origin")
        if origin is None or origin != f"{request.url.scheme}://{host}":
            return "a label is posted from a page of this view only (its Origin must be this view's)"
        if request.headers.get("sec-fetch-site", "same-origin") != "same-origin":
            return "a label is posted from a page of this view only (Sec-Fetch-Site is not same-origin)"
        if self.token is None and not is_loopback(urlsplit(f"//{host}").hostname or ""):
            return f"without a token this view takes labels addressed to a loopback name, not {host!r}"
        return None

    @staticmethod
    def _secured(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


def build_app(store: Store, *, token: str | None = None) -> Starlette:
    """The view's ASGI app over `store`.

    Args:
        store: the store it shows.
        token: asked of every request when given (`ASSAY_VIEW_TOKEN`).
    """
    pages = _Pages(store)
    routes = [
        Route("/", pages.runs),
        Route("/runs/{run_id}", pages.run),
        Route("/runs/{run_id}/items", pages.items),
        Route("/runs/{run_id}/item", pages.item),
        Route("/compare", pages.compare),
        Route("/runs/{run_id}/labels", pages.labels, methods=["GET"]),
        Route("/runs/{run_id}/labels", pages.label, methods=["POST"]),
        Route("/static/plotly.min.js", pages.plotly),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(_Guard, token=token)],
        exception_handlers={
            RunNotFoundError: pages.not_found,
            InputError: pages.bad_input,
            ValidationError: pages.bad_input,
        },
    )


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback name or address (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(store: Store, *, host: str, port: int, token: str | None, copies_mb: int) -> int:
    """Serve the view until Ctrl-C; returns the exit status.

    Args:
        store: the store shown.
        host: the address bound.
        port: the port bound.
        token: asked of every request when given (`ASSAY_VIEW_TOKEN`).
        copies_mb: on object storage, the MB of local copies of its parts kept while serving
            (`ASSAY_VIEW_CACHE_MB`, `Store.keep_copies`), in a temporary folder deleted at the
            end; 0: every request reads the bucket.

    Raises:
        InputError: `host` is not loopback and no token is set.
    """
    import uvicorn

    if not is_loopback(host) and not token:
        raise InputError(
            f"--host {host} is not loopback: set ASSAY_VIEW_TOKEN, which every request must then carry"
        )
    _warm()
    print(f"assay view: http://{host}:{port}/ over {store.root} (Ctrl-C stops)", flush=True)
    with tempfile.TemporaryDirectory(prefix="assay-view-copies-") as copies:
        if copies_mb:
            store.keep_copies(Path(copies), copies_mb * 2**20)
        uvicorn.run(build_app(store, token=token), host=host, port=port, log_level="warning")
    return 0


def _warm() -> None:
    """What the first pages would otherwise load during their request, loaded at start: scipy
    (intervals; the labelling page's agreement figures: ~2 s), Plotly's figure validators and
    page template, which it reads on a first figure (~0.5 s: one of each chart is drawn), and
    the pages' templates, compiled (~0.2 s in all)."""
    import scipy.special
    import scipy.stats  # noqa: F401

    env = _environment()
    for name in env.list_templates():
        env.get_template(name)
    figures.score_means([{"scorer": "warm", "n": 2, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}])
    figures.binned("warm", "", "", 1.0, {"items": [(0.0, 1)]}, "")
