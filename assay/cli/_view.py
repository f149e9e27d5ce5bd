"""`assay view`: the local web app (assay/view/) over the store, served until Ctrl-C. The web
app's modules (Starlette, Jinja2, Polars) are imported only when it runs."""

from __future__ import annotations

import argparse


def view(args: argparse.Namespace) -> int:
    """`assay view [--store] [--port] [--host]`: serve the view; exit 2 when a host that is not
    loopback has no `ASSAY_VIEW_TOKEN`."""
    from assay.settings import settings
    from assay.store import Store
    from assay.view import serve

    chosen = settings()
    return serve(
        Store(args.store),
        host=args.host,
        port=args.port,
        token=chosen.view_token,
        copies_mb=chosen.view_cache_mb,
    )
