"""The `remote` scorer: an evaluator behind HTTP that returns several named scores at once.

`POST {url}` with `{"case": {"input", "expected", "annotations"}, "answer", "output", "trajectory"}`
(`trajectory`: the agent's steps, `Sample.trajectory`, or null);
the evaluator answers a list (or `{"results": [...]}`) of `{name, score, label, explanation}`. Each
becomes its own score row, `<scorer>.<name>`; an entry labelled `error` is a failed row with its
explanation as the error. An evaluator that cannot be reached, or answers something else, fails
the scorer as a whole.
"""

from __future__ import annotations

import json
import os
from typing import ClassVar, Literal

from pydantic import Field

from assay.calls.http import HttpURL
from evaluators._base import Sample, Score, Scorer


class Remote(Scorer):
    """Scores with a remote evaluator.

    Args:
        url: the evaluator's endpoint (POST).
        api_key_env: the environment variable holding a bearer key, if the evaluator wants one.
        timeout: seconds for the request.
    """

    deterministic: ClassVar[bool] = False
    operational: ClassVar[frozenset[str]] = frozenset({"api_key_env", "timeout", "gold_check"})

    kind: Literal["remote"] = "remote"
    url: HttpURL
    api_key_env: str | None = None
    timeout: float = Field(default=30.0, gt=0)

    async def score(self, sample: Sample) -> list[Score]:
        headers = {}
        if self.api_key_env and os.environ.get(self.api_key_env):
            headers["authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        body = {
            "case": {"input": sample.input, "expected": sample.expected, "annotations": sample.annotations},
            "answer": sample.output if isinstance(sample.output, str) else json.dumps(sample.output),
            "output": sample.output,
            # The agent's steps as its target recorded them (an http_agent's validated trajectory);
            # null for targets that record none, and for a rescore (outputs only are stored).
            # (else a `trajectory` field of the dataset row, for evals that carry recorded ones).
            "trajectory": sample.trajectory
            if sample.trajectory is not None
            else sample.fields.get("trajectory"),
        }
        import httpx  # here: a run without a remote scorer need not load httpx (~0.1 s)

        async with httpx.AsyncClient(timeout=self.timeout) as client:
            response = await client.post(self.url, json=body, headers=headers)
        if response.status_code >= 400:
            raise ValueError(f"evaluator answered HTTP {response.status_code}: {response.text[:200]}")
        try:
            answer = response.json()
        except ValueError:
            raise ValueError(f"evaluator answered no JSON: {response.text[:200]!r}") from None
        results = answer.get("results") if isinstance(answer, dict) else answer
        if not isinstance(results, list) or not results:
            raise ValueError(
                f"evaluator answered {str(answer)[:200]!r}: expected a list of {{name, score, label}}"
            )
        scores = []
        for entry in results:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise ValueError(f"evaluator result {str(entry)[:200]!r} has no name")
            value = entry.get("score")
            scores.append(
                Score(
                    value=value if value is not None else float("nan"),
                    explanation=entry.get("explanation"),
                    name=entry["name"],
                    label=entry.get("label"),
                )
            )
        return scores
