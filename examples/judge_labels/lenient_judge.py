"""A stand-in for an `llm_judge`, with a judge's two kinds of error: it passes any bare number
within 5 % of the expected one (lenient where the quickstart's model rounds big products), and
fails every answer written as a sentence (strict on form, where people read the number)."""

import re


def judge(output: str, expected: str) -> float:
    if not re.fullmatch(r"-?\d+", output.strip()):
        return 0.0
    got, want = int(output), int(expected)
    return 1.0 if abs(got - want) <= 0.05 * max(abs(want), 1) else 0.0
