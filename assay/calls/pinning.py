"""A model must be pinned to an exact version: `model_pin_problem` says why a name is not (the
anthropic target, an Anthropic judge and the container agents all ask it before a run starts)."""

from __future__ import annotations

import re

_MOVING_WORD = re.compile(r"(?:^|[-:/@._])latest(?:$|[-:/@._\[])", re.IGNORECASE)
# Claude Code's own model aliases follow whatever Anthropic currently ships.
_CLAUDE_CODE_ALIASES = frozenset({"default", "sonnet", "opus", "haiku", "opusplan"})
_MONTH_DAY = r"(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
_DATE_STAMP = re.compile(
    rf"(?:^|[-@:._/])(?:20\d\d{_MONTH_DAY}|20\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))(?=$|[-@:._/])"
)
# OpenAI's first snapshots carried only month and day: gpt-4-0613, gpt-3.5-turbo-0125.
_OPENAI_MONTH_DAY = re.compile(rf"-{_MONTH_DAY}(?=$|-)")
_ANTHROPIC = re.compile(r"(?:^|[/.:])claude-", re.IGNORECASE)
_OPENAI = re.compile(r"(?:^|[/:])(?:(?:chat)?gpt|codex)-|(?:^|[/:])o\d+(?=$|-)", re.IGNORECASE)


def model_pin_problem(model: str) -> str | None:
    """Why `model` is not pinned to an exact version, or None when it is.

    A moving alias is refused because a moving default is not a valid measurement: two runs of
    the same spec would quietly measure different models. The rule:

    - `latest` as a name or a name's part (`latest`, `claude-3-5-sonnet-latest`, `qwen:latest`)
      and Claude Code's aliases (`sonnet`, `opus`, `haiku`, `opusplan`, `default`) are refused;
    - Anthropic (`claude-…`) and OpenAI (`gpt-…`, `chatgpt-…`, `codex-…`, `o1`, `o3-mini`…)
      names must carry a date stamp, the mark of a snapshot: `YYYYMMDD` (`claude-sonnet-4-20250514`),
      `YYYY-MM-DD` (`gpt-4o-2024-08-06`, `o3-2025-04-16`) or OpenAI's older `MMDD` (`gpt-4-0613`);
    - any other name passes: Assay cannot know every provider's naming, so pin what you can.
    """
    name = model.strip()
    if not name:
        return "is blank"
    if moving_alias(name):
        return f"{model!r} is a moving alias ('latest'); name an exact, dated model version"
    if name.lower().split("[")[0] in _CLAUDE_CODE_ALIASES:
        return (
            f"{model!r} is a Claude Code alias that follows the newest model; name an exact, dated "
            "version such as claude-sonnet-4-20250514"
        )
    if _ANTHROPIC.search(name) and not _DATE_STAMP.search(name):
        return (
            f"{model!r} is not pinned: Anthropic names without a date stamp move to new snapshots; "
            "name a dated version such as claude-sonnet-4-20250514"
        )
    if _OPENAI.search(name) and not has_date_stamp(name):
        return (
            f"{model!r} is not pinned: OpenAI names without a date stamp move to new snapshots; "
            "name a dated snapshot such as gpt-4o-2024-08-06 or o3-2025-04-16"
        )
    return None


def moving_alias(model: str) -> bool:
    """Whether `model` names a moving alias by the word `latest` (`gpt-x-latest`, `qwen:latest`)."""
    return bool(_MOVING_WORD.search(model.strip()))


def has_date_stamp(model: str) -> bool:
    """Whether `model` carries a snapshot's date stamp (`YYYYMMDD`, `YYYY-MM-DD`, OpenAI's `-MMDD`)."""
    name = model.strip()
    return bool(_DATE_STAMP.search(name) or _OPENAI_MONTH_DAY.search(name))
