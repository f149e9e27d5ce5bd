"""Analysis: what the store's rows say — a run's summary, comparisons, the leaderboard, estimates.

Plain functions over the store (Polars, NumPy); no HTTP, no Prefect. One concern a module:

    summary      a run's summary; closing a run (its final revision)
    run_figures  what a summary computes from the run's parts, and the copy its closing record keeps
    error_rates  a run's item and scorer error rates and the gates on them
    tallies      the statistics a summary is made of (failures, gauges, pass@k, timing, accounting)
    lines        a run's summary in plain lines (the terminal's and the Prefect logs' wording)
    compare      baseline vs candidate runs: paired statistics per scorer, verdicts, the document
    sides        one side of a comparison: its runs' records, items, scores and gauges
    gates        a comparison's error-rate gates, timing delta and certified cost delta
    stats        the paired statistics themselves (bootstrap, analytic SE, power)
    resampling   the paired bootstrap's resampled means, exact and fast
    intervals    small-sample intervals (Wilson, Newcombe), exact McNemar, Holm / BH adjustment
    sequential   the anytime-valid betting confidence sequence on a paired difference
    monitor      a run's sequential compare against its baseline (`compare_to`), batch by batch
    leaderboard  the cells of a matrix run ranked per scorer
    estimate     the calls, tokens and cost a spec will take, before it runs
    agreement    a judge against people's labels: accuracy, kappa, weighted kappa, Spearman, MAE, bias
    ppi          judge-corrected means: PPI, PPI++ (power-tuned), inverse-probability weighted
    judge_trust  the store's scores and labels made into those figures; the corrected paired delta
    judge_noise  a judge asked K times: the run's noise floor, its flakiest items, compare's judge-noise share
    labelling    label files read and checked, a run's labels exported, which items to label next
    nightly      the nightly benchmark's baseline and retention

The names below are re-exported lazily (assay/_lazy.py): `assay run` needs only `summary`, and
importing `compare` and `stats` with it would slow it (docs/performance.md). The functions `compare.compare`
and `estimate.estimate` share their module's name, so they are reached through their modules.
"""

from assay._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "summary": (
            "CostSummary",
            "RunSummary",
            "close_run",
            "matrix_summary",
            "summarise",
        ),
        "run_figures": ("part_figures",),
        "error_rates": ("item_error_rate",),
        "tallies": ("pass_at_k", "run_accounting"),
        "lines": ("comparison_markdown", "gauge_line"),
        "compare": (
            "CompareOptions",
            "Comparison",
            "ScorerComparison",
            "load_sides",
            "power_report",
            "write_comparison",
        ),
        "sides": ("Side",),
        "gates": ("CostDelta", "GateResult", "TimingDelta"),
        "stats": ("PairedEstimate", "paired_estimates", "verdict"),
        "intervals": ("adjusted_p_values", "newcombe_paired", "score_interval"),
        "monitor": ("monitor_for", "sequence_of"),
        "leaderboard": ("build_leaderboard",),
        "estimate": ("count_tokens",),
        "nightly": ("NIGHTLY_TAG", "last_successful_nightly", "mark_passed", "prune_nightly"),
    },
)
