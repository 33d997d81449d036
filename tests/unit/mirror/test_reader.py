"""BatchReader: what the driver hands the copy from its own consumer, with a scripted fake consumer
(no broker). The real reader against real brokers is covered by tests/integration/mirror."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from support.fakes import FakeConsumerError as FakeError
from support.fakes import FakeRecord as Msg

from drkit.core.batch import MirrorState
from drkit.mirror.chunk import RecordChunk
from drkit.mirror.reader import (
    ABANDONED_MARKER,
    CHUNK,
    CHUNK_BYTES,
    POLL_SECONDS,
    BatchAbandoned,
    BatchReader,
    ReadFailed,
    RecordsRemoved,
    SourceStalled,
)


def eof(topic: str, partition: int, offset: int) -> Msg:
    return Msg(topic, partition, offset, FakeError(KafkaError._PARTITION_EOF))


class FakeConsumer:
    def __init__(self, polls: Iterable[list[Msg]]) -> None:
        self.polls = list(polls)
        self.assigned: list[tuple[str, int, int]] = []
        self.unassigned = 0
        self.asked: list[int] = []
        self.waits: list[float] = []
        self.events: list[str] = []  # metadata requests and assignments, in order
        self.metadata_fails = False

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.events.append(f"metadata {topic or '*'}")
        if self.metadata_fails:
            raise RuntimeError("no answer")

    def assign(self, tps: list[Any]) -> None:
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]
        self.events.append("assign " + ",".join(sorted({tp.topic for tp in tps})))

    def consume(self, num_messages: int, timeout: float) -> list[Msg]:
        self.asked.append(num_messages)
        self.waits.append(timeout)
        return self.polls.pop(0) if self.polls else []

    def unassign(self) -> None:
        self.unassigned += 1

    def close(self) -> None:
        pass


class Sink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, list[int], list[Any] | None]] = []

    def __call__(self, chunk: RecordChunk) -> None:
        topic, partition, offsets, keys = chunk.topic, chunk.partition, chunk.offsets, chunk.keys
        values, stamps, headers = chunk.values, chunk.stamps, chunk.headers
        assert keys == [b"k%d" % o for o in offsets] and values == [b"v%d" % o for o in offsets]
        assert stamps == [1000 + o for o in offsets]
        self.calls.append((topic, partition, offsets, headers))

    def offsets(self) -> dict[tuple[str, int], list[int]]:
        out: dict[tuple[str, int], list[int]] = {}
        for topic, partition, offsets, _ in self.calls:
            out.setdefault((topic, partition), []).extend(offsets)
        return out


def driver_copy(job: Any, state: MirrorState) -> Any:
    """The job's copy of t/0 [0, 5) in the driver (drkit.mirror.copy_driver), as a small batch is copied."""
    from drkit.mirror.copy_path import CopyRequest
    from drkit.mirror.report import BatchReport

    request = CopyRequest(0, {("t", 0): (0, 5)}, 5, {"bootstrap.servers": "b:1"}, {"t": "A.t"})
    return job.path.driver.copy(request, state, BatchReport(0))


def reader(consumer: FakeConsumer, stall: float = 5.0) -> BatchReader:
    return BatchReader(lambda: consumer, stall)


def test_each_partition_is_read_from_its_start_to_just_before_its_end() -> None:
    consumer = FakeConsumer(
        [
            [Msg("t", 0, 10), Msg("t", 1, 0), Msg("t", 0, 11)],
            [Msg("t", 1, 1), Msg("t", 0, 12), Msg("t", 0, 13)],  # 13 is the next batch's
            [Msg("t", 1, 2)],
        ]
    )
    sink = Sink()
    read = reader(consumer).read({("t", 0): (10, 13), ("t", 1): (0, 3)}, sink).records
    assert consumer.assigned == [("t", 0, 10), ("t", 1, 0)]
    assert sink.offsets() == {("t", 0): [10, 11, 12], ("t", 1): [0, 1, 2]} and read == 6
    assert consumer.unassigned == 1  # no prefetching between batches
    assert consumer.polls == []


def test_a_range_ending_in_a_hole_or_marker_ends_at_the_end_of_the_partition() -> None:
    """Offsets 3 and 4 are a transaction marker and an aborted record: no record at until - 1 ever comes."""
    consumer = FakeConsumer([[Msg("t", 0, 0), Msg("t", 0, 2)], [eof("t", 0, 5)], [Msg("t", 0, 99)]])
    sink = Sink()
    assert reader(consumer).read({("t", 0): (0, 5)}, sink).records == 2
    assert sink.offsets() == {("t", 0): [0, 2]}
    assert len(consumer.polls) == 1  # stopped at the end of the partition


