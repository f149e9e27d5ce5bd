"""How the terminal meets Prefect: quiet by default, and orchestrated only when asked.

Prefect 3 always talks to a server. With no API configured it boots a temporary one in every
process (slow on a small machine, and the first boot can time out; docs/performance.md). So `assay` decides:
- `PREFECT_API_URL` configured (environment or Prefect profile), or `--prefect`: the flow runs as
  a real Prefect flow run, with its shard tasks, visible in the UI;
- otherwise: the flow's own code runs without orchestration (`assay.orchestrate.run.drive_run`
  for `assay run`) — the same functions in the same order, with no server, no task cache and no
  retries, and without importing Prefect at all.
docs/prefect.md explains the choice.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path


def configure(*, verbose: bool) -> None:
    """Set Prefect's environment before it is imported: the terminal quiet, telemetry off.

    Quiet means Prefect's console handler shows warnings only; its loggers keep their INFO level,
    so a flow run's log lines (its run id, progress, summary: `tasks/host.py`) still reach the
    Prefect API and the flow run's Logs tab. (Setting `PREFECT_LOGGING_LEVEL` instead would
    silence them there too, and in every process `assay ui` starts.)
    """
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
        # Prefect's event worker logs "Still processing items" at exit under its own top-level
        # logger name, whose handler is not Prefect's console handler.
        logging.getLogger("EventsWorker").setLevel(logging.ERROR)
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # A first boot of the temporary server on a fresh machine can take longer than Prefect's 20 s.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def api_configured() -> bool:
    """Whether a Prefect API URL is configured (environment, `.env`, `prefect.toml`,
    `pyproject.toml` or the active profile). Prefect's own settings decide, but they are read
    (and Prefect imported) only when one of those sources could hold a URL at all."""
    if not _api_url_possible():
        return False
    from prefect.settings import get_current_settings

    return bool(get_current_settings().api.url)


def _api_url_possible() -> bool:
    """False only when none of the places Prefect reads settings from can set an API URL: no
    `PREFECT_API_URL` or `PREFECT_PROFILE` in the environment, no `prefect.toml`, no `.env` or
    `pyproject.toml` that mentions Prefect, and a profiles file (if any) without `PREFECT_API_URL`."""
    if any(os.environ.get(name) for name in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH")):
        return True
    here = Path.cwd()
    if (here / "prefect.toml").exists():
        return True
    if _mentions(here / ".env", "PREFECT_") or _mentions(here / "pyproject.toml", "tool.prefect"):
        return True
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    return _mentions(home / "profiles.toml", "PREFECT_API_URL")


def _mentions(path: Path, text: str) -> bool:
    """Whether the file holds `text`; a file that exists but cannot be read might, so True."""
    try:
        return text in path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return False
    except OSError:
        return True


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
