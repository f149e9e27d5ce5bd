"""A stand-in "model" for the quickstart: it does arithmetic, imperfectly, with no network.

It answers in words ("The answer is 42.") so the scorers have something to tell apart, and it
rounds products of big numbers the way a hurried model might.
"""

import re


def solve(question: str) -> str:
    a, op, b = re.match(r"What is (\d+) ([-+*/]) (\d+)\?", question).groups()
    a, b = int(a), int(b)
    if op == "+":
        return str(a + b)
    if op == "-":
        return f"The answer is {a - b}."
    if op == "*":
        product = a * b
        return str(round(product, -1) if product > 1000 else product)
    return str(a // b)