def test_a_record_past_the_end_closes_a_range_whose_last_offsets_were_compacted_away() -> None:
    consumer = FakeConsumer([[Msg("t", 0, 0), Msg("t", 0, 7)]])
    sink = Sink()
    assert reader(consumer).read({("t", 0): (0, 5)}, sink).records == 1
    assert sink.offsets() == {("t", 0): [0]}


def test_headers_are_handed_on_and_none_when_no_record_has_any() -> None:
    consumer = FakeConsumer([[Msg("t", 0, 0, headers=[("a", b"1")]), Msg("t", 0, 1), Msg("u", 0, 0)]])
    sink = Sink()
    reader(consumer).read({("t", 0): (0, 2), ("u", 0): (0, 1)}, sink)
    assert {(t, p): h for t, p, _, h in sink.calls} == {("t", 0): [[("a", b"1")], None], ("u", 0): None}


def test_transient_errors_are_waited_out() -> None:
    transport, retriable = FakeError(KafkaError._TRANSPORT), FakeError(1234, retriable=True)
    consumer = FakeConsumer([[Msg("t", 0, 0, transport)], [Msg("t", 0, 0, retriable)], [Msg("t", 0, 0)]])
    assert reader(consumer).read({("t", 0): (0, 1)}, Sink()).records == 1


@pytest.mark.parametrize(
    "error",
    [
        FakeError(KafkaError._AUTO_OFFSET_RESET),  # records deleted before they were read
        FakeError(KafkaError.UNKNOWN_TOPIC_OR_PART),
        FakeError(KafkaError._FATAL, retriable=True, fatal=True),
    ],
)
def test_what_the_reader_cannot_settle_fails_the_read(error: FakeError) -> None:
    consumer = FakeConsumer([[Msg("t", 0, 3, error)]])
    with pytest.raises(ReadFailed, match=r"t/0: ") as raised:
        reader(consumer).read({("t", 0): (0, 5)}, Sink())
    assert consumer.unassigned == 1
    # Records removed before they were read are told apart: drkit decides about lost records.
    assert isinstance(raised.value, RecordsRemoved) == (error.code() == KafkaError._AUTO_OFFSET_RESET)


def test_a_source_that_sends_nothing_stalls_the_read() -> None:
    consumer = FakeConsumer([[Msg("t", 0, 0)]])
    sink = Sink()
    with pytest.raises(SourceStalled, match=r"no record of 1 partition\(s\) arrived within"):
        reader(consumer, stall=0.3).read({("t", 0): (0, 5)}, sink)
    assert sink.offsets() == {("t", 0): [0]}


def test_a_stopping_mirror_abandons_the_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from drkit.mirror import reader as module

    monkeypatch.setattr(module, "STOP_CHECK_SECONDS", 0.0)
    asked: list[bool] = []

    def stopping() -> bool:
        asked.append(len(asked) >= 2)  # the third question says yes
        return asked[-1]

    consumer = FakeConsumer([[Msg("t", 0, 0)], [Msg("t", 0, 1)], [Msg("t", 0, 2)], [Msg("t", 0, 3)]])
    sink = Sink()
    with pytest.raises(BatchAbandoned, match=ABANDONED_MARKER):
        reader(consumer).read({("t", 0): (0, 5)}, sink, stopping)
    assert sink.offsets() == {("t", 0): [0, 1]} and consumer.unassigned == 1


def test_nothing_to_read_needs_no_consumer() -> None:
    def no_consumer() -> Any:
        raise AssertionError("no consumer for an empty batch")

    assert BatchReader(no_consumer, 1.0).read({}, Sink()).records == 0


def test_large_records_are_taken_a_few_at_a_time() -> None:
    """A chunk holds about CHUNK_BYTES: 100 KB records are not taken 5,000 (500 MB) at a time."""

    class Big(Msg):
        def value(self) -> bytes:
            return b"x" * 100_000

    consumer = FakeConsumer([[Big("t", 0, 0), Big("t", 0, 1)], [Big("t", 0, 2)]])
    reader(consumer).read({("t", 0): (0, 3)}, lambda *args: None)
    assert consumer.asked[0] == CHUNK and consumer.asked[1] == CHUNK_BYTES // 100_000 < CHUNK


