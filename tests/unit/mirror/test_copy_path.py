"""Which batches the driver copies itself: small ones of known size; never one whose size is unknown."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from drkit.config import MirrorSettings
from drkit.core.offsets import copy_in_driver, offsets_between
from drkit.mirror.job import logged_offsets

MB = 1024 * 1024


def test_a_small_batch_of_known_size_is_copied_by_the_driver() -> None:
    assert copy_in_driver(2_000, 1_000.0, 20_000, 64 * MB)
    assert copy_in_driver(20_000, 1_000.0, 20_000, 64 * MB)


def test_a_batch_too_many_records_or_bytes_goes_to_tasks() -> None:
    assert not copy_in_driver(20_001, 1_000.0, 20_000, 64 * MB)
    assert not copy_in_driver(1_000, 100_000.0, 20_000, 64 * MB)  # 100 MB of 100 KB records


def test_unknown_size_or_record_size_or_a_zero_limit_goes_to_tasks() -> None:
    assert not copy_in_driver(None, 1_000.0, 20_000, 64 * MB)
    assert not copy_in_driver(10, None, 20_000, 64 * MB)  # no batch of this run copied yet
    assert not copy_in_driver(10, 1_000.0, 0, 64 * MB)


def test_the_defaults() -> None:
    m = MirrorSettings()
    assert (m.driver_copy_max_records, m.driver_copy_max_bytes) == (20_000, 64 * MB)


def test_a_batch_spans_the_offsets_between_two_logged_batches() -> None:
    assert offsets_between({"t": {"0": 10, "1": 5}}, {"t": {"0": 15, "1": 5}}) == 5
    assert offsets_between({"t": {"0": 10}}, {"t": {"0": 15, "1": 3}}) is None  # a new partition: from earliest
    assert offsets_between({"t": {"0": 10}}, {"t": {"0": 15}, "u": {"0": 1}}) is None  # a new topic


@given(st.dictionaries(st.integers(0, 20).map(str), st.tuples(st.integers(0, 10**9), st.integers(0, 10**6))))
def test_the_span_is_the_sum_of_each_partitions_advance(parts: dict[str, tuple[int, int]]) -> None:
    start = {"t": {p: s for p, (s, _) in parts.items()}}
    end = {"t": {p: s + n for p, (s, n) in parts.items()}}
    assert offsets_between(start, end) == sum(n for _, n in parts.values())


def test_the_offsets_come_from_sparks_offset_log(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    ends = {"orders": {"0": 12, "1": 7}}
    (tmp_path / "offsets" / "4").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps(ends))
    (tmp_path / "offsets" / "5").write_text("v1\n")  # being written, or damaged
    assert logged_offsets(tmp_path, 4) == ends
    assert logged_offsets(tmp_path, 5) is None and logged_offsets(tmp_path, 6) is None
