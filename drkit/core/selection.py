"""Which topics and groups a flow selects, as one full-match regular expression.

The same expression string is used by Python (``re.fullmatch``) and by the Spark Kafka source's
``subscribePattern`` (Java regex, searched, hence the explicit anchors), so both sides always
agree on the selection. The
syntax used (alternation, non-capturing groups, negative lookahead) means the same in both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from drkit.core.policy import INTERNAL_TOPIC_PATTERNS, ReplicationPolicy

#: Consumer groups never translated: drkit's own (``drkit.ckpt.``: the shadow groups drkit kept live checkpoints
#: in before the checkpoint topic, which a target may still hold) and Connect/MM2 internals.
INTERNAL_GROUP_PATTERNS: tuple[str, ...] = (
    r"_drkit.*",
    r"drkit-.*",
    r"drkit\.ckpt\..*",
    r"connect-.*",
    r"__.*",
)


def _alternation(patterns: Iterable[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


@dataclass(frozen=True)
class NameSelector:
    """include - exclude, as one anchored regex."""

    include: tuple[str, ...]
    exclude: tuple[str, ...]

    @property
    def pattern(self) -> str:
        # Anchored on both ends: Python full-matches, but Spark's Kafka source searches (find), so
        # an unanchored lookahead would let "A.orders" through at position 1.
        include = _alternation(self.include) if self.include else "(?!)"
        if not self.exclude:
            return f"^(?:{include})$"
        return f"^(?!(?:{_alternation(self.exclude)})$)(?:{include})$"

    def matches(self, name: str) -> bool:
        return re.fullmatch(self.pattern, name) is not None

    def select(self, names: Iterable[str]) -> list[str]:
        compiled = re.compile(self.pattern)
        return sorted(n for n in names if compiled.fullmatch(n))


def topic_selector(
    include: Iterable[str],
    exclude: Iterable[str],
    policy: ReplicationPolicy,
    target_alias: str,
    known_aliases: frozenset[str],
) -> NameSelector:
    """Topics a flow mirrors: the configured ones, never internal ones, never copies of the target's."""
    excluded = (*exclude, *INTERNAL_TOPIC_PATTERNS, *policy.cycle_exclusions(target_alias, known_aliases))
    return NameSelector(tuple(include), tuple(excluded))


def group_selector(include: Iterable[str], exclude: Iterable[str]) -> NameSelector:
    return NameSelector(tuple(include), (*exclude, *INTERNAL_GROUP_PATTERNS))
