"""The checkpoint-age benchmark's pure parts (scripts/bench/checkpoint_age.py): a commit is visible from the
first checkpoint at or past its offset (a later commit's covers it), never counted twice, and a commit no
checkpoint covered is reported apart; MirrorMaker 2's checkpoint records decoded from Kafka's Struct encoding."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts.bench.checkpoint_age import Visibility, decode_mm2_checkpoint  # noqa: E402


def test_a_checkpoint_covers_every_commit_at_or_below_it_once() -> None:
    v = Visibility()
    for offset, at in ((1, 10.0), (2, 11.0), (3, 12.0)):
        v.committed(("g", 0), offset, at)
    v.observed(("g", 0), 0, 10.5)  # older than every commit: covers none
    v.observed(("g", 0), 2, 12.5)  # covers 1 (2.5 s) and 2 (1.5 s)
    v.observed(("g", 0), 2, 13.0)  # the same checkpoint again: nothing new
    v.observed(("g", 1), 9, 13.0)  # a partition nothing was committed to
    assert sorted(v.latencies) == [1.5, 2.5] and v.uncovered() == 1
    s = v.summary()
    assert (s["commits_covered"], s["commits_never_covered"], s["visibility_ms_max"]) == (2, 1, 2500.0)
    v.observed(("g", 0), 7, 12.2)
    assert v.uncovered() == 0 and round(v.latencies[-1], 3) == 0.2
    v.committed(("g", 0), 8, 14.0)  # its acknowledgement came back after a checkpoint past it was read
    v.observed(("g", 0), 9, 13.5)
    assert v.latencies[-1] == 0.0


def test_a_failover_at_a_moment_re_reads_the_commits_acknowledged_and_not_covered_by_then() -> None:
    v = Visibility()
    for offset, at in ((1, 10.0), (2, 11.0), (3, 12.0)):
        v.committed(("g", 0), offset, at)
    v.committed(("g", 1), 1, 10.5)
    v.committed(("h", 0), 1, 10.0)
    v.observed(("g", 0), 2, 12.5)  # covers g/0's 1 and 2 at 12.5
    v.observed(("h", 0), 1, 10.2)
    assert v.rereads(9.0) == {"g": 0, "h": 0}  # nothing acknowledged yet
    assert v.rereads(11.0) == {"g": 3, "h": 0}  # g/0's 1 and 2, g/1's 1; h's covered at 10.2
    assert v.rereads(12.5) == {"g": 2, "h": 0}  # g/0's 3 and g/1's 1 still unknown
    v.committed(("h", 0), 2, 14.0)
    v.observed(("h", 0), 5, 13.5)  # read before the acknowledgement came back: covered from the acknowledgement
    assert v.rereads(13.9) == {"g": 2, "h": 0} and v.rereads(14.0)["h"] == 0
    assert Visibility().reread_distribution() == {"failover_moments": 0}
    spread = v.reread_distribution(instants=5)  # at 10, 11, 12, 13, 14: g 1, 3, 4, 2, 2 and h 1, 0, 0, 0, 0
    assert spread["failover_moments"] == 5 and spread["reread_records_per_group_max"] == 4


def test_with_records_flowing_a_re_read_counts_the_records_between_covered_and_acknowledged_commits() -> None:
    v = Visibility(base={("g", 0): 100})  # the group had committed 100 before the phase
    v.committed(("g", 0), 400, 10.0)  # each commit puts the group at its partition's end: hundreds further
    v.committed(("g", 0), 800, 14.0)
    assert v.rereads(9.0) == {"g": 0}
    assert v.rereads(10.0) == {"g": 300}  # from 100 (nothing covered yet) to 400
    v.observed(("g", 0), 400, 11.0)
    assert v.rereads(11.0) == {"g": 0} and v.rereads(14.0) == {"g": 400}  # from the covered 400 to 800


def mm2_record(group: str, topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    def string(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    key = string(group) + string(topic) + struct.pack(">i", partition)
    value = struct.pack(">hqq", 0, upstream, downstream) + string("")
    return key, value


def test_mm2_checkpoints_are_decoded_and_anything_else_is_none() -> None:
    # As MirrorMaker 2 4.x writes them (one record read from its checkpoints topic): the key names the copy.
    key = b"\x00\x0cbench-g00000\x00\x08A.orders\x00\x00\x00\x00"
    value = b"\x00\x00" + b"\x00" * 7 + b"K" + b"\x00" * 7 + b"\x01\x00\x00"
    assert decode_mm2_checkpoint(key, value) == ("bench-g00000", "A.orders", 0, 75)
    assert decode_mm2_checkpoint(*mm2_record("bench-g00001", "orders", 3, 1234, 1200)) == (
        "bench-g00001",
        "orders",
        3,
        1234,
    )
    assert decode_mm2_checkpoint(b"\x00", b"") is None
