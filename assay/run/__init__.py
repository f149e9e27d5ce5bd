"""Planning and executing a run: from a validated spec to rows committed in the store.

    checks.py     validating a spec before a run: keys, references, policy, prompts (`validate`)
    plan.py       the run's identity, its items x trials in shards, resume (`open_runs`, `RunPlan`)
    record.py     the run's record through its life: read once per open; started, closed, failed,
                  unavailable — the one writer of run records
    execute.py    a shard's items through `run_item`, committed in batches (`ShardExecutor`);
                  the plain and sandboxed ways an item is produced
    admit.py      admit or stop: the run-wide limiter, the budget, the lease; the guarded target call
    scoring.py    the run's scorers over one output: cut-offs, judging spend (`Scoring`)
    rows.py       the typed rows an item becomes, and the tables they are committed as
    sessions.py   managed sessions: a policy driving a target (`Session`, `drive`)
    attempts.py   an item as attempts of sessions, the best kept (`SessionItems`)
    rescore.py    new scorers over a stored run's outputs (`open_rescore`, `RescoreItems`)
    identity.py   what makes two runs comparable;  gold.py  the judges' self-check
    progress.py   where item progress goes (the terminal's bar)
    breaker.py    the circuit breaker: a target refusing every call stops the run early
    compare_to.py a sequential compare's planning: its baseline, a seeded order, `CommitMonitor`
    trajectories.py  a run's trajectories as ATIF (`assay trajectories export`)

Closing a run (summaries, gates) is `assay.analysis`'s, which writes its final revision through
`record.py`; driving one end to end, `assay.orchestrate`'s.
"""

from assay._lazy import lazy_exports

# Lazily: `assay run` needs neither rescoring nor sessions, `assay rescore` no sandboxes.
__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "admit": ("Gate", "Opening"),
        "attempts": ("SessionItems",),
        "checks": ("validate",),
        "execute": ("ShardExecutor", "ShardReport"),
        "plan": ("RunPlan", "Shard", "new_run_id", "open_runs"),
        "rescore": ("open_rescore", "parse_scorers", "rescore_executor"),
        "rows": ("Finished", "ItemRow", "ScoreRow", "TurnRow"),
        "scoring": ("CutOff", "Scored", "Scoring"),
        "sessions": ("Session", "Turn"),
    },
)
