"""The base of every spec model: unknown fields refused, values frozen once validated."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A spec model: an unknown field is an error (a typo never passes silently), and a
    validated spec cannot change under a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)
