"""How the terminal meets Prefect: quiet by default, and orchestrated only when asked.

Prefect 3 always talks to a server. With no API configured it boots a temporary one in every
process (~20 s on a small machine, and the first boot can time out). So `assay` decides:
- `PREFECT_API_URL` configured (environment or Prefect profile), or `--prefect`: the flow runs as
  a real Prefect flow run, with its shard tasks, visible in the UI;
- otherwise: the flow's own code runs without orchestration (`flow.fn`, tasks via `.fn`) — the
  same functions in the same order, with no server, no task cache and no retries.
docs/prefect.md explains the choice.
"""

from __future__ import annotations

import logging
import os


def configure(*, verbose: bool) -> None:
    """Set Prefect's environment before it is imported: logs quiet, telemetry off."""
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        # Prefect's event worker logs "Still processing items" at exit under its own top-level
        # logger name, which PREFECT_LOGGING_LEVEL does not reach.
        logging.getLogger("EventsWorker").setLevel(logging.ERROR)
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # A first boot of the temporary server on a fresh machine can take longer than Prefect's 20 s.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def api_configured() -> bool:
    """Whether a Prefect API URL is configured (environment or active profile)."""
    from prefect.settings import get_current_settings

    return bool(get_current_settings().api.url)


def check_api() -> None:
    """Raise `InputError` naming the URL when the configured Prefect API does not answer."""
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    from assay.errors import InputError

    url = get_current_settings().api.url
    if url is None:  # `--prefect` without a server: Prefect boots its temporary one
        return
    with get_client(sync_client=True) as client:
        problem = client.api_healthcheck()
    if problem is not None:
        raise InputError(
            f"the Prefect API at {url} does not answer ({type(problem).__name__}: {problem}); "
            "start the server, or unset PREFECT_API_URL to run without Prefect"
        )
