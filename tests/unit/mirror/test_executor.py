"""The copy task run on executors (drkit.mirror.executor), with a fake source consumer and a fake target
producer (no Spark, no broker): what it returns, how it fails, and that it ships without secrets in sight."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError

from drkit.mirror import executor, producers
from drkit.mirror.executor import CopyTask, TaskFailure, copy_partitions, copy_ranges
from drkit.mirror.faults import FaultPlan
from drkit.mirror.producers import FAILURE_MARKER, DeliveryFailed
from drkit.mirror.reader import RecordsRemoved, SourceStalled
from drkit.store import files


class Err:
    def __init__(self, code: int) -> None:
        self._code = code

    def code(self) -> int:
        return self._code

    def retriable(self) -> bool:
        return False

    def fatal(self) -> bool:
        return False

    def name(self) -> str:
        return f"E{self._code}"

    def str(self) -> str:
        return "scripted"


class Msg:
    def __init__(self, topic: str, partition: int, offset: int, error: Err | None = None) -> None:
        self.t, self.p, self.o, self.e = topic, partition, offset, error

    def error(self) -> Err | None:
        return self.e

    def topic(self) -> str:
        return self.t

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o

    def key(self) -> bytes:
        return b"k%d" % self.o

    def value(self) -> bytes:
        return b"v%d" % self.o

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000 + self.o)

    def headers(self) -> None:
        return None


class Source:
    """A consumer that hands out each assigned partition's records up to ``ends`` (then its end)."""

    def __init__(self, ends: dict[tuple[str, int], int], errors: dict[tuple[str, int], int] | None = None) -> None:
        self.ends, self.errors = ends, errors or {}
        self.queue: list[Msg] = []
        self.confs: list[dict[str, Any]] = []

    def assign(self, tps: list[Any]) -> None:
        for tp in tps:
            key = (tp.topic, tp.partition)
            if key in self.errors:
                self.queue.append(Msg(tp.topic, tp.partition, tp.offset, Err(self.errors[key])))
                continue
            if key not in self.ends:
                continue  # a partition that never answers
            self.queue += [Msg(tp.topic, tp.partition, o) for o in range(max(tp.offset, 0), self.ends[key])]
            self.queue.append(Msg(tp.topic, tp.partition, self.ends[key], Err(KafkaError._PARTITION_EOF)))

    def consume(self, n: int, timeout: float) -> list[Msg]:
        out, self.queue = self.queue[:n], self.queue[n:]
        return out

    def unassign(self) -> None:
        self.queue = []

    def close(self) -> None:
        pass


