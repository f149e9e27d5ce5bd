"""The judge's own noise, measured by asking it K times per item (`llm_judge`'s `judge_samples`).

Each scored row of such a judge holds the sample variance of its K scores (`judge_variance`) and
K (`judge_samples`). A run's noise floor is the mean of those within-item variances (how much one
ask of the judge scatters around its own mean on an item), with their standard deviation and the
items where the judge disagreed with itself most. In a comparison, the judge-noise component of
the delta's variance is reported beside the paired interval, which already carries it
(docs/statistics.md, "The judge's own noise").
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from assay.outcomes import ScorerOutcome

FLAKIEST = 5
"""How many of a scorer's flakiest items `noise_floor` lists."""


def noise_floor(scores: pl.DataFrame | pl.LazyFrame) -> dict[str, dict[str, Any]]:
    """Per scorer whose judge was asked K times: its noise floor and its flakiest items.

    Args:
        scores: a run's score rows (`Store.run_scores`), or a scan of them (`Store.scan_run`):
            only the rows of a judge asked more than once are read, and only the columns used
            (`assay show` of a million items asked once reads two columns, not every row).

    Returns:
        scorer -> `{n_items, judge_samples, noise_floor, noise_sd, flakiest}`: the items measured,
        K (the largest, should the rows differ), the mean within-item judge variance, the standard
        deviation of those variances (null for one item), and up to `FLAKIEST` items
        `{item_id, trial, score, judge_variance}`, the most variable first (ties by item id).
    """
    measured = (
        scores.lazy()
        .filter((pl.col("outcome") == ScorerOutcome.SCORED) & pl.col("judge_variance").is_not_null())
        .select("scorer", "item_id", "trial", "score", "judge_variance", "judge_samples")
        .collect()
    )
    found: dict[str, dict[str, Any]] = {}
    for scorer in sorted(set(measured["scorer"])):
        rows = measured.filter(pl.col("scorer") == scorer)
        variances = rows["judge_variance"]
        flakiest = (
            rows.sort(["judge_variance", "item_id", "trial"], descending=[True, False, False])
            .head(FLAKIEST)
            .select("item_id", "trial", "score", "judge_variance")
        )
        found[scorer] = {
            "n_items": rows.height,
            "judge_samples": int(rows["judge_samples"].max()),  # type: ignore[arg-type]
            "noise_floor": float(variances.mean()),  # type: ignore[arg-type]
            "noise_sd": float(variances.std()) if rows.height > 1 else None,  # type: ignore[arg-type]
            "flakiest": flakiest.to_dicts(),
        }
    return found


def noise_line(scorer: str, found: dict[str, Any]) -> str:
    """`judge: judge noise floor 0.021 (sd 0.015) over 40 items asked 5 times; flakiest q7 0.30, q2 0.25`."""
    sd = "" if found["noise_sd"] is None else f" (sd {found['noise_sd']:.3f})"
    flaky = ", ".join(
        f"{row['item_id']}" + (f"#{row['trial']}" if row["trial"] else "") + f" {row['judge_variance']:.3f}"
        for row in found["flakiest"]
        if row["judge_variance"] > 0
    )
    return (
        f"{scorer}: judge noise floor {found['noise_floor']:.3f}{sd} over {found['n_items']} items "
        f"asked {found['judge_samples']} times" + (f"; flakiest {flaky}" if flaky else "; never varied")
    )


def side_noise(scores: pl.DataFrame, scorer: str) -> pl.DataFrame | None:
    """Per (item_id, trial): the judge's share of the variance of the side's mean score of
    `scorer` — `judge_variance / judge_samples` over its runs, divided by their count squared (the
    side's score is the mean over its runs) — or None when any scored row of it was judged once."""
    rows = scores.filter((pl.col("scorer") == scorer) & (pl.col("outcome") == ScorerOutcome.SCORED))
    if rows.is_empty() or rows["judge_variance"].null_count():
        return None
    return rows.group_by("item_id", "trial").agg(
        ((pl.col("judge_variance") / pl.col("judge_samples")).sum() / pl.len().pow(2)).alias("noise")
    )


def judge_noise_se(base: pl.DataFrame, cand: pl.DataFrame, pairs: pl.DataFrame) -> float:
    """The judge-noise standard error of the mean paired delta over `pairs` (item_id, trial):
    sqrt(sum over pairs of both sides' judge variance of their score) / n, the two sides' judges
    asked independently."""
    joined = (
        pairs.select("item_id", "trial")
        .join(base, on=["item_id", "trial"])
        .join(cand, on=["item_id", "trial"], suffix="_candidate")
    )
    total = float((joined["noise"] + joined["noise_candidate"]).sum())
    return math.sqrt(total) / pairs.height
