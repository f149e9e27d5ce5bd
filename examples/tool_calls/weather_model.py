"""A stand-in for a model with tools: it answers with calls, `[{name, arguments}]`, or in words."""

from __future__ import annotations

from typing import Any

_ZONES = {"Tokyo": "asia/tokyo", "Rome": "Europe/Rome"}


def call(question: str) -> Any:
    city = question.rstrip("?").split(" in ")[-1].split()[0]
    calls: list[dict[str, Any]] = []
    if "weather" in question.lower():
        calls.append({"name": "get_weather", "arguments": {"city": city}})  # never says fahrenheit
    if "time" in question.lower():
        calls.append({"name": "get_time", "arguments": {"timezone": _ZONES.get(city, city)}})
    return calls or "Soft rain on the roof / ..."


def asks_both(output: Any, input: str, annotations: dict[str, Any]) -> bool:
    """The trajectory scorer is only for questions that need both tools."""
    return "weather" in input.lower() and "time" in input.lower()
