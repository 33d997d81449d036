"""Regular expressions that mean the same to Python and to Spark's Java regex.

Invariant: a :data:`Pattern` that validates compiles in Python without warnings and is read the same
way by ``java.util.regex``, alone and once drkit joins a flow's patterns into one expression.
"""

from __future__ import annotations

import re
import warnings
from typing import Annotated

from pydantic import AfterValidator

_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
_INLINE_FLAGS = re.compile(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])")


def _regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be used by both Python and Spark's Java regex with one meaning, or None.

    drkit joins a flow's patterns into one anchored expression (:mod:`drkit.core.selection`) that Python
    matches and the Spark Kafka source hands to ``java.util.regex``. Refused: Python-only syntax Java
    rejects, syntax both accept with different meanings, and what stops working once joined
    (whole-pattern flags, numbered backreferences).
    """
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt.isdigit():
                return (
                    f"'\\{nxt}' at position {i} is a backreference or octal escape, read differently by Java "
                    "and Python and renumbered when drkit joins the patterns; use \\x.. for a character"
                )
            if nxt in ("U", "v"):
                return f"'\\{nxt}' at position {i} means something else (or nothing) in Java's regex"
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[":
                return (
                    f"'[' at position {i} inside a character class is a nested class in Java but a plain '[' "
                    "in Python; escape it as \\["
                )
            elif pattern.startswith("&&", i):
                return f"'&&' at position {i} is a class intersection in Java but two '&' in Python; escape them"
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if pattern[i : i + 1] == "^":
                i += 1
            if pattern[i : i + 1] == "]":  # a ']' first in a class is a literal in both
                i += 1
            continue
        if c == "{":
            quantifier = _QUANTIFIER.match(pattern, i)
            if quantifier is None:
                return (
                    f"'{{' at position {i} does not start a repetition {{n}}, {{n,}} or {{n,m}}, which Java "
                    "rejects; escape it as \\{"
                )
            i = quantifier.end()
            continue
        if pattern.startswith("(?", i):
            problem = _group_problem(pattern, i)
            if problem:
                return problem
        i += 1
    return None


def _group_problem(pattern: str, i: int) -> str | None:
    ext = pattern[i + 2 :]
    if ext.startswith("P"):
        return f"'(?P' at position {i} is Python-only syntax (named groups); Java rejects it"
    if ext.startswith("#"):
        return f"'(?#' at position {i} is a Python-only comment; Java rejects it"
    if ext.startswith("("):
        return f"'(?(' at position {i} is a Python-only conditional group; Java rejects it"
    flags = _INLINE_FLAGS.match(pattern, i)
    if flags is None or not (flags[1] or flags[2]):
        return None
    if flags[3] == ")":
        return (
            f"inline flags at position {i} apply to the rest of the expression, and drkit joins patterns "
            "into one expression where Python accepts them only at its start; use the scoped form (?i:...)"
        )
    if set(flags[1] + (flags[2] or "")) - set("ims"):
        return f"inline flags at position {i}: only i, m and s mean the same in Java and Python"
    return None


def _check_pattern(pattern: str) -> str:
    problem = _regex_problem(pattern)
    if problem is None:
        with warnings.catch_warnings():
            # Python warns about syntax whose meaning it plans to change (nested sets, set operations).
            warnings.simplefilter("error")
            try:
                re.compile(pattern)
            except re.error as exc:
                problem = f"not a valid regular expression: {exc.msg} at position {exc.pos}"
            except (FutureWarning, DeprecationWarning) as warning:
                problem = f"ambiguous regular expression: {warning}"
    if problem:
        raise ValueError(problem)
    return pattern


Pattern = Annotated[str, AfterValidator(_check_pattern)]
