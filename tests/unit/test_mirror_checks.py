"""The integration tests' record-by-record checks (tests/support/mirror_checks.py) on records made here: an
exact copy passes; an empty source, a missing copy, a duplicated copy, an extra record, a copy naming another
source offset, changed contents or another order each fail; the syncs' audit fails on an empty source."""

from __future__ import annotations

import pytest
from support.kafka_io import Rec
from support.mirror_checks import assert_exact_copy, audit_syncs

from drkit.core.origin import ORIGIN_HEADER


def _source(n: int = 4) -> list[Rec]:
    return [Rec(i % 2, 10 + i // 2, b"k%d" % i, b"v%d" % i, (), 1_000 + i) for i in range(n)]


def _copy(r: Rec, offset: int, origin: int | None = None) -> Rec:
    header = (ORIGIN_HEADER, b"A:%d" % (r.offset if origin is None else origin))
    return Rec(r.partition, offset, r.key, r.value, (*r.headers, header), r.timestamp)


def _target(source: list[Rec]) -> list[Rec]:
    return [_copy(r, r.offset - 10) for r in source]


def test_an_exact_copy_passes() -> None:
    source = _source()
    assert_exact_copy(source, _target(source))


def test_an_empty_source_fails_whatever_the_target() -> None:
    with pytest.raises(AssertionError, match="source is empty"):
        assert_exact_copy([], [])
    with pytest.raises(AssertionError, match="source is empty"):
        assert_exact_copy([], _target(_source()))
    with pytest.raises(AssertionError, match="source is empty"):
        audit_syncs({}, [], [])


def test_a_missing_copy_fails() -> None:
    source = _source()
    with pytest.raises(AssertionError, match="1 source records not on the target"):
        assert_exact_copy(source, _target(source)[1:])


def test_a_duplicated_copy_fails() -> None:
    source = _source()
    target = _target(source)
    with pytest.raises(AssertionError, match="1 target records beyond one copy"):
        assert_exact_copy(source, [*target, _copy(source[0], 99)])


def test_an_extra_record_fails() -> None:
    source = _source()
    stranger = Rec(0, 50, b"x", b"x", ((ORIGIN_HEADER, b"A:77"),), 5)
    with pytest.raises(AssertionError, match="1 target records beyond one copy"):
        assert_exact_copy(source, [*_target(source), stranger])


def test_a_copy_naming_another_source_offset_fails() -> None:
    source = _source()
    target = _target(source)
    target[0] = _copy(source[0], target[0].offset, origin=source[0].offset + 1)
    with pytest.raises(AssertionError, match="1 source records not on the target"):
        assert_exact_copy(source, target)


def test_changed_contents_fail() -> None:
    source = _source()
    target = _target(source)
    r = target[1]
    target[1] = Rec(r.partition, r.offset, r.key, b"changed", r.headers, r.timestamp)
    with pytest.raises(AssertionError, match="1 source records not on the target"):
        assert_exact_copy(source, target)


def test_copies_in_another_order_fail() -> None:
    source = _source()
    target = _target(source)
    target[0], target[2] = target[2], target[0]  # both on partition 0
    with pytest.raises(AssertionError, match="not in the source's order"):
        assert_exact_copy(source, target)
