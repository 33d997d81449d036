"""The drill's records identify themselves: key, sequence, checksum, and the run they belong to."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.drill.workload import decode, encode, ours


@given(st.from_regex(r"[0-9a-f]{6}-k[0-9]{1,4}", fullmatch=True), st.integers(0, 10**9))
def test_a_record_reads_back_as_itself(key: str, seq: int) -> None:
    assert decode(encode(key, seq)) == (key, seq)


def test_an_altered_or_foreign_record_is_not_taken_for_a_drill_record() -> None:
    value = encode("abc123-k1", 7)
    assert decode(value.replace(b":7:", b":8:")) is None  # the checksum no longer matches
    assert decode(b"hello") is None and decode(None) is None


def test_only_the_runs_own_records_count() -> None:
    assert ours(("abc123-k1", 0), "abc123")
    assert not ours(("def456-k1", 0), "abc123")  # an earlier drill on the same topic
    assert not ours(("abc1234-k1", 0), "abc123")
