"""The `remote` scorer: an evaluator behind HTTP that returns several named scores at once.

`POST {url}` with `{"case": {"id", "input", "expected", "annotations", "config", "files"},
"answer", "output", "trajectory"}`, as evalkit's custom evaluators receive it: `id` the item's id,
`config` the scorer's own `config`, `files` the item's fixture files (its dataset field `files`,
`[]` without; an object input carries them too, as `input.files`, where evalkit puts them), and
`trajectory` the agent's steps (`Sample.trajectory`) or null. The evaluator answers a list (or
`{"results": [...]}`) of `{name, score, label, explanation, kind}`. Each entry becomes its own
row, `<scorer>.<name>`; an entry labelled `error` is a failed row with its explanation as the
error; one of `kind: "gauge"` is a gauge row, `gauge.<scorer>.<name>`, its `score` a measurement
in any unit. An evaluator that cannot be reached, or answers something else, fails the scorer as a
whole. With `requires_trajectory`, an item whose target gave no trajectory is a neutral skip
(outcome `skipped`), as in evalkit: no request is sent.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, JsonValue

from assay.calls.http import HttpURL, tls_context
from assay.calls.keys import key_of
from assay.errors import ScorerNotApplicable
from assay.evaluators._base import Sample, Score, Scorer


class Remote(Scorer):
    """Scores with a remote evaluator.

    Args:
        url: the evaluator's endpoint, POSTed `{case: {id, input, expected, annotations, config,
            files}, answer, output, trajectory}`; it answers a list of `{name, score, label,
            explanation}` (one score row each, `<name>.<entry>`; `kind: "gauge"` entries are
            stored as gauges).
        api_key_env: the environment variable holding a bearer key, if the evaluator wants one.
        api_key_secret: a Prefect Secret block holding it instead (docs/prefect.md).
        timeout: seconds for the request.
        config: sent to the evaluator as `case.config` (its settings for this eval).
        requires_trajectory: skip (neutrally) items whose target gave no trajectory.
    """

    deterministic: ClassVar[bool] = False
    operational: ClassVar[frozenset[str]] = frozenset(
        {"api_key_env", "api_key_secret", "timeout", "gold_check"}
    )

    kind: Literal["remote"] = "remote"
    url: HttpURL
    api_key_env: str | None = None
    api_key_secret: str | None = Field(default=None, min_length=1)
    timeout: float = Field(default=30.0, gt=0)
    config: dict[str, JsonValue] = Field(default_factory=dict)
    requires_trajectory: bool = False

    async def score(self, sample: Sample) -> list[Score]:
        trajectory = sample.trajectory if sample.trajectory is not None else sample.fields.get("trajectory")
        if self.requires_trajectory and not trajectory:
            raise ScorerNotApplicable("the target gave no trajectory, and this evaluator needs one")
        headers = {}
        if key := key_of(self):
            headers["authorization"] = f"Bearer {key}"
        files = _files(sample.fields.get("files"))
        case_input = sample.input
        if isinstance(case_input, dict) and files and "files" not in case_input:
            case_input = {**case_input, "files": files}
        body = {
            "case": {
                "id": sample.item_id,
                "input": case_input,
                "expected": sample.expected,
                "annotations": sample.annotations,
                "config": self.config,
                "files": files,
            },
            "answer": sample.output if isinstance(sample.output, str) else json.dumps(sample.output),
            "output": sample.output,
            # The agent's steps as its target recorded them (an http_agent's validated trajectory);
            # null for targets that record none, and for a rescore (outputs only are stored).
            # (else a `trajectory` field of the dataset row, for evals that carry recorded ones).
            "trajectory": trajectory,
        }
        import httpx  # here: a run without a remote scorer need not load httpx (~0.1 s)

        async with httpx.AsyncClient(timeout=self.timeout, verify=tls_context()) as client:
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
            gauge = entry.get("kind") == "gauge"
            scores.append(
                Score(
                    value=value if value is not None else float("nan"),
                    explanation=entry.get("explanation"),
                    name=entry["name"],
                    label=entry.get("label"),
                    gauge=gauge,
                )
            )
        return scores


def _files(raw: Any) -> list[Any]:
    """The item's fixture files as the dataset gives them (a list, or its JSON text in a CSV)."""
    if isinstance(raw, str) and raw.strip():
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    return raw if isinstance(raw, list) else []
