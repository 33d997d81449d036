"""Loss-safe reads: the source changes between the moment Spark plans a batch and the moment the driver
reads it. The window is hit deterministically (real brokers, real Spark query and Delta syncs): a wrapper of
the driver's reader changes the source before the real read runs, or a wrapper of the batch plan moves the
planned end past what the source holds (as a source truncated by an unclean leader election would)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from support.kafka_io import create_topic, delete_records, produce, read_all, unique
from support.mirror_checks import committed_batches, partition_syncs

from drkit.config import DrkitConfig
from drkit.core.batch import BatchPlan, plan_batch
from drkit.errors import MirrorError
from drkit.mirror.offset_log import logged_offsets as real_logged
from drkit.mirror.reader import BatchReader
from drkit.service import Drkit


def deleting(bootstrap: str, topic: str, before: int) -> Callable[[dict[Any, Any]], dict[Any, Any]]:
    """A change of the source that leaves the planned ranges as they are: delete-records up to ``before``."""

    def change(ranges: dict[Any, Any]) -> dict[Any, Any]:
        delete_records(bootstrap, topic, before)
        return ranges

    return change


def before_the_read(monkeypatch: pytest.MonkeyPatch, change: Callable[[dict[Any, Any]], dict[Any, Any]]) -> None:
    """Run ``change`` on the planned ranges of the next driver read (after Spark planned the batch, before
    the reader's consumer is assigned); it returns the ranges the reader is handed."""
    real = BatchReader.read
    done: list[bool] = []

    def read(self: BatchReader, ranges: Any, sink: Any, stopping: Any = None) -> Any:
        if not done:
            done.append(True)
            ranges = change(dict(ranges))
        return real(self, ranges, sink, stopping)

    monkeypatch.setattr(BatchReader, "read", read)


def test_a_partition_ending_before_the_planned_end_is_never_committed(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark planned [0, 150) of a partition that now ends at 100: the batch fails in one line naming the
    topic, the partition, the planned end and the actual end; no commit, no sync."""
    topic = unique("short")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": b"v%d" % i} for i in range(100)])
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    real_plan = plan_batch

    def planned_past_the_end(*args: Any, **kwargs: Any) -> BatchPlan:
        plan = real_plan(*args, **kwargs)
        return replace(plan, ranges={k: (s, u + 50) for k, (s, u) in plan.ranges.items()})

    monkeypatch.setattr("drkit.mirror.job.plan_batch", planned_past_the_end)
    with pytest.raises(MirrorError) as raised:
        Drkit(config, spark).mirror(None, once=True)
    message = str(raised.value)
    assert "\n" not in message, message
    assert f"{topic}/0 ends at offset 100, before offset 150 that Spark planned" in message, message
    assert "not committed" in message and "A->B" in message, message
    assert committed_batches(config) == [], "Spark committed a batch the source no longer held"
    assert partition_syncs(spark, config, topic) == {}, "a short batch left offset-syncs"


def test_a_partition_copy_tasks_read_short_of_the_planned_end_is_never_committed(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through the copy tasks on the executors (their reader ends the range where the partition
    ends): the offset log as drkit reads it plans [0, 150), the source ends at 100; no commit, no sync."""
    topic = unique("short-tasks")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": b"v%d" % i} for i in range(100)])
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}}
    config = make_config([{**flow, "mirror": {"driver_copy_max_records": 0}}])

    def planned_past_the_end(checkpoint: Any, batch_id: int) -> Any:
        logged = real_logged(checkpoint, batch_id)
        return {t: {p: end + 50 for p, end in parts.items()} for t, parts in logged.items()} if logged else logged

    monkeypatch.setattr("drkit.mirror.job.logged_offsets", planned_past_the_end)
    with pytest.raises(MirrorError) as raised:
        Drkit(config, spark).mirror(None, once=True)
    message = str(raised.value)
    assert "\n" not in message, message
    assert f"{topic}/0 ends at offset 100, before offset 150 that Spark planned" in message, message
    assert committed_batches(config) == [] and partition_syncs(spark, config, topic) == {}


def test_records_deleted_between_planning_and_reading_stop_the_mirror_before_the_commit(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """delete-records moves the source's start into the planned range [0, 100) after Spark planned it:
    with fail_on_data_loss (the default) the batch fails in one line, uncommitted, without syncs."""
    topic = unique("truncated")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": b"v%d" % i} for i in range(100)])
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])

    before_the_read(monkeypatch, deleting(clusters["A"], topic, 60))
    with pytest.raises(MirrorError) as raised:
        Drkit(config, spark).mirror(None, once=True)
    message = str(raised.value)
    assert "\n" not in message and "removed from the source before they were mirrored" in message, message
    assert f"{topic}/0" in message, message
    assert committed_batches(config) == [] and partition_syncs(spark, config, topic) == {}


def test_a_start_that_moved_up_to_the_range_or_into_it_is_a_gap_not_a_failure(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention removing records already mirrored (the start moves up to the planned range's start) loses
    nothing: the batch is read whole. With fail_on_data_loss = false, records removed inside the range are
    skipped (Spark's own failOnDataLoss rule) and the syncs describe exactly the records that survived, each once."""
    topic = unique("retained")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": b"a%d" % i} for i in range(100)])
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}}
    config = make_config([{**flow, "mirror": {"fail_on_data_loss": False}}])
    [first] = Drkit(config, spark).mirror(None, once=True)
    assert first.records == 100

    produce(clusters["A"], topic, [{"value": b"b%d" % i} for i in range(100)])
    before_the_read(monkeypatch, deleting(clusters["A"], topic, 100))
    [second] = Drkit(config, spark).mirror(None, once=True)
    assert second.records == 100, "the start moved to the range's start: the range is read whole"

    produce(clusters["A"], topic, [{"value": b"c%d" % i} for i in range(100)])
    monkeypatch.undo()
    before_the_read(monkeypatch, deleting(clusters["A"], topic, 250))
    Drkit(config, spark).mirror(None, once=True)

    source, target = read_all(clusters["A"], topic, start={0: 250}), read_all(clusters["B"], f"A.{topic}")
    assert [r.offset for r in source] == list(range(250, 300))
    # Every record that was on the source when its batch ran is on the target once: 100 + 100 + 50.
    assert len(target) == len({r.content() for r in target}) == 250
    survivors = [r for r in target if r.value is not None and r.value.startswith(b"c")]
    assert [r.value for r in survivors] == [b"c%d" % i for i in range(50, 100)]
    # The syncs: one pair per copied record, each naming the copy of it; offsets 200..249 are a gap.
    by_offset = {r.offset: r for r in target}
    pairs = [pair for rng in partition_syncs(spark, config, topic).get(0, []) for pair in rng.pairs()]
    assert sorted(u for u, _ in pairs) == [*range(200), *range(250, 300)]
    assert all(by_offset[d].origin("A") == u for u, d in pairs)
