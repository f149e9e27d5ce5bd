"""User scorer functions for tests/evaluators/test_scorers.py, referenced as `tests.helpers.user_scorers:name`."""

from __future__ import annotations

import asyncio
from typing import Any

from assay.evaluators import Sample, Score

NOT_CALLABLE = 3


def equals_expected(output: str, expected: str) -> bool:
    return output == expected


def reports_arguments(**kwargs: Any) -> dict[str, Any]:
    return {"score": 1.0, "explanation": ",".join(sorted(kwargs)), "metadata": {"input": kwargs["input"]}}


def names_the_calls(tool_calls: Any, expected: Any) -> bool:
    """Whether the calls' names, in order, are the expected ones (words are no calls)."""
    return tool_calls is not None and [call.name for call in tool_calls] == expected


def takes_sample(sample: Sample) -> Score:
    return Score(0.25, explanation=type(sample).__name__)


def takes_nothing() -> float:
    return 1


async def async_half(output: str) -> float:
    await asyncio.sleep(0)
    return 0.5


async def async_dict(output: str) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"score": 0.75, "explanation": "async"}


def dict_without_score(output: str) -> dict[str, Any]:
    return {"value": 1.0}


def dict_with_typo(output: str) -> dict[str, Any]:
    return {"score": 1.0, "explanaton": "typo"}


def needs_context(output: str, context: str) -> bool:
    return True


def returns_text(output: str) -> str:
    return "good"


def boom(output: str) -> float:
    raise RuntimeError("kaboom")


def is_english(output: Any, input: Any, annotations: dict[str, Any]) -> bool:
    return annotations.get("lang") == "en"


class Namespace:
    @staticmethod
    def nested(output: str) -> bool:
        return output == "yes"
