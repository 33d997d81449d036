"""A new lease epoch's Spark checkpoint: a copy of the newest earlier epoch's, as Spark restarts from it."""

from __future__ import annotations

from pathlib import Path

from drkit.layout import JobKind, StateLayout
from drkit.mirror import offset_log

FLOW = "A->B"


def checkpoint(layout: StateLayout, epoch: int, batches: int) -> Path:
    root = Path(layout.stream_checkpoint(FLOW, epoch))
    (root / "sources" / "0").mkdir(parents=True)
    (root / "offsets").mkdir()
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id": "stream-1"}')
    (root / "sources" / "0" / "0").write_text("v1\n{}")
    for b in range(batches):
        (root / "offsets" / str(b)).write_text(f"offsets of {b}")
        if b < batches - 1:  # the newest batch was planned, not committed
            (root / "commits" / str(b)).write_text(f"commit of {b}")
    (root / "offsets" / f".{batches}.tmp").write_text("being written")
    (root / "offsets" / ".0.crc").write_text("checksum")
    return root


def names(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_the_new_epoch_starts_from_the_newest_earlier_checkpoint_with_its_newest_batches(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    checkpoint(layout, 0, 3)  # the folder of versions before the lease
    checkpoint(layout, 2, 10)
    made = offset_log.adopt(layout, FLOW, 5)
    assert made == layout.stream_checkpoint(FLOW, 5)
    assert names(Path(made)) == [
        "commits/6",
        "commits/7",
        "commits/8",
        "metadata",
        "offsets/7",
        "offsets/8",
        "offsets/9",
        "sources/0/0",
    ]
    assert offset_log.stream_id(made) == "stream-1"


def test_an_epoch_whose_checkpoint_exists_keeps_it_and_a_first_epoch_starts_from_the_legacy_folder(
    tmp_path: Path,
) -> None:
    layout = StateLayout(tmp_path)
    checkpoint(layout, 0, 2)
    first = offset_log.adopt(layout, FLOW, 1)
    assert names(Path(first)) == ["commits/0", "metadata", "offsets/0", "offsets/1", "sources/0/0"]
    (Path(first) / "offsets" / "2").write_text("written by epoch 1")
    assert offset_log.adopt(layout, FLOW, 1) == first and (Path(first) / "offsets" / "2").exists()
    assert not Path(offset_log.adopt(layout, "C->D", 1)).exists()  # nothing earlier: Spark starts anew
    assert sorted(p.name for p in Path(layout.flow_dir(JobKind.MIRROR, FLOW)).iterdir()) == [
        "checkpoint",
        "checkpoint-1",
    ]


def test_the_checkpoints_older_than_the_one_the_new_epoch_went_on_from_are_deleted(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    for epoch in (0, 2, 4):
        checkpoint(layout, epoch, 3)
    offset_log.adopt(layout, FLOW, 5)
    assert offset_log.retire(layout, FLOW, 5) == [0, 2]
    left = sorted(p.name for p in Path(layout.flow_dir(JobKind.MIRROR, FLOW)).iterdir())
    assert left == ["checkpoint-4", "checkpoint-5"]  # its own, and the one it went on from
    assert offset_log.retire(layout, FLOW, 5) == []


def test_a_replay_whose_syncs_are_durable_is_committed_before_the_query_starts(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    root = checkpoint(layout, 2, 10)  # batch 9 planned, never committed: Spark would replay it
    asked: list[tuple[str, int]] = []

    def recorded(stream: str, batch: int) -> bool:
        asked.append((stream, batch))
        return True

    assert offset_log.settle_replay(FLOW, layout.stream_checkpoint(FLOW, 2), recorded) == 9
    assert asked == [("stream-1", 9)]
    assert (root / "commits" / "9").read_text() == (root / "commits" / "8").read_text() == "commit of 8"
    assert offset_log.settle_replay(FLOW, layout.stream_checkpoint(FLOW, 2), recorded) is None  # nothing left


def test_a_replay_whose_syncs_are_not_durable_is_left_to_spark(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    root = checkpoint(layout, 2, 10)
    assert offset_log.settle_replay(FLOW, layout.stream_checkpoint(FLOW, 2), lambda stream, batch: False) is None
    assert not (root / "commits" / "9").exists()  # Spark replays it: its records are copied again
