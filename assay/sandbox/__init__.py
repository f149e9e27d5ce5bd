"""Sandbox: Docker primitives only — one isolated container, its egress, its clean-up.

What runs in a container (the `container` target, its agent adapters, the verifier) is in
`assay/targets/container/`; this room knows nothing of targets, items or scorers.

    _docker         `Sandbox`: one container through the Docker Engine API, isolation decided
                    once (read-only root, no capabilities, limits, tmpfs), files in and out as tar
    egress          `start_egress`: an internal network and an allowlist proxy sidecar
    _egress_proxy   the proxy program that runs inside that sidecar (standard library only)
    fresh           `fresh_sandbox`: a short-lived container for a scorer (`code_exec`)
    hygiene         `clean`, `leftovers`: what a run left on the engine, by its label

The names below are re-exported lazily (assay/_lazy.py): a run without containers needs only
`hygiene`, and need not load the Docker SDK with it (docs/performance.md).
"""

from assay._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "_docker": (
            "CONTROL",
            "RUN_LABEL",
            "WORKSPACE",
            "ExecResult",
            "ImageFacts",
            "Limits",
            "Sandbox",
            "client",
            "folder_files",
            "inspect_image",
            "run_once",
        ),
        "egress": ("Egress", "allowlist_problems", "parse_denials", "sanitize_host", "start_egress"),
        "fresh": ("FreshSandbox", "fresh_sandbox"),
        "hygiene": ("Cleaned", "clean", "clean_after", "leftovers"),
    },
)
