"""Analysis: what the store's rows say — a run's summary, comparisons, the leaderboard, estimates.

Plain functions over the store (Polars, NumPy); no HTTP, no Prefect. One concern a module:

    summary      a run's summary and its item-error-rate gate; closing a run's record
    compare      baseline vs candidate runs: paired statistics per scorer, verdicts, gates
    stats        the paired statistics themselves (bootstrap, analytic SE, power)
    leaderboard  the cells of a matrix run ranked per scorer
    estimate     the calls, tokens and cost a spec will take, before it runs
    nightly      the nightly benchmark's baseline and retention

The names below are re-exported lazily (assay/_lazy.py): `assay run` needs only `summary`, and
importing `compare` and `stats` with it would cost it ~150 ms. The functions `compare.compare`
and `estimate.estimate` share their module's name, so they are reached through their modules.
"""

from assay._lazy import lazy_exports

_EXPORTS = {
    "CostSummary": "summary",
    "RunSummary": "summary",
    "close_run": "summary",
    "item_error_rate": "summary",
    "mark_unavailable": "summary",
    "matrix_summary": "summary",
    "pass_at_k": "summary",
    "run_accounting": "summary",
    "summarise": "summary",
    "CompareOptions": "compare",
    "Comparison": "compare",
    "GateResult": "compare",
    "ScorerComparison": "compare",
    "Side": "compare",
    "load_sides": "compare",
    "power_report": "compare",
    "write_comparison": "compare",
    "PairedEstimate": "stats",
    "mean_interval": "stats",
    "paired_estimates": "stats",
    "verdict": "stats",
    "build_leaderboard": "leaderboard",
    "count_tokens": "estimate",
    "NIGHTLY_TAG": "nightly",
    "last_successful_nightly": "nightly",
    "mark_passed": "nightly",
    "prune_nightly": "nightly",
}
__all__ = sorted(_EXPORTS)  # noqa: PLE0605 - served by __getattr__: no literal to keep in step
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