def test_the_drivers_reader_reads_at_the_isolation_level_of_sparks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were Spark to read uncommitted records, it would plan past the last stable offset, and a
    read_committed reader would stop there: the two readers use the one declared level."""
    from drkit.config import parse_config
    from drkit.kafka import clients
    from drkit.mirror.context import SOURCE_ISOLATION, KafkaMirrorClusters

    config = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
            "flows": [{"source": "A", "target": "B"}],
            "state": {"root": "st"},
        }
    )
    built: list[dict[str, Any]] = []
    monkeypatch.setattr(clients, "consumer", lambda cluster, alias, group, **conf: built.append(conf))
    KafkaMirrorClusters(config).source_consumer(config.flows[0])
    assert built[0]["isolation.level"] == SOURCE_ISOLATION
    assert built[0]["auto.offset.reset"] == "error" and built[0]["enable.partition.eof"] is True


def test_a_source_that_stalls_the_drivers_read_is_a_cluster_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The batch fails as a cluster error (exit 4) that names the source and says what to do; the copy's
    producer is dropped, so a retry starts with a fresh one."""
    import confluent_kafka
    from support.fakes import held_job, mirror_context

    from drkit.config import parse_config
    from drkit.errors import ClusterError
    from drkit.mirror import producers

    config = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
            "flows": [{"source": "A", "target": "B", "mirror": {"consumer": {"default.api.timeout.ms": "200"}}}],
            "state": {"root": str(tmp_path / "st")},
        }
    )

    class Producer:
        def __init__(self, conf: dict[str, Any]) -> None:
            pass

        def flush(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(producers, "_PRODUCERS", {})
    monkeypatch.setattr(confluent_kafka, "Producer", Producer)
    job = held_job(mirror_context(config, FakeConsumer([])), config.flows[0], once=True)
    assert job.reader.stall_seconds == 0.2
    with pytest.raises(ClusterError) as raised:
        driver_copy(job, MirrorState("s", 0))
    message = str(raised.value)
    assert message.startswith("source cluster A (a:1) cannot be read: no record of 1 partition(s) arrived"), message
    assert "drkit failover --flow 'A->B'" in message
    assert producers._PRODUCERS == {}


def test_the_read_reports_where_each_partition_ended() -> None:
    """A marker at the range's end (EOF at 5), a record past the end (7), and an end of partition below the
    planned end (3 < 5: the source lost records after Spark planned them) are told apart by position."""
    consumer = FakeConsumer(
        [
            [Msg("t", 0, 0), Msg("t", 0, 2), Msg("u", 0, 0), Msg("v", 0, 0)],
            [eof("t", 0, 5), Msg("u", 0, 7), Msg("v", 0, 2), eof("v", 0, 3)],
        ]
    )
    result = reader(consumer).read({("t", 0): (0, 5), ("u", 0): (0, 5), ("v", 0): (0, 5)}, Sink())
    assert result.records == 5
    assert dict(result.reached) == {("t", 0): 5, ("u", 0): 8, ("v", 0): 3}


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_partition_ending_before_the_planned_end_is_never_committed_as_copied(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail_on_data_loss: bool
) -> None:
    """Spark planned t/0 up to 5; the source now ends at 3. The batch fails in one line naming the partition,
    the planned end and the actual end, or (the loss accepted) the partition is held from 3, so the next
    batch copies from there whatever Spark's next start."""
    import confluent_kafka
    from support.fakes import held_job, mirror_context

    from drkit.config import parse_config
    from drkit.errors import MirrorError
    from drkit.mirror import producers

    config = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
            "flows": [{"source": "A", "target": "B", "mirror": {"fail_on_data_loss": fail_on_data_loss}}],
            "state": {"root": str(tmp_path / "st")},
        }
    )

    class Producer:
        def __init__(self, conf: dict[str, Any]) -> None:
            pass

        def flush(self, timeout: float) -> int:
            return 0

        def poll(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(producers, "_PRODUCERS", {})
    monkeypatch.setattr(confluent_kafka, "Producer", Producer)
    job = held_job(mirror_context(config, FakeConsumer([[eof("t", 0, 3)]])), config.flows[0], once=True)
    before = MirrorState("s", 0, {}, {("u", 0): 1})
    copy = lambda: driver_copy(job, before)  # noqa: E731
    if fail_on_data_loss:
        with pytest.raises(MirrorError) as raised:
            copy()
        message = str(raised.value)
        assert "\n" not in message and "t/0 ends at offset 3, before offset 5" in message, message
        assert "not committed" in message and "fail_on_data_loss = false" in message
    else:
        _, after = copy()
        assert after.held == {("u", 0): 1, ("t", 0): 3}


class SeekingConsumer(FakeConsumer):
    """A fake whose partition's first record is ``low`` (records below it were removed); a seek is recorded."""

    def __init__(self, polls: Iterable[list[Msg]], low: int) -> None:
        super().__init__(polls)
        self.low = low
        self.assignments: list[list[tuple[str, int, int]]] = []

    def get_watermark_offsets(self, tp: Any, timeout: float = -1) -> tuple[int, int]:
        return self.low, 100

    def assign(self, tps: list[Any]) -> None:
        super().assign(tps)
        self.assignments.append(self.assigned)


def test_removed_records_are_skipped_from_the_first_record_left_when_the_loss_is_accepted() -> None:
    removed = FakeError(KafkaError._AUTO_OFFSET_RESET)
    consumer = SeekingConsumer(
        [
            [Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 1, 0)],
            [Msg("t", 0, 2, removed)],  # 2..5 removed after the read began
            [Msg("t", 0, 1), Msg("t", 0, 6), Msg("t", 0, 7), Msg("t", 1, 1)],  # 1 fetched again: not handed on twice
        ],
        low=6,
    )
    sink = Sink()
    result = BatchReader(lambda: consumer, 5.0, skip_removed=True).read({("t", 0): (0, 8), ("t", 1): (0, 2)}, sink)
    assert sink.offsets() == {("t", 0): [0, 1, 6, 7], ("t", 1): [0, 1]}
    # Assigned again after the error, each partition where its read stands (t/1 read up to 0: from 1).
    assert consumer.assignments == [[("t", 0, 0), ("t", 1, 0)], [("t", 0, 6), ("t", 1, 1)]]
    assert dict(result.removed) == {("t", 0): (2, 6)}
    assert result.reached[("t", 0)] == 8 and result.records == 6


