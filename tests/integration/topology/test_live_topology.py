"""A running mirror follows the source's topology under steady load (real brokers, Spark, Delta).

Partitions are added to a mirrored topic, a new matching topic is created and a config is changed while
the mirror runs and a producer writes to every partition. Counted record by record: every acknowledged
record is on the target, in the partition it came from; the new partitions, the new topic and the config
reach the target within the refresh interval + 5 s; the mirror never stops; a group committed on a new
partition fails over exactly. A source topic deleted while the mirror runs: the other topics keep flowing,
``status`` names it, and a topic created again under its name is copied from its start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
from support.kafka_io import commit, committed_on, create_topic, produce, read_all, unique
from support.mirror_checks import assert_exact_copy
from support.waiting import wait_until

from drkit.config import DrkitConfig, load_config
from drkit.core.audit import OperationStatus
from drkit.core.status import Verdict
from drkit.core.topology import TopicIssueKind
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit

REFRESH = 2.0
DEADLINE = REFRESH + 5.0


class SteadyProducer(threading.Thread):
    """Writes to every partition of each topic it is given, round robin; keeps every acknowledged value."""

    def __init__(self, bootstrap: str, topics: dict[str, int], rate: int = 300) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        self.topics = dict(topics)
        self.rate = rate
        self.acked: dict[tuple[str, int], list[bytes]] = {}
        self.errors: list[str] = []
        self.halt = threading.Event()
        self.lock = threading.Lock()

    def add(self, topic: str, partitions: int) -> None:
        # librdkafka learns of new partitions at its next metadata refresh (5 min): ask for it now.
        self.producer.list_topics(topic, timeout=10)
        with self.lock:
            self.topics[topic] = partitions

    def _ack(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.setdefault((msg.topic(), msg.partition()), []).append(msg.value())

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            with self.lock:
                targets = [(t, p) for t, n in self.topics.items() for p in range(n)]
            for topic, partition in targets:
                try:
                    self.producer.produce(
                        topic, f"v{i}".encode(), f"k{i}".encode(), partition=partition, on_delivery=self._ack
                    )
                except KafkaException:  # a partition the producer's metadata does not know yet: not acked
                    self.producer.list_topics(topic, timeout=5)
                    continue
                i += 1
            self.producer.poll(0)
            time.sleep(len(targets) / self.rate)  # pacing: `rate` records a second
        self.producer.flush(30)


def partitions_of(bootstrap: str, topic: str) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics.get(topic)
    return 0 if meta is None or meta.error is not None else len(meta.partitions)


def grow(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result: the handle owns it
    admin.create_partitions([NewPartitions(topic, partitions)])[topic].result(10)


def config_of(bootstrap: str, topic: str, name: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    value: str | None = admin.describe_configs([resource])[resource].result(10)[name].value
    return value


def set_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(10)


def assert_every_acked_record_on_target(clusters: dict[str, str], producer: SteadyProducer, topics: list[str]) -> None:
    for topic in topics:
        source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
        assert_exact_copy(source, target)
        on_target: dict[int, list[bytes | None]] = {}
        for r in target:
            on_target.setdefault(r.partition, []).append(r.value)
        for (t, partition), values in producer.acked.items():
            if t == topic:
                missing = set(values) - set(on_target.get(partition, []))
                assert not missing, f"{topic}/{partition}: {len(missing)} acknowledged records missing on the target"


def test_partitions_topics_and_configs_are_followed_under_load(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    tag = unique("live")
    grown, fresh, group = f"{tag}.orders", f"{tag}.new", unique("g")
    create_topic(clusters["A"], grown, 3, {"retention.ms": "86400000"})
    config = make_config(
        [
            {
                "source": "A",
                "target": "B",
                "topics": {"include": [f"{tag}\\..*"]},
                "topology": {"refresh_interval_seconds": REFRESH},
            }
        ]
    )
    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    failure: list[BaseException] = []

    def mirror() -> None:
        try:
            runner.run(False)
        except BaseException as exc:  # the test fails on it below
            failure.append(exc)

    producer = SteadyProducer(clusters["A"], {grown: 3})
    thread = threading.Thread(target=mirror, daemon=True)
    thread.start()
    producer.start()
    try:
        wait_until(lambda: partitions_of(clusters["B"], f"A.{grown}") == 3, 120, "the target topic")
        assert config_of(clusters["B"], f"A.{grown}", "retention.ms") == "86400000", "created with the source's configs"
        # Steady state first: the target topic is made before the query's first batch, which takes a while.
        wait_until(lambda: len(read_all(clusters["B"], f"A.{grown}")) > 300, 120, "the mirror copying")

        grow(clusters["A"], grown, 6)
        producer.add(grown, 6)
        create_topic(clusters["A"], fresh, 2, {"cleanup.policy": "compact,delete", "min.insync.replicas": "1"})
        producer.add(fresh, 2)
        set_config(clusters["A"], grown, "retention.ms", "3600000")

        def has_records(topic: str, partitions: range) -> bool:
            assert not failure, f"the mirror stopped: {failure}"
            if partitions_of(clusters["B"], topic) < partitions.stop:
                return False
            counts: dict[int, int] = {}
            for r in read_all(clusters["B"], topic):
                counts[r.partition] = counts.get(r.partition, 0) + 1
            return all(counts.get(p, 0) > 0 for p in partitions)

        # The clock starts when the source holds records there (the test's producer learns of new
        # partitions at its own pace).
        wait_until(lambda: all((grown, p) in producer.acked for p in range(3, 6)), 30, "records on the new partitions")
        took = wait_until(lambda: has_records(f"A.{grown}", range(3, 6)), DEADLINE, "records of the new partitions")
        wait_until(lambda: all((fresh, p) in producer.acked for p in range(2)), 30, "records on the new topic")
        took_topic = wait_until(
            lambda: has_records(f"A.{fresh}", range(2)),
            DEADLINE,
            f"records of the new topic ({len(producer.acked.get((fresh, 0), []))} acknowledged on its partition 0)",
        )
        wait_until(
            lambda: config_of(clusters["B"], f"A.{grown}", "retention.ms") == "3600000", DEADLINE, "the config change"
        )
        assert config_of(clusters["B"], f"A.{fresh}", "cleanup.policy") == "compact,delete"
        time.sleep(2)  # on purpose: the mirror keeps running a while after the changes (nothing to await)
        assert thread.is_alive() and not failure, f"the mirror stopped: {failure}"
    except BaseException:
        runner.stop()
        thread.join(120)
        raise
    finally:
        producer.halt.set()
        producer.join(60)

    def caught_up() -> bool:
        return all(
            len(read_all(clusters["B"], f"A.{t}")) >= sum(len(v) for (tt, _), v in producer.acked.items() if tt == t)
            for t in (grown, fresh)
        )

    try:
        wait_until(caught_up, 120, "the mirror catching up")
    finally:
        runner.stop()
        thread.join(120)
    assert not failure, f"the mirror stopped: {failure}"
    assert not producer.errors
    assert_every_acked_record_on_target(clusters, producer, [grown, fresh])
    print(f"new partitions on the target after {took:.1f}s, new topic after {took_topic:.1f}s")

    # A group committed on a new partition fails over exactly: it resumes at the copy of its committed record.
    source = [r for r in read_all(clusters["A"], grown) if r.partition == 4]
    target = [r for r in read_all(clusters["B"], f"A.{grown}") if r.partition == 4]
    committed = source[len(source) // 2].offset
    commit(clusters["A"], group, {(grown, 4): committed})
    service = Drkit(config)
    service.translate("A->B", once=True)
    result = service.failover("A->B", [group], apply=True)
    assert result.status is OperationStatus.APPLIED, result.as_dict()
    expected = next(r.offset for r in target if r.origin("A") == committed)
    assert committed_on(clusters["B"], group, f"A.{grown}") == {4: expected}


def test_a_deleted_topic_leaves_the_others_flowing_and_comes_back_as_a_new_incarnation(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    tag = unique("del")
    doomed, kept, group = f"{tag}.doomed", f"{tag}.kept", unique("g")
    create_topic(clusters["A"], doomed, 2)
    create_topic(clusters["A"], kept, 2)
    produce(clusters["A"], doomed, [{"partition": i % 2, "value": f"old{i}".encode()} for i in range(400)])
    config = make_config(
        [
            {
                "source": "A",
                "target": "B",
                "topics": {"include": [f"{tag}\\..*"]},
                "topology": {"refresh_interval_seconds": REFRESH},
            }
        ]
    )
    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    failure: list[BaseException] = []

    def mirror() -> None:
        try:
            runner.run(False)
        except BaseException as exc:
            failure.append(exc)

    producer = SteadyProducer(clusters["A"], {kept: 2})
    thread = threading.Thread(target=mirror, daemon=True)
    thread.start()
    producer.start()
    try:
        wait_until(lambda: len(read_all(clusters["B"], f"A.{doomed}")) == 400, 120, "the first incarnation's copy")
        # A group that read the whole first incarnation: its checkpoint is of that incarnation.
        commit(clusters["A"], group, {(doomed, 0): 200, (doomed, 1): 200})
        Drkit(config).translate("A->B", once=True)
        admin = AdminClient({"bootstrap.servers": clusters["A"]})
        admin.delete_topics([doomed])[doomed].result(30)
        service = Drkit(config)

        def deleted_named() -> bool:
            [flow] = service.status("A->B").flows
            return any(f.kind is TopicIssueKind.SOURCE_DELETED and f.source == doomed for f in flow.topic_issues)

        wait_until(deleted_named, DEADLINE + 5, "status naming the deleted topic")
        before = len(read_all(clusters["B"], f"A.{kept}"))
        wait_until(lambda: len(read_all(clusters["B"], f"A.{kept}")) > before, 60, "the other topics flowing on")

        # Created again: a new incarnation, copied from its start after the old one's copy.
        wait_until(lambda: partitions_of(clusters["A"], doomed) == 0, 30, "the deletion")
        create_topic(clusters["A"], doomed, 2)
        # More records than the first incarnation had: its offsets 200+ exist again, as other records.
        produce(clusters["A"], doomed, [{"partition": i % 2, "value": f"new{i}".encode()} for i in range(600)])
        wait_until(lambda: len(read_all(clusters["B"], f"A.{doomed}")) >= 1000, 60, "the new incarnation's copy")
        assert thread.is_alive() and not failure, f"the mirror stopped: {failure}"
    except BaseException:
        runner.stop()
        thread.join(120)
        raise
    finally:
        producer.halt.set()
        producer.join(60)
    try:
        wait_until(
            lambda: len(read_all(clusters["B"], f"A.{kept}")) >= len(read_all(clusters["A"], kept)),
            120,
            f"the mirror catching up on {kept}",
        )
    finally:
        runner.stop()
        thread.join(120)
    assert not failure, f"the mirror stopped: {failure}"
    copy = read_all(clusters["B"], f"A.{doomed}")
    for p in (0, 1):
        values = [r.value for r in copy if r.partition == p]
        assert values == [f"old{i}".encode() for i in range(p, 400, 2)] + [f"new{i}".encode() for i in range(p, 600, 2)]
    assert_every_acked_record_on_target(clusters, producer, [kept])

    # Failed over, the group of the first incarnation is never placed among the new incarnation's copies
    # (whose upstream offsets 0..299 hold an offset 200 of other records): it resumes before
    # them and reads every record of the new incarnation, none skipped.
    result = Drkit(config).failover("A->B", [group], apply=True)
    assert result.status is OperationStatus.APPLIED, result.as_dict()
    placed = committed_on(clusters["B"], group, f"A.{doomed}")
    for p in (0, 1):
        first_new = min(r.offset for r in copy if r.partition == p and r.value.startswith(b"new"))
        assert placed[p] <= first_new, (p, placed[p], first_new)


def describe_target(bootstrap: str, topics: list[str]) -> dict[str, tuple[int, str | None]]:
    out: dict[str, tuple[int, str | None]] = {}
    for t in topics:
        n = partitions_of(bootstrap, t)
        out[t] = (n, config_of(bootstrap, t, "retention.ms") if n else None)
    return out


def test_topics_sync_dry_run_changes_nothing_and_the_run_applies_the_plan(
    clusters: dict[str, str], tmp_path: Path
) -> None:
    """``drkit topics sync --dry-run -o json`` (the CLI, in a process) plans; the target is described before
    and after and is the same; ``drkit topics sync`` then applies exactly that plan."""
    import json
    import subprocess
    import sys

    tag = unique("sync")
    grown, fresh = f"{tag}.grown", f"{tag}.fresh"
    create_topic(clusters["A"], grown, 2, {"retention.ms": "7200000"})
    path = tmp_path / "drkit.toml"
    path.write_text(
        f'[clusters.A]\nbootstrap_servers = "{clusters["A"]}"\n[clusters.B]\nbootstrap_servers = "{clusters["B"]}"\n'
        f'[state]\nroot = "{tmp_path / "state"}"\n[[flows]]\nsource = "A"\ntarget = "B"\n'
        f'topics.include = ["{tag}\\\\..*"]\n'
    )
    config = load_config(path)
    service = Drkit(config)
    [first] = service.topics_sync("A->B").flows
    assert [c.target for c in first.plan.creates] == [f"A.{grown}"] and first.created == (f"A.{grown}",)

    grow(clusters["A"], grown, 4)
    set_config(clusters["A"], grown, "retention.ms", "3600000")
    create_topic(clusters["A"], fresh, 3)
    names = [f"A.{grown}", f"A.{fresh}"]
    before = describe_target(clusters["B"], names)
    assert before == {f"A.{grown}": (2, "7200000"), f"A.{fresh}": (0, None)}

    dry = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", "topics", "sync", "-c", str(path), "--dry-run", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    [planned] = json.loads(dry.stdout)["flows"]
    assert planned["dry_run"] is True
    assert [(c["target"], c["partitions"]) for c in planned["create"]] == [(f"A.{fresh}", 3)]
    assert [(g["target"], g["partitions_before"], g["partitions_after"]) for g in planned["grow"]] == [
        (f"A.{grown}", 2, 4)
    ]
    assert [(c["target"], c["set"]) for c in planned["configs"]] == [(f"A.{grown}", {"retention.ms": "3600000"})]
    assert describe_target(clusters["B"], names) == before, "a dry run changes nothing"

    [applied] = service.topics_sync("A->B").flows
    assert applied.created == (f"A.{fresh}",) and applied.grown == (f"A.{grown}",)
    assert describe_target(clusters["B"], names) == {f"A.{grown}": (4, "3600000"), f"A.{fresh}": (3, "604800000")}
    [again] = service.topics_sync("A->B", dry_run=True).flows
    assert again.plan.empty


def test_a_foreign_target_too_small_is_refused_alone_and_copied_from_where_it_stopped_once_grown(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    """A target topic someone else made with too few partitions: that topic is refused (status names it,
    verdict 'topic refused'), the other topics keep flowing; once the operator grows it, every record of the
    refused topic is copied, in order, once: none was skipped while Spark moved on."""
    tag = unique("refuse")
    small, other = f"{tag}.small", f"{tag}.other"
    create_topic(clusters["A"], small, 3)
    create_topic(clusters["A"], other, 1)
    create_topic(clusters["B"], f"A.{small}", 2)  # not drkit's: it never grows it
    produce(clusters["A"], small, [{"partition": i % 3, "value": f"s{i}".encode(), "key": b"k"} for i in range(300)])
    config = make_config(
        [
            {
                "source": "A",
                "target": "B",
                "topics": {"include": [f"{tag}\\..*"]},
                "topology": {"refresh_interval_seconds": REFRESH},
            }
        ]
    )
    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    failure: list[BaseException] = []

    def mirror() -> None:
        try:
            runner.run(False)
        except BaseException as exc:
            failure.append(exc)

    producer = SteadyProducer(clusters["A"], {other: 1, small: 3})
    thread = threading.Thread(target=mirror, daemon=True)
    thread.start()
    producer.start()
    service = Drkit(config)
    try:

        def refused() -> bool:
            assert not failure, f"the mirror stopped: {failure}"
            report = service.status("A->B")
            return any(
                i.kind is TopicIssueKind.TARGET_TOO_SMALL and i.source == small for i in report.flows[0].topic_issues
            )

        wait_until(refused, 120, "status naming the refused topic")
        assert service.status("A->B").flows[0].verdict is not Verdict.HEALTHY
        wait_until(lambda: len(read_all(clusters["B"], f"A.{other}")) > 50, 60, "the other topic flowing")
        assert read_all(clusters["B"], f"A.{small}") == [], "nothing of the refused topic is copied"
        # Spark moves on past the refused topic's records: the other topic gets a later batch meanwhile.
        flowed = len(read_all(clusters["B"], f"A.{other}"))
        wait_until(lambda: len(read_all(clusters["B"], f"A.{other}")) > flowed, 60, "a later batch of the other topic")

        grow(clusters["B"], f"A.{small}", 3)  # the operator's fix, as the refusal says
        wait_until(lambda: len(read_all(clusters["B"], f"A.{small}")) >= 300, DEADLINE + 10, "the held records")
        assert thread.is_alive() and not failure, f"the mirror stopped: {failure}"
    except BaseException:
        runner.stop()
        thread.join(120)
        raise
    finally:
        producer.halt.set()
        producer.join(60)

    def caught_up() -> bool:
        return all(len(read_all(clusters["B"], f"A.{t}")) >= len(read_all(clusters["A"], t)) for t in (small, other))

    try:
        wait_until(caught_up, 120, "the mirror catching up")
    finally:
        runner.stop()
        thread.join(120)
    assert not failure, f"the mirror stopped: {failure}"
    assert_every_acked_record_on_target(clusters, producer, [small, other])
    assert not any(i.source == small for i in service.status("A->B").flows[0].topic_issues)
