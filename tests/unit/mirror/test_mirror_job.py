"""The mirror job's decisions on the driver, over a context of fakes (no Spark, no broker).

A job is constructed as the facade does, with ``support.fakes.mirror_context``; Spark's checkpoint is a
folder the test writes (the stream's metadata and its offset log). What is left to Spark and the
brokers (the query, the tasks' copy) is proven by tests/integration/mirror.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support.fakes import held_job, mirror_context

from drkit.config import DrkitConfig, parse_config
from drkit.core.offsets import SourceOffsets
from drkit.errors import MirrorError
from drkit.mirror.job import MirrorJob

STREAM = "stream-1"


def config(tmp_path: Path, **mirror: Any) -> DrkitConfig:
    return parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
            "flows": [{"source": "A", "target": "B", "mirror": mirror}],
            "state": {"root": str(tmp_path / "state")},
        }
    )


def job(tmp_path: Path, **mirror: Any) -> MirrorJob:
    cfg = config(tmp_path, **mirror)
    made = held_job(mirror_context(cfg), cfg.flows[0], once=False)
    Path(made.stream_checkpoint).mkdir(parents=True)
    Path(made.stream_checkpoint / "metadata").write_text(json.dumps({"id": STREAM}))
    return made


class Topology:
    """The topology follower's answers for one batch: every topic routed, none refused, ids unchanged."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids
        self.routes = {t: f"A.{t}" for t in ids}
        self.refused: frozenset[str] = frozenset()

    def prepare(self, partitions: Any) -> dict[str, str]:
        list(partitions)
        return dict(self.ids)


def test_a_batch_recorded_before_a_restart_is_skipped_and_nothing_is_produced(tmp_path: Path) -> None:
    j = job(tmp_path)
    syncs: Any = j.syncs
    syncs.batches[(STREAM, 3)] = []
    j._process_batch(None, 3)  # type: ignore[arg-type]  # a skipped batch never looks at its records
    assert [(r.batch_id, r.skipped) for r in j.reports] == [(3, True)]
    assert j.summary().skipped_batches == 1


def test_only_the_first_batch_of_a_run_can_be_a_replay(tmp_path: Path) -> None:
    """Spark replays at most one batch after a restart: later batches are not looked up in the syncs."""
    j = job(tmp_path)
    syncs: Any = j.syncs
    syncs.batches[(STREAM, 3)] = []
    syncs.batches[(STREAM, 4)] = []
    j._process_batch(None, 3)  # type: ignore[arg-type]
    with pytest.raises(MirrorError, match="Spark's offset log"):  # looked for its offsets, so not skipped
        j._process_batch(None, 4)  # type: ignore[arg-type]


def test_a_checkpoint_without_the_batchs_offsets_is_refused_as_damaged(tmp_path: Path) -> None:
    j = job(tmp_path)
    with pytest.raises(MirrorError) as raised:
        j._process_batch(None, 0)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"flow A->B: batch 0: Spark's offset log under {j.stream_checkpoint} does not give the batch's offsets; "
        "the checkpoint is damaged: restore it, or start the flow's mirror anew"
    )
    assert j.reports == []


def plan(j: MirrorJob, start: SourceOffsets, end: SourceOffsets) -> Any:
    j.topology = Topology({"t": "id-1"})  # type: ignore[assignment]
    return j._plan(STREAM, 5, start, end)


def test_a_partition_that_went_back_stops_the_mirror_by_default(tmp_path: Path) -> None:
    with pytest.raises(MirrorError) as raised:
        plan(job(tmp_path), {"t": {"0": 90}}, {"t": {"0": 40}})
    assert "source partition t/0 went back from offset 90 to 40" in str(raised.value)
    assert str(raised.value).endswith("; to go on, set [flows.mirror] fail_on_data_loss = false")


def test_a_partition_that_went_back_is_reported_and_passed_when_the_loss_is_accepted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="drkit.mirror.job"):
        batch, state = plan(job(tmp_path, fail_on_data_loss=False), {"t": {"0": 90}}, {"t": {"0": 60}})
    assert batch.ranges == {} and state.topic_ids == {"t": "id-1"} and (state.stream_id, state.batch_id) == (STREAM, 5)
    assert "going on from offset 60" in caplog.text


