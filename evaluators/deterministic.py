"""Scorers that compute their answer from the output alone: string, regex, JSON and number checks.

Each returns a bool or float in [0, 1], or a `Score` when an explanation helps an analyst (why the
output was not JSON, which schema rule failed, what number was read).
"""

from __future__ import annotations

import functools
import json
import math
import re
import string
import unicodedata
from collections import Counter
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from typing import Any, Literal, NoReturn

from pydantic import ConfigDict, Field, field_validator, model_validator

from assay.errors import ScorerError
from assay.evaluators._base import Sample, Score, Scorer


def _text(sample: Sample) -> str:
    """The output as text for a text comparison. A null output is no answer: comparing its
    `str` ("None") would score it like one (exact_match once gave it 1 against "None")."""
    if sample.output is None:
        raise ScorerError("the output is null: there is no answer to compare", {})
    return str(sample.output)


# A number as it appears in text. The sign is only taken when no word precedes it, so that
# "5-3" reads as 5 and 3, not 5 and -3; a number never starts inside another ("1.5" is not ".5").
_NUMBER = re.compile(
    r"(?:(?<![\w.])[-+])?(?<![\d.])"
    r"(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
    r"(?:[eE][-+]?\d+)?"
)
# A bare numeric literal, for exact_match's normalize_numbers (no thousands separators: "1,2" may
# well be a list).
_LITERAL = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?(?!\w|\.\d)")
_FENCED = re.compile(r"\A\s*```[\w-]*[ \t]*\n(.*?)\n?[ \t]*```\s*\Z", re.DOTALL)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_REGEX_FLAGS = {
    "ignorecase": re.IGNORECASE,
    "multiline": re.MULTILINE,
    "dotall": re.DOTALL,
    "verbose": re.VERBOSE,
    "ascii": re.ASCII,
}


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str, flags: tuple[str, ...]) -> re.Pattern[str]:
    """The compiled pattern: once per pattern (re's own cache costs more than this one per call)."""
    combined = 0
    for flag in flags:
        combined |= _REGEX_FLAGS[flag]
    return re.compile(pattern, combined)


def _expected_list(sample: Sample, kind: str) -> list[Any]:
    """The expected value(s) as a list; a scorer that compares against nothing is misconfigured."""
    if sample.expected is None:
        raise ValueError(f"{kind} needs an expected value, and this item has none")
    expected = list(sample.expected) if isinstance(sample.expected, (list, tuple)) else [sample.expected]
    if not expected:
        raise ValueError(f"{kind} needs an expected value, and this item's is an empty list")
    return expected


def _canonical_number(match: re.Match[str]) -> str:
    # Decimal keeps "0.1" exact; the wide context stops huge exponents from overflowing or rounding.
    context = Context(prec=len(match[0]) + 1, Emax=MAX_EMAX, Emin=MIN_EMIN)
    number = Decimal(match[0]).normalize(context)
    return "0" if number.is_zero() else str(number)


def _is_punctuation(char: str) -> bool:
    return char in string.punctuation or unicodedata.category(char).startswith("P")


class ExactMatch(Scorer):
    """1 when the output equals the expected value (any of them, if it is a list) after normalising.

    Args:
        strip: ignore leading and trailing whitespace.
        case_insensitive: compare casefolded text.
        ignore_punctuation: drop ASCII and Unicode punctuation.
        collapse_whitespace: treat every run of whitespace as one space.
        normalize_numbers: write numbers canonically, so "3.0" == "3" and "1e3" == "1000".
    """

    kind: Literal["exact_match"] = "exact_match"
    strip: bool = True
    case_insensitive: bool = False
    ignore_punctuation: bool = False
    collapse_whitespace: bool = False
    normalize_numbers: bool = False

    def _normalize(self, text: str) -> str:
        # Numbers go first: punctuation removal would turn "3.0" into "30".
        if self.normalize_numbers:
            text = _LITERAL.sub(_canonical_number, text)
        if self.ignore_punctuation:
            text = "".join(char for char in text if not _is_punctuation(char))
        if self.case_insensitive:
            text = text.casefold()
        if self.collapse_whitespace:
            text = re.sub(r"\s+", " ", text)
        if self.strip:
            text = text.strip()
        return text

    def score(self, sample: Sample) -> bool:
        output = self._normalize(_text(sample))
        for expected in _expected_list(sample, self.kind):  # a loop: cheaper than any() over a generator
            if output == self._normalize(str(expected)):
                return True
        return False


