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
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from assay import numbers
from assay.errors import InputError, RunNotFoundError
from assay.outcomes import ItemOutcome, RunStatus
from assay.report import style
from assay.store import Store
from assay.view import items, runs, triage

HERE = Path(__file__).parent
TOKEN_COOKIE = "assay_view_token"
_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# How often a page polls a running run (htmx `every`).
POLL = "2s"


def _environment() -> jinja2.Environment:
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


class _Pages:
    """The routes' handlers over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.env = _environment()

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        page = self.env.get_template(template).render(request=request, store=str(self.store.root), **context)
        return HTMLResponse(page, status_code=status)

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

    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        page = runs.run_page(self.store, run_id)
        template = "run_body.html.j2" if request.headers.get("hx-request") else "run.html.j2"
        return self.render(request, template, run_id=run_id, **page)

    def items(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        query = items.ItemQuery.model_validate({k: v for k, v in request.query_params.items() if v != ""})
        page = items.items_page(self.store, run_id, query)
        template = "items_table.html.j2" if request.headers.get("hx-request") else "items.html.j2"
        return self.render(request, template, run_id=run_id, query=query, page=page, size=items.PAGE)

    def item(self, request: Request) -> Response:
        run_id, q = request.path_params["run_id"], request.query_params
        try:
            trial = int(q.get("trial", "0"))
        except ValueError:
            raise InputError(f"trial {q.get('trial')!r} is no number") from None
        shown = items.item_page(self.store, run_id, q.get("id", ""), trial)
        return self.render(request, "item.html.j2", run_id=run_id, **shown)

    def compare(self, request: Request) -> Response:
        query = triage.CompareQuery.model_validate({k: v for k, v in request.query_params.items() if v != ""})
        shown = triage.compare_page(self.store, query)
        return self.render(request, "compare.html.j2", query=query, **shown)

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
        return self._secured(await call_next(request))

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
        # The labelling page (issue 28, point 5) goes here: /runs/{run_id}/labels, over the
        # store's labels once they exist (the judge-trust issue).
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


def serve(store: Store, *, host: str, port: int, token: str | None) -> int:
    """Serve the view until Ctrl-C; returns the exit status.

    Raises:
        InputError: `host` is not loopback and no token is set.
    """
    import uvicorn

    if not is_loopback(host) and not token:
        raise InputError(
            f"--host {host} is not loopback: set ASSAY_VIEW_TOKEN, which every request must then carry"
        )
    # What the first run page would import (~1 s): before the first request, not during it.
    import plotly.graph_objects  # noqa: F401
    import scipy.special  # noqa: F401

    print(f"assay view: http://{host}:{port}/ over {store.root} (Ctrl-C stops)", flush=True)
    uvicorn.run(build_app(store, token=token), host=host, port=port, log_level="warning")
    return 0