class Target:
    """Appends per target partition; ``refuse``: topics whose deliveries fail."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.refuse = refuse
        self.next: dict[tuple[str, int], int] = defaultdict(int)
        self.reports: list[Callable[[], None]] = []
        self.origins: list[bytes] = []

    def produce(self, topic: str, value: Any, key: Any, partition: int, on_delivery: Any, **kw: Any) -> None:
        self.origins.append(kw["headers"][-1][1])

        class Delivered:
            def __init__(self, offset: int) -> None:
                self._offset = offset

            def topic(self) -> str:
                return topic

            def partition(self) -> int:
                return partition

            def offset(self) -> int:
                return self._offset

        if topic in self.refuse:
            error = confluent_kafka.KafkaError(confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE)
            self.reports.append(lambda: on_delivery(error, Delivered(-1)))
            return
        offset = self.next[(topic, partition)]
        self.next[(topic, partition)] += 1
        self.reports.append(lambda: on_delivery(None, Delivered(offset)))

    def poll(self, timeout: float = 0) -> int:
        done, self.reports = self.reports, []
        for report in done:
            report()
        return len(done)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Callable[[Source, Target], None]:
    monkeypatch.setattr(producers, "_PRODUCERS", {})
    monkeypatch.setattr(executor, "_READERS", {})

    def use(source: Source, target: Target) -> None:
        monkeypatch.setattr(executor, "_READERS", {})  # a fresh source: no reader cached with the last one

        def consumer(conf: dict[str, Any]) -> Source:
            source.confs.append(conf)
            return source

        monkeypatch.setattr(confluent_kafka, "Consumer", consumer)
        monkeypatch.setattr(confluent_kafka, "Producer", lambda conf: target)

    return use


def task(**kw: Any) -> CopyTask:
    settings: dict[str, Any] = {
        "consumer_conf": {"bootstrap.servers": "a:1", "group.id": "g", "sasl.password": "s3cret"},
        "producer_conf": {"bootstrap.servers": "b:1", "sasl.password": "s3cret"},
        "topic_map": {"t": "A.t", "u": "A.u"},
        "source_alias": "A",
        "target_alias": "B",
        "stall_seconds": 0.3,
        "skip_removed": False,
        "local": True,
    }
    return CopyTask(**{**settings, **kw})


def test_a_task_copies_its_whole_partitions_and_returns_only_ranges_positions_and_its_site(
    clients: Callable[[Source, Target], None],
) -> None:
    target = Target()
    clients(Source({("t", 0): 10, ("t", 1): 4, ("u", 0): 3}), target)
    result = copy_ranges(task(), {("t", 0): (5, 10), ("t", 1): (-2, 4), ("u", 0): (0, 3)}, attempt=1)
    assert result.failure is None
    spans = {(r["source_topic"], r["partition"]): (r["upstream_first"], r["upstream_last"]) for r in result.rows}
    assert spans == {("t", 0): (5, 9), ("t", 1): (0, 3), ("u", 0): (0, 2)}
    assert dict(target.next) == {("A.t", 0): 5, ("A.t", 1): 4, ("A.u", 0): 3}
    assert result.reached == {("t", 0): 10, ("t", 1): 4, ("u", 0): 3}
    assert (result.site.executor_id, result.site.pid, result.site.attempt) == ("driver", os.getpid(), 1)
    assert (result.site.partitions, result.site.records) == (3, 12)
    assert result.table().num_rows == 3


def test_failures_a_task_detects_are_returned_and_raised_by_the_driver_as_its_own_copy_would(
    clients: Callable[[Source, Target], None],
) -> None:
    clients(Source({("t", 0): 5}), Target(refuse=frozenset({"A.t"})))
    refused = copy_ranges(task(), {("t", 0): (0, 5)}, 0)
    assert refused.failure is TaskFailure.DELIVERY and refused.rows == []
    assert isinstance(refused.error(), DeliveryFailed) and str(refused.error()).startswith(FAILURE_MARKER)

    clients(Source({("t", 0): 5}, errors={("t", 0): KafkaError._AUTO_OFFSET_RESET}), Target())
    removed = copy_ranges(task(), {("t", 0): (0, 5)}, 0)
    assert removed.failure is TaskFailure.RECORDS_REMOVED and isinstance(removed.error(), RecordsRemoved)

    clients(Source({}), Target())  # the source answers nothing for t/1: a stall
    stalled = copy_ranges(task(), {("t", 1): (0, 5)}, 0)
    assert stalled.failure is TaskFailure.STALLED and isinstance(stalled.error(), SourceStalled)


def test_a_task_failed_on_purpose_once_raises_after_copying_then_copies_again(
    clients: Callable[[Source, Target], None], tmp_path: Path
) -> None:
    target = Target()
    clients(Source({("t", 0): 3}), target)
    marker = tmp_path / "failed-once"
    with pytest.raises(RuntimeError, match="on purpose"):
        copy_ranges(task(faults=FaultPlan(fail_copy_task_once=str(marker))), {("t", 0): (0, 3)}, 0)
    assert marker.exists() and target.next[("A.t", 0)] == 3  # the first attempt's copies: orphans
    again = copy_ranges(task(faults=FaultPlan(fail_copy_task_once=str(marker))), {("t", 0): (0, 3)}, 1)
    assert again.rows[0]["downstream_first"] == 3 and again.site.attempt == 1


def test_the_task_function_ships_without_live_clients_and_its_settings_never_print_secrets(
    clients: Callable[[Source, Target], None],
) -> None:
    from pyspark import cloudpickle

    clients(Source({("t", 0): 2}), Target())
    settings = task()
    run = copy_partitions(settings)
    [result] = list(run(iter([{("t", 0): (0, 2)}])))  # the worker's caches now hold live clients
    assert result.failure is None and executor._READERS and producers._PRODUCERS
    shipped = cloudpickle.dumps(run)
    assert b"Source" not in shipped and b"Target" not in shipped
    assert callable(cloudpickle.loads(shipped))
    assert "s3cret" not in repr(settings) and "s3cret" not in str(settings)


class FakeRDD:
    def __init__(self, slices: list[list[Any]]) -> None:
        self.slices = slices

    def mapPartitions(self, fn: Callable[[Any], Any]) -> FakeRDD:
        return FakeRDD([list(fn(iter(s))) for s in self.slices])

    def collect(self) -> list[Any]:
        return [x for s in self.slices for x in s]


class FakeContext:
    """Runs a job's slices in this process, as Spark would on executors; records the jobs."""

    def __init__(self, master: str, cores: int) -> None:
        self.master, self.defaultParallelism = master, cores
        self.jobs: list[int] = []

    def parallelize(self, items: list[Any], slices: int) -> FakeRDD:
        assert slices == len(items)  # one task per group
        self.jobs.append(slices)
        return FakeRDD([[item] for item in items])

    def setJobDescription(self, text: str) -> None:
        pass


