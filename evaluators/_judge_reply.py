"""Reading an LLM judge's reply: the score it gives, on its own scale, and why.

In order: a JSON object with a score key (`{"score": ..., "explanation": ...}`: the whole reply, a
```json fence, or an object embedded in prose); else a labelled number (`Score: 7/10`,
`score = 0.8`, `Rating: [[4]]`), the last one, since judges reason and then conclude; else
`8 out of 10`; else a reply that is only a number. Mapping the number onto the scorer's scale is
the scorer's (`LlmJudge._on_scale`).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_PARSED = 20_000  # replies are bounded by max_tokens; this only caps pathological ones
RAW_KEPT = 2000  # how much of a raw reply is kept: in a score's metadata, or as its explanation

_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
# "/ 10", "out of 10", or "%", after the score.
_OF = rf"(?:\s*(?:/|out\s+of)\s*({_NUM})|\s*(%))?"
_LABEL = r"(?:(?:final|overall|total)\s+)?(?:score|rating|grade)"
# "Score (1-10): 7", "Rating (out of 5): 4".
_ASIDE = r"(?:\s*\([^)\n]{0,20}\))?"
# Between the label and the number: markdown emphasis, quotes, brackets, and ":", "=", "is" or "of".
_GAP = r"[\s*_`\"'\[(]*(?:[:=]|\bis\b|\bof\b)?[\s*_`\"'\[(]*"
# A label at the start of a line ("**Final score:** 7") is the judge's verdict; one in the middle of
# a sentence ("a score of 10 would need...") may be reasoning, so it ranks below.
_LINE_LABELLED = re.compile(rf"^[\W_]*{_LABEL}\b{_ASIDE}{_GAP}({_NUM}){_OF}", re.IGNORECASE | re.MULTILINE)
_LABELLED = re.compile(rf"\b{_LABEL}\b{_ASIDE}{_GAP}({_NUM}){_OF}", re.IGNORECASE)
_OUT_OF = re.compile(rf"(?<![\w.])({_NUM})\s*(?:/|out\s+of)\s*({_NUM})(?![\w]|\.\d)()", re.IGNORECASE)
_BARE = re.compile(rf"\A[\s*_`\"'\[(]*({_NUM}){_OF}[\s*_`\"'\])]*\.?\s*\Z")
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.DOTALL)
_SCORE_KEYS = ("score", "rating", "grade")
_EXPLANATION_KEYS = ("explanation", "reasoning", "reason", "rationale", "justification")


def read_verdict(reply: str) -> tuple[tuple[float, float | None], str | None]:
    """((number, denominator or None), explanation) read from a judge's reply.

    Args:
        reply: the reply's text.

    Raises:
        ValueError: the reply holds no score, or its JSON score is not a number.
    """
    text = reply[:MAX_PARSED]
    verdict = _find_json_verdict(text)
    if verdict is None:
        found = _read_text_score(text)
        if found is None:
            raise ValueError("no score found in the judge's reply")
        return found, reply.strip()[:RAW_KEPT] or None
    explanation = next(
        (verdict[k] for k in verdict if str(k).lower() in _EXPLANATION_KEYS and isinstance(verdict[k], str)),
        None,
    )
    raw_score = verdict[_score_key(verdict)]
    if isinstance(raw_score, int | float) and not isinstance(raw_score, bool):
        return (float(raw_score), None), explanation
    found = _read_text_score(raw_score) if isinstance(raw_score, str) else None
    if found is None:
        raise ValueError(f"the judge's JSON score {raw_score!r} is not a number")
    return found, explanation


def reply_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if content is None else str(content)


def _find_json_verdict(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` with a score key: the whole reply, a fenced block, or an
    object embedded in prose."""
    candidates = [text.strip(), *(m[1].strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and _score_key(value) is not None:
            return value
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict) and _score_key(value) is not None:
            return value
        start = text.find("{", start + 1)
    return None


def _score_key(obj: dict[str, Any]) -> str | None:
    keys = {str(k).lower(): k for k in obj}
    return next((keys[k] for k in _SCORE_KEYS if k in keys), None)


def _read_text_score(text: str) -> tuple[float, float | None] | None:
    """(number, denominator or None) read from prose, by the most telling pattern found."""
    if match := _BARE.match(text):
        return _with_denominator(match)
    for pattern in (_LINE_LABELLED, _LABELLED, _OUT_OF):
        matches = list(pattern.finditer(text))
        if matches:
            return _with_denominator(matches[-1])  # the last verdict: judges reason, then conclude
    return None


def _with_denominator(match: re.Match[str]) -> tuple[float, float | None]:
    number, of, percent = match.group(1), match.group(2), match.group(3)
    if percent:
        return float(number), 100.0
    return float(number), (float(of) if of else None)