class Includes(Scorer):
    """1 when the output contains the expected string (or `value`).

    Args:
        value: the substring(s) to look for; defaults to the item's expected value.
        case_insensitive: compare casefolded text.
        mode: with several substrings, whether `any` or `all` of them must appear.
    """

    kind: Literal["includes"] = "includes"
    value: str | tuple[str, ...] | None = None
    case_insensitive: bool = False
    mode: Literal["any", "all"] = "any"

    @field_validator("value")
    @classmethod
    def _not_empty(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        if value == ():
            raise ValueError("value must list at least one substring")
        return value

    def score(self, sample: Sample) -> bool:
        if self.value is None:
            needles = [str(e) for e in _expected_list(sample, self.kind)]
        else:
            needles = [self.value] if isinstance(self.value, str) else list(self.value)
        output = _text(sample)
        if self.case_insensitive:
            output = output.casefold()
            needles = [n.casefold() for n in needles]
        found = (n in output for n in needles)
        return any(found) if self.mode == "any" else all(found)


class Regex(Scorer):
    """1 when the regular expression matches the output.

    Args:
        pattern: a Python regular expression, checked when the spec loads.
        flags: any of ignorecase, multiline, dotall, verbose, ascii.
        mode: `search` finds the pattern anywhere; `fullmatch` requires it to match the whole output.
    """

    kind: Literal["regex"] = "regex"
    pattern: str
    flags: tuple[Literal["ignorecase", "multiline", "dotall", "verbose", "ascii"], ...] = ()
    mode: Literal["search", "fullmatch"] = "search"

    @model_validator(mode="after")
    def _compiles(self) -> Regex:
        try:
            self._compile()
        except re.error as exc:
            raise ValueError(f"invalid regular expression {self.pattern!r}: {exc}") from None
        return self

    def _compile(self) -> re.Pattern[str]:
        return _compiled(self.pattern, self.flags)

    def score(self, sample: Sample) -> bool:
        pattern = self._compile()
        match = pattern.search if self.mode == "search" else pattern.fullmatch
        return match(_text(sample)) is not None


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(output: Any, strip_fences: bool) -> Any:
    """The JSON value of the output. Raises ValueError when it is not JSON.

    A non-string output is taken as an already-decoded value and must be JSON-serialisable.
    NaN and Infinity are refused: Python accepts them but JSON (RFC 8259) does not.
    """
    if not isinstance(output, str):
        json.dumps(output, allow_nan=False)  # raises TypeError or ValueError for non-JSON values
        return output
    if strip_fences and (fenced := _FENCED.match(output)):
        output = fenced[1]
    return json.loads(output, parse_constant=_reject_constant)


class JsonValid(Scorer):
    """1 when the output is valid JSON.

    Args:
        strip_fences: accept output wrapped whole in a markdown code fence (```json ... ```).
    """

    kind: Literal["json_valid"] = "json_valid"
    strip_fences: bool = True

    def score(self, sample: Sample) -> Score:
        try:
            _parse_json(sample.output, self.strip_fences)
        except (TypeError, ValueError) as exc:
            return Score(0.0, explanation=f"not valid JSON: {exc}")
        return Score(1.0)


class JsonSchema(Scorer):
    """1 when the output is JSON that validates against a JSON Schema.

    Args:
        schema: the JSON Schema, checked when the spec loads; its `$schema` picks the draft
            (2020-12 when absent).
        strip_fences: accept output wrapped whole in a markdown code fence (```json ... ```).
    """

    # The field is `schema_` because `schema` shadows a (deprecated) BaseModel method.
    model_config = ConfigDict(serialize_by_alias=True)

    kind: Literal["json_schema"] = "json_schema"
    schema_: dict[str, Any] = Field(alias="schema")
    strip_fences: bool = True

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        # Imported here: a run without a json_schema scorer need not load jsonschema (~0.1 s).
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for

        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            raise ValueError(f"invalid JSON Schema at {where}: {exc.message}") from None
        return schema

    def score(self, sample: Sample) -> Score:
        from jsonschema.exceptions import best_match
        from jsonschema.validators import validator_for

        try:
            instance = _parse_json(sample.output, self.strip_fences)
        except (TypeError, ValueError) as exc:
            return Score(0.0, explanation=f"not valid JSON: {exc}")
        errors = list(validator_for(self.schema_)(self.schema_).iter_errors(instance))
        if not errors:
            return Score(1.0)
        error = best_match(errors)
        where = error.json_path
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return Score(0.0, explanation=f"at {where}: {error.message}{more}")


class Numeric(Scorer):
    """1 when the number in the output is close to the expected number (`math.isclose`).

    With both tolerances 0 (the default) the numbers must be equal. Output with no number scores 0;
    an expected value that is not a number is a scorer failure.

    Args:
        extract: which number to read when the text holds several. `last` by default, since
            step-by-step answers end with the result. Commas between digit groups are thousands
            separators ("1,234" is 1234).
        abs_tol: absolute tolerance.
        rel_tol: relative tolerance.
    """

    kind: Literal["numeric"] = "numeric"
    extract: Literal["first", "last"] = "last"
    abs_tol: float = Field(default=0.0, ge=0)
    rel_tol: float = Field(default=0.0, ge=0)

    def _read_output(self, output: Any) -> float | None:
        if isinstance(output, int | float) and not isinstance(output, bool):
            return float(output)
        numbers = _NUMBER.findall(str(output))
        if not numbers:
            return None
        return float((numbers[0] if self.extract == "first" else numbers[-1]).replace(",", ""))

    def score(self, sample: Sample) -> float | Score:
        expected = sample.expected
        try:
            want = float(expected.replace(",", "") if isinstance(expected, str) else expected)
        except (TypeError, ValueError):
            raise ValueError(f"numeric: expected value {expected!r} is not a number") from None
        _text(sample)  # a null output is no answer: refused before reading a number
        got = self._read_output(sample.output)
        if got is None:
            return Score(0.0, explanation="no number in the output")
        if math.isclose(got, want, rel_tol=self.rel_tol, abs_tol=self.abs_tol):
            return 1.0
        return Score(0.0, explanation=f"read {got!r}, expected {want!r}")


def _squad_tokens(text: str) -> list[str]:
    # SQuAD's normalisation, in its order: lowercase, punctuation, articles, whitespace.
    text = "".join(char for char in text.lower() if char not in string.punctuation)
    return _ARTICLES.sub(" ", text).split()


def _f1(prediction: list[str], truth: list[str]) -> float:
    if not prediction or not truth:
        # SQuAD 2.0: an empty answer is right only against an empty answer.
        return float(prediction == truth)
    common = sum((Counter(prediction) & Counter(truth)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction)
    recall = common / len(truth)
    return 2 * precision * recall / (precision + recall)


class TokenF1(Scorer):
    """SQuAD-style token F1 between output and expected (the best over a list of expected answers).

    Text is lowercased, stripped of punctuation and of the articles a/an/the, and split on whitespace.
    """

    kind: Literal["token_f1"] = "token_f1"

    def score(self, sample: Sample) -> float:
        output = _squad_tokens(_text(sample))
        return max(_f1(output, _squad_tokens(str(e))) for e in _expected_list(sample, self.kind))