def test_a_batch_plans_what_spark_planned_when_nothing_changed(tmp_path: Path) -> None:
    batch, _ = plan(job(tmp_path), {"t": {"0": 5, "1": 0}}, {"t": {"0": 9, "1": 3}})
    assert batch.ranges == {("t", 0): (5, 9), ("t", 1): (0, 3)} and not batch.held and not batch.lost


def test_the_copys_producer_limits_follow_the_routed_target_topics(tmp_path: Path) -> None:
    """Room for the largest record a routed target topic holds; batches within the smallest; a topic no
    longer routed does not count; a flow's own producer setting still wins."""
    j = job(tmp_path)
    j.topology.routes = {"big": "A.big", "small": "A.small"}
    j.topology.record_limits = {"A.big": 4_000_060, "A.small": 20_060, "A.gone": 10}
    conf = j._producer_conf()
    assert conf["message.max.bytes"] == 4_000_060 and conf["batch.size"] == 20_060
    j.topology.routes = {}
    conf = j._producer_conf()
    assert conf["message.max.bytes"] == 1_000_000 and conf["batch.size"] == 1_000_000
    own = job(tmp_path / "own", producer={"batch.size": "5000"})
    assert own._producer_conf()["batch.size"] == "5000"


class Attempts:
    """A batch attempt that fails with ``errors`` in turn, then returns "copied"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "copied"


def probes(j: MirrorJob, answers: dict[str, list[bool]], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each cluster answers the probes as scripted (then answers); no backoff sleeps."""
    asked: list[str] = []

    def reachable(alias: str, timeout: float) -> bool:
        asked.append(alias)
        script = answers.get(alias, [])
        return script.pop(0) if script else True

    monkeypatch.setattr(j.context.clusters, "reachable", reachable)
    monkeypatch.setattr("drkit.mirror.outage.backoff_seconds", lambda attempt: 0.0)
    return asked


def test_a_batch_that_failed_on_a_silent_target_waits_for_it_and_is_copied_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    j = job(tmp_path)
    asked = probes(j, {"B": [False, False, False]}, monkeypatch)
    attempt = Attempts(RuntimeError("DRKIT-DELIVERY-FAILED: record t/0@5: _MSG_TIMED_OUT: Local: Message timed out"))
    with caplog.at_level(logging.INFO):
        assert j._through_outages(7, attempt) == "copied"
    assert attempt.calls == 2 and asked == ["A", "B", "B", "B", "B"]
    lines = [
        r.getMessage() for r in caplog.records if "unreachable since" in r.getMessage() or "again" in r.getMessage()
    ]
    assert lines[0].startswith("flow A->B: target B unreachable since ") and "Message timed out" in lines[0]
    assert lines[1].startswith("flow A->B: target B reachable again after ")
    assert lines[2] == "flow A->B: batch 7 is copied again"


def test_a_one_shot_run_does_not_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    j = job(tmp_path)
    j._once = True
    asked = probes(j, {"A": [False]}, monkeypatch)
    with pytest.raises(RuntimeError, match="cannot be read"):
        j._through_outages(1, Attempts(RuntimeError("source cluster A (a:1) cannot be read: gone")))
    assert asked == []


def test_with_both_clusters_answering_a_failure_stops_the_mirror(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = job(tmp_path)
    probes(j, {}, monkeypatch)
    refused = Attempts(MirrorError("record too large"))
    with pytest.raises(MirrorError):
        j._through_outages(1, refused)
    assert refused.calls == 1
    timeouts = Attempts(*[RuntimeError("Local: Message timed out")] * 10)
    with pytest.raises(RuntimeError):
        j._through_outages(1, timeouts)
    assert timeouts.calls == 4  # the first attempt and 3 quick retries


def test_a_stop_during_the_wait_abandons_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from drkit.mirror.reader import ABANDONED_MARKER, BatchAbandoned

    j = job(tmp_path)
    probes(j, {"A": [False] * 100}, monkeypatch)
    j.abandon.set()
    with pytest.raises(BatchAbandoned, match=ABANDONED_MARKER):
        j._through_outages(1, Attempts(RuntimeError("Timed out waiting for a node assignment")))