class FakeSpark:
    def __init__(self, master: str, cores: int) -> None:
        self.sparkContext = FakeContext(master, cores)


def job_of(tmp_path: Path, master: str, cores: int, **mirror: Any) -> Any:
    from support.fakes import held_job, mirror_context

    from drkit.config import parse_config

    cfg = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
            "flows": [{"source": "A", "target": "B", "mirror": mirror}],
            "state": {"root": str(tmp_path / "state")},
        }
    )
    return held_job(replace(mirror_context(cfg), spark=FakeSpark(master, cores)), cfg.flows[0], once=True)


def request(plan: Any, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> Any:
    from drkit.mirror.copy_path import CopyRequest

    return CopyRequest(0, plan.ranges, plan.records(), producer_conf, topic_map)


def test_with_a_cluster_master_every_batch_goes_to_copy_tasks_none_through_the_driver(
    clients: Callable[[Source, Target], None], tmp_path: Path
) -> None:
    from drkit.core.batch import BatchPlan, MirrorState
    from drkit.mirror.report import BatchReport

    target = Target()
    clients(Source({("t", p): 10 for p in range(6)}), target)
    j = job_of(tmp_path, "spark://m:7077", cores=4)
    j.reader.read = lambda *a, **k: pytest.fail("the driver read records")  # the driver's reader: never
    plan = BatchPlan({("t", p): (0, 10) for p in range(6)}, {})
    report = BatchReport(0)
    copied, state = j._copy(request(plan, {"bootstrap.servers": "b:1"}, {"t": "A.t"}), report, MirrorState("s", 0))
    assert j.spark.sparkContext.jobs == [4]  # one job, 6 partitions in 4 balanced tasks
    assert not report.in_driver and len(report.sites) == 4 and sum(s.records for s in report.sites) == 60
    assert sorted(s.partitions for s in report.sites) == [1, 1, 2, 2]
    assert copied.num_rows == 6 and sum(copied.column("record_count").to_pylist()) == 60
    assert state.held == {} and dict(target.next) == {("A.t", p): 10 for p in range(6)}
    assert "copied by 4 task(s): executor " in report.where()


def test_in_local_mode_a_small_batch_is_copied_by_the_driver_without_a_job(
    clients: Callable[[Source, Target], None], tmp_path: Path
) -> None:
    from drkit.core.batch import BatchPlan, MirrorState
    from drkit.mirror.report import BatchReport

    clients(Source({("t", 0): 10}), Target())
    j = job_of(tmp_path, "local[2]", cores=2)
    j.path.driver.reader = executor.BatchReader(lambda: confluent_kafka.Consumer({}), 1.0)
    report = BatchReport(0)
    plan = BatchPlan({("t", 0): (0, 10)}, {})
    j._copy(request(plan, {"bootstrap.servers": "b:1"}, {"t": "A.t"}), report, MirrorState("s", 0))
    assert report.in_driver and j.spark.sparkContext.jobs == []
    assert [s.in_driver for s in report.sites] == [True] and report.where() == "copied by the driver"


def test_a_failure_a_copy_task_returns_fails_the_batch_as_the_drivers_copy_would(
    clients: Callable[[Source, Target], None], tmp_path: Path
) -> None:
    from drkit.core.batch import BatchPlan, MirrorState
    from drkit.errors import MirrorError
    from drkit.mirror.report import BatchReport

    clients(Source({("t", 0): 5}, errors={("t", 0): KafkaError._AUTO_OFFSET_RESET}), Target())
    j = job_of(tmp_path, "spark://m:7077", cores=2)
    with pytest.raises(MirrorError, match=r"records were removed from the source before they were mirrored"):
        j._copy(request(BatchPlan({("t", 0): (0, 5)}, {}), {}, {"t": "A.t"}), BatchReport(0), MirrorState("s", 0))
    clients(Source({("t", 0): 5}), Target(refuse=frozenset({"A.t"})))
    with pytest.raises(DeliveryFailed, match=FAILURE_MARKER):
        j._copy(request(BatchPlan({("t", 0): (0, 5)}, {}), {}, {"t": "A.t"}), BatchReport(0), MirrorState("s", 0))


def test_a_source_a_copy_task_could_not_read_is_a_cluster_error_naming_it(
    clients: Callable[[Source, Target], None], tmp_path: Path
) -> None:
    from drkit.core.batch import BatchPlan, MirrorState
    from drkit.errors import ClusterError
    from drkit.mirror.report import BatchReport

    clients(Source({}), Target())  # t/0 never answers
    j = job_of(tmp_path, "spark://m:7077", cores=2, consumer={"default.api.timeout.ms": "300"})
    with pytest.raises(ClusterError) as raised:
        j._copy(request(BatchPlan({("t", 0): (0, 5)}, {}), {}, {"t": "A.t"}), BatchReport(0), MirrorState("s", 0))
    assert str(raised.value).startswith("source cluster A (a:1) cannot be read: no record of 1 partition(s) arrived")


def test_a_mirror_on_a_spark_with_speculation_is_refused_before_anything_starts(tmp_path: Path) -> None:
    from drkit.errors import RefusedError

    j = job_of(tmp_path, "spark://m:7077", cores=2)

    class Conf:
        def get(self, key: str) -> str | None:
            return "true" if key == "spark.speculation" else None

    j.spark.sparkContext.getConf = Conf
    with pytest.raises(RefusedError, match=r"^flow A->B: spark.speculation is true") as raised:
        j.start(once=True)
    assert "\n" not in str(raised.value)
    assert not files.exists(j.stream_checkpoint.parent)  # nothing was started or written


def test_the_warm_up_makes_the_clients_the_first_copy_uses(clients: Callable[[Source, Target], None]) -> None:
    source = Source({("t", 0): 3})
    clients(source, Target())
    settings = task()
    assert list(executor.warm(settings)(iter([0]))) == [os.getpid()]
    assert len(source.confs) == 1 and len(producers._PRODUCERS) == 1  # the consumer made, the producer cached
    result = copy_ranges(settings, {("t", 0): (0, 3)}, 0)
    assert result.failure is None and len(source.confs) == 1 and len(producers._PRODUCERS) == 1  # the same ones