def test_a_range_removed_whole_ends_its_read_without_a_shortfall() -> None:
    consumer = SeekingConsumer([[Msg("t", 0, 3, FakeError(KafkaError._AUTO_OFFSET_RESET))]], low=20)
    sink = Sink()
    result = BatchReader(lambda: consumer, 5.0, skip_removed=True).read({("t", 0): (3, 10)}, sink)
    assert sink.calls == [] and dict(result.removed) == {("t", 0): (3, 20)} and result.reached[("t", 0)] == 20


def test_topics_new_to_the_consumer_have_their_metadata_fetched_once_before_they_are_assigned() -> None:
    """Assigned a topic it never read, librdkafka starts fetching only after its own metadata round (about
    0.5 s on a local cluster): the reader asks first, once per topic, one topic alone or all at once."""
    consumer = FakeConsumer(
        [[Msg("t", 0, 0), Msg("u", 0, 0)], [Msg("t", 0, 1), Msg("u", 0, 1)], [Msg("v", 0, 0)], [Msg("t", 0, 2)]]
    )
    r = reader(consumer)
    r.read({("t", 0): (0, 1), ("u", 0): (0, 1)}, Sink())
    r.read({("t", 0): (1, 2), ("u", 0): (1, 2)}, Sink())
    r.read({("v", 0): (0, 1)}, Sink())
    r.read({("t", 0): (2, 3)}, Sink())
    assert consumer.events == ["metadata *", "assign t,u", "assign t,u", "metadata v", "assign v", "assign t"]


def test_a_metadata_request_that_fails_is_asked_again_and_never_stops_the_read() -> None:
    consumer = FakeConsumer([[Msg("t", 0, 0)], [Msg("t", 0, 1)]])
    consumer.metadata_fails = True
    r = reader(consumer)
    assert r.read({("t", 0): (0, 1)}, Sink()).records == 1
    consumer.metadata_fails = False
    assert r.read({("t", 0): (1, 2)}, Sink()).records == 1
    assert consumer.events == ["metadata t", "assign t", "metadata t", "assign t"]


def test_a_connected_reader_already_holds_the_flows_topics_and_a_new_consumer_asks_again() -> None:
    consumer = FakeConsumer([[Msg("t", 0, 0)], [Msg("t", 0, 1)]])
    r = reader(consumer)
    r.connect(["t", "u"])
    r.read({("t", 0): (0, 1)}, Sink())
    r.close()
    r.read({("t", 0): (1, 2)}, Sink())
    assert consumer.events == ["metadata *", "assign t", "metadata t", "assign t"]


def test_the_consumer_is_never_asked_to_wait_long_for_a_chunk() -> None:
    """librdkafka returns ``consume`` only with a full chunk or at its timeout: a read of a few records
    would wait the whole timeout (0.1 s made that the floor of every batch)."""
    consumer = FakeConsumer([[Msg("t", 0, 0)], [], [Msg("t", 0, 1)]])
    reader(consumer).read({("t", 0): (0, 2)}, Sink())
    assert consumer.waits and set(consumer.waits) == {POLL_SECONDS} and POLL_SECONDS <= 0.02
