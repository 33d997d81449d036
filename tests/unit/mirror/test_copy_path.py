"""The offsets of a batch as Spark's offset log gives them, and the driver's copy limit's default (where a
batch is copied: tests/unit/core/test_copying.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from drkit.config import DRIVER_COPY_MAX_RECORDS, MirrorSettings
from drkit.core.offsets import batch_ranges
from drkit.mirror.offset_log import batch_start_offsets, initial_offsets, logged_offsets


def test_the_default() -> None:
    assert MirrorSettings().driver_copy_max_records == DRIVER_COPY_MAX_RECORDS


def test_a_batch_spans_the_offsets_between_two_logged_batches() -> None:
    assert batch_ranges({"t": {"0": 10, "1": 5}}, {"t": {"0": 15, "1": 5}}) == {("t", 0): (10, 15)}
    assert batch_ranges({"t": {"0": 10}}, {"t": {"0": 15, "1": 3}}) is None  # a new partition: from earliest
    assert batch_ranges({"t": {"0": 10}}, {"t": {"0": 15}, "u": {"0": 1}}) is None  # a new topic
    assert batch_ranges(None, {"t": {"0": 15}}) is None and batch_ranges({"t": {"0": 1}}, None) is None
    # A partition that went back (the topic deleted and created again): Spark plans it, failOnDataLoss.
    assert batch_ranges({"t": {"0": 10, "1": 5}}, {"t": {"0": 12, "1": 2}}) is None
    # A topic no longer selected (or deleted) is in the start only: nothing to read there.
    assert batch_ranges({"t": {"0": 10}, "gone": {"0": 4}}, {"t": {"0": 12}}) == {("t", 0): (10, 12)}


@given(st.dictionaries(st.integers(0, 20).map(str), st.tuples(st.integers(0, 10**9), st.integers(0, 10**6))))
def test_the_ranges_are_each_partitions_advance(parts: dict[str, tuple[int, int]]) -> None:
    start = {"t": {p: s for p, (s, _) in parts.items()}}
    end = {"t": {p: s + n for p, (s, n) in parts.items()}}
    ranges = batch_ranges(start, end)
    assert ranges == {("t", int(p)): (s, s + n) for p, (s, n) in parts.items() if n}


def test_the_offsets_come_from_sparks_offset_log(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    ends = {"orders": {"0": 12, "1": 7}}
    (tmp_path / "offsets" / "4").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps(ends))
    (tmp_path / "offsets" / "5").write_text("v1\n")  # being written, or damaged
    assert logged_offsets(tmp_path, 4) == ends
    assert logged_offsets(tmp_path, 5) is None and logged_offsets(tmp_path, 6) is None
    assert batch_start_offsets(tmp_path, 5) == ends


def test_the_first_batch_starts_at_the_sources_initial_offsets(tmp_path: Path) -> None:
    assert initial_offsets(tmp_path) is None and batch_start_offsets(tmp_path, 0) is None
    (tmp_path / "sources" / "0").mkdir(parents=True)
    start = {"orders": {"0": 0, "1": 3}}
    (tmp_path / "sources" / "0" / "0").write_text("\x00v1\n" + json.dumps(start))  # as Spark writes it
    assert initial_offsets(tmp_path) == start and batch_start_offsets(tmp_path, 0) == start
