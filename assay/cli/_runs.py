"""A run as a person names it on the command line: its id, a unique prefix of it, or `latest`
(of one spec with `--name SPEC`), turned into the run id once, before a command reads the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.errors import InputError, RunNotFoundError

if TYPE_CHECKING:
    from assay.store import Store

LATEST = "latest"
_SHOWN = 5  # candidates an ambiguous prefix lists


def resolve_run(store: Store, named: str, *, name: str | None = None) -> str:
    """The run id `named` stands for.

    Args:
        store: the store.
        named: a run id, a prefix of exactly one run's id, or `latest` (the newest run).
        name: only runs of this spec name (`--name`); with `latest`, that spec's newest run.

    Raises:
        RunNotFoundError: no run matches, or several do (each listed with its spec and model).
    """
    import polars as pl

    runs = store.runs().select("run_id", "name", "model", "cell", "created_at")
    if name is not None:
        runs = runs.filter(pl.col("name") == name)
    if named == LATEST:
        newest = runs.sort("created_at", descending=True).head(1).collect()
        if newest.is_empty():
            of = f" of spec {name!r}" if name is not None else ""
            raise RunNotFoundError(f"no run{of} in store {str(store.root)!r}: nothing is `latest`")
        return newest["run_id"][0]
    matches = runs.filter(pl.col("run_id").str.starts_with(named)).sort("created_at").collect()
    exact = matches.filter(pl.col("run_id") == named)
    if not exact.is_empty():
        return named
    if matches.height == 1:
        return matches["run_id"][0]
    if matches.is_empty():
        raise RunNotFoundError(
            f"no run {named!r} in store {str(store.root)!r} (an id, a unique prefix or `latest`)"
        )
    listed = ", ".join(
        f"{row['run_id']} ({row['name']}" + (f" {row['model']}" if row["model"] else "") + ")"
        for row in matches.tail(_SHOWN).to_dicts()
    )
    more = f" and {matches.height - _SHOWN} more" if matches.height > _SHOWN else ""
    raise InputError(f"{named!r} is the start of {matches.height} run ids: {listed}{more}; give more of it")


def run_facts(store: Store, run_ids: list[str | None]) -> dict[str, dict[str, Any]]:
    """Run id -> its spec's name, the target's model, the cell and the tags: what names a run to a
    person beside its id (runs not in the store are left out)."""
    import polars as pl

    wanted = [run_id for run_id in dict.fromkeys(run_ids) if run_id]
    if not wanted:
        return {}
    found = (
        store.runs().filter(pl.col("run_id").is_in(wanted)).select("run_id", "name", "model", "cell", "tags")
    )
    return {row.pop("run_id"): row for row in found.collect().to_dicts()}
