"""A stand-in for a code model: the body of each function, as a HumanEval completion is (the
prompt's signature and docstring come before it). Mini/4's answer is wrong on purpose — it
returns the second entry of the sorted list, duplicates and all — so the run shows a failure."""

COMPLETIONS = {
    "Mini/0": (
        "    result, best = [], None\n"
        "    for n in numbers:\n"
        "        best = n if best is None or n > best else best\n"
        "        result.append(best)\n"
        "    return result\n"
    ),
    "Mini/1": "    return word.lower() == word.lower()[::-1]\n",
    "Mini/2": "    return sum(1 for c in text.lower() if c in 'aeiou')\n",
    "Mini/3": "    return [items[i : i + size] for i in range(0, len(items), size)]\n",
    "Mini/4": "    ordered = sorted(numbers, reverse=True)\n    return ordered[1] if len(ordered) > 1 else None\n",
}


def complete(prompt: str, fields: dict) -> str:
    return COMPLETIONS[fields["task_id"]]
