"""Drills end to end on their own two clusters: the disaster is real, every record is counted.

The passing drills: a workload with per-key sequence numbers, the mirror and the translator as real
``drkit`` processes, a disaster, failover through the facade, the group resumes on B: 0 lost, 0
re-delivered, RPO and RTO measured, a row in ``drills``. One kills A's broker (SIGKILL) and continues
with failback once A is back: the group reads on A what the mirror never copied, so every record
acknowledged by A is processed exactly once over the round trip. One partitions A away (its broker
frozen by SIGSTOP: connections hang instead of being refused) and thaws it afterwards.

Each passing drill is checked against the producer's delivery reports, not against its own account:
the exact (partition, offset) list the source acknowledged is the drill's list, each record is on A
where it was acknowledged, and the copies on B, read by the test itself and placed by their origin
header, are the drill's, record by record (Counters: a copy twice is two).

The broken setups, each failing with its own reason and leaving B's group as it was: no translator
running (failover refused, stale), the mirror stopped 4 s before the disaster (more unmirrored records
than the budget), a member of the group already consuming on B (failover refused, active group).

A drill on a schedule (``drkit drill run --every``, a real process): its run lands in ``drills`` and in the
metrics it serves, and SIGTERM between runs ends it at once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.kafka_io import committed_on, end_offsets, read_all
from support.ports import DRILL

from drkit.cli.app import main
from drkit.config import load_config
from drkit.core.drill import DrillPhase, DrillReport, DrillVerdict, FailReason
from drkit.core.drill_accounting import Key
from drkit.drill.runner import DrillRunner
from drkit.drill.spec import load_spec
from drkit.drill.workload import decode, ours
from drkit.localdev.clusters import LocalKafka
from drkit.service import Drkit

#: (partition, offset, value) of a delivery report the source sent the drill's producer.
Ack = tuple[int, int, bytes]


@pytest.fixture(scope="module")
def drill_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, Path]]:
    home = tmp_path_factory.mktemp("drill")
    kafka = LocalKafka(home / "local-kafka", base_port=DRILL.base, heap="384m")
    try:
        clusters = {c.alias: c.bootstrap_servers for c in kafka.up(["A", "B"])}
        toml = home / "drkit.toml"
        toml.write_text(
            f'[state]\nroot = {json.dumps(str(home / "state"))}\n\n[spark]\nmaster = "local[2]"\n\n'
            + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
            + '[[flows]]\nsource = "A"\ntarget = "B"\ntopics = { include = ["drill\\\\..*"] }\n'
            "mirror = { trigger_interval_seconds = 0.5 }\ncheckpoint = { interval_seconds = 1 }\n"
        )
        yield kafka, toml
    finally:
        kafka.down()


def _spec(path: Path, kafka: LocalKafka, name: str, disaster: str, **sections: dict[str, object]) -> Path:
    """A short drill on the module's clusters; ``sections`` add keys to [drill], [jobs], [budget]."""
    extra = {"drill": {}, "jobs": {}, "budget": {"lost": 0, "redelivered": 0}} | sections

    def lines(section: str) -> str:
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in extra[section].items())

    path.write_text(
        f'[drill]\nname = "{name}"\nflow = "A->B"\ndisaster = "{disaster}"\n{lines("drill")}\n'
        f'[workload]\ntopic = "drill.{name}"\npartitions = 3\nkeys = 12\nrate_per_second = 80\n'
        f'group = "{name}-app"\nwarmup_seconds = 6\nconsumers_stop_before_disaster_seconds = 4\nidle_seconds = 6\n\n'
        f"[jobs]\n{lines('jobs')}\n[budget]\n{lines('budget')}\n"
        f"[local_kafka]\nstate_dir = {json.dumps(str(kafka.state_dir))}\n"
    )
    return path


def _run(toml: Path, spec: Path, phases: list[str] | None = None) -> tuple[DrillReport, list[Ack]]:
    """The drill, with every delivery report its producer got (as the client handed it over)."""
    acks: list[Ack] = []

    def phase(p: DrillPhase, _detail: str) -> None:
        if phases is not None:
            phases.append(p.value)

    runner = DrillRunner(Drkit(load_config(toml)), load_spec(spec), phase, lambda p, o, v: acks.append((p, o, v)))
    return runner.run(), acks


def _check_against_acks(report: DrillReport, acks: list[Ack], toml: Path, name: str) -> list[dict[str, Any]]:
    """The drill's records are the source's acknowledgements, on A where acknowledged, and the copies the
    drill counted on B are those the test reads there itself; returns the drill's records.json rows."""
    clusters, tag = _clusters(toml), report.id.rsplit("-", 1)[1]
    assert acks, "the source acknowledged nothing"
    assert max(Counter((p, o) for p, o, _ in acks).values()) == 1, "an offset acknowledged twice"
    placed: dict[Key, tuple[int, int]] = {}
    for p, o, value in acks:
        key = decode(value)
        assert key is not None and ours(key, tag), f"acknowledged {value!r} at {p}:{o} is not this drill's"
        placed[key] = (p, o)
    assert len(placed) == len(acks), "one record acknowledged twice"
    rows: list[dict[str, Any]] = json.loads((Path(report.report_dir) / "records.json").read_text())
    assert Counter((r["key"], r["seq"], r["partition"], r["offset"]) for r in rows) == Counter(
        (*k, p, o) for k, (p, o) in placed.items()
    ), "the drill's acknowledged records are not the producer's delivery reports"
    assert report.accounting.acked == len(acks)
    # The acknowledgements are real: each record is on A at the offset the source gave it.
    on_a = {(r.partition, r.offset): r.value for r in read_all(clusters["A"], f"drill.{name}")}
    wrong = [(p, o) for p, o, v in acks if on_a.get((p, o)) != v]
    assert not wrong, f"{len(wrong)} acknowledged records are not on A where acknowledged, e.g. {wrong[:5]}"
    # The copies on B as the test reads them, each placed by its origin header on its record's partition.
    copies: Counter[Key] = Counter()
    for rec in read_all(clusters["B"], f"A.drill.{name}"):
        key = decode(rec.value)
        if key is not None and key in placed:
            assert (rec.partition, rec.origin("A")) == placed[key], f"copy of {key} at {rec.partition}:{rec.offset}"
            copies[key] += 1
    by_key = {(r["key"], r["seq"]): r for r in rows}
    differ = [
        (k, by_key[k]["copies_on_target"], copies[k]) for k in placed if by_key[k]["copies_on_target"] != copies[k]
    ]
    assert not differ, f"{len(differ)} records' copies on B differ (drill, read): e.g. {differ[:5]}"
    unmirrored = [k for k in placed if copies[k] == 0 and not by_key[k]["processed_on_source"]]
    assert report.accounting.not_mirrored == len(unmirrored)
    assert report.accounting.extra_copies_on_target == sum(n - 1 for n in copies.values())
    return rows


def _times_processed(rows: list[dict[str, Any]]) -> Counter[int]:
    """How many records the group processed 0, 1, 2... times over the drill."""
    return Counter(r["processed_on_source"] + r["read_on_target"] + r["read_after_failback"] for r in rows)


def _a_is_back(kafka: LocalKafka, toml: Path, name: str) -> None:
    """The drill gave A back: running, and answering (a frozen broker would time out here)."""
    assert kafka.describe("A").running
    assert sum(end_offsets(_clusters(toml)["A"], f"drill.{name}").values()) > 0


def test_a_drill_that_kills_the_source_and_fails_back_passes_with_every_record_accounted_for(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path
) -> None:
    kafka, toml = drill_clusters
    phases: list[str] = []
    spec = _spec(tmp_path / "kill.toml", kafka, "kill", "kill_source", drill={"failback": True})
    report, acks = _run(toml, spec, phases)
    a, m = report.accounting, report.measured()
    print(report.markdown())
    assert report.verdict is DrillVerdict.PASSED, report.judgement.reasons
    assert a.acked > 0 and a.processed_on_source > 0 and a.read_on_target > 0
    assert a.lost == 0 and a.redelivered == 0 and a.out_of_order_keys == 0 and a.corrupt == 0
    # Every acknowledged record processed exactly once: on A before, on B, or on A after failback; what the
    # mirror had not copied at the disaster (the RPO) is exactly what the group read on A after failback.
    assert a.failed_back and a.read_after_failback == a.not_mirrored
    assert a.acked == a.processed_on_source + a.read_on_target + a.read_after_failback and a.not_resumed == 0
    assert m["rto_seconds"] is not None and m["rto_seconds"] > 0
    assert m["detection_seconds"] is not None and m["failover_seconds"] is not None
    assert m["failback_seconds"] is not None and m["rpo_records"] == a.not_mirrored and m["rpo_seconds"] is not None
    assert report.reported_rpo is not None and report.reported_rpo.source_reachable is False
    assert report.failback is not None and report.failback.status.value == "applied", report.failback
    assert phases[0] == "prepare" and phases.index("disaster") < phases.index("failback") < phases.index("verify")
    assert (Path(report.report_dir) / "report.md").read_text().startswith("# Drill kill: PASS")
    _a_is_back(kafka, toml, "kill")
    rows = _check_against_acks(report, acks, toml, "kill")
    # Record by record over the round trip: every acknowledged record processed exactly once.
    assert _times_processed(rows) == Counter({1: len(acks)})
    assert sum(1 for r in rows if r["read_after_failback"]) == a.not_mirrored


def test_a_drill_that_partitions_the_source_away_passes_and_thaws_it(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path
) -> None:
    kafka, toml = drill_clusters
    report, acks = _run(toml, _spec(tmp_path / "cut.toml", kafka, "cut", "partition_source"))
    a = report.accounting
    print(report.markdown())
    assert report.verdict is DrillVerdict.PASSED, report.judgement.reasons
    assert a.read_on_target > 0 and a.lost == 0 and a.redelivered == 0 and a.out_of_order_keys == 0
    assert a.acked == a.processed_on_source + a.not_mirrored + a.read_on_target
    assert report.reported_rpo is not None and report.reported_rpo.source_reachable is False
    _a_is_back(kafka, toml, "cut")
    rows = _check_against_acks(report, acks, toml, "cut")
    # No failback: each record processed once, except those never mirrored (the RPO), processed nowhere.
    assert _times_processed(rows) == Counter({1: len(acks) - a.not_mirrored, 0: a.not_mirrored}) - Counter()


def test_a_drill_without_the_translator_fails_and_says_why(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka, toml = drill_clusters
    spec = _spec(tmp_path / "broken.toml", kafka, "broken", "stop_mirror", jobs={"translator": False})
    report = Drkit(load_config(toml)).drill_run(str(spec))
    assert report.verdict is DrillVerdict.FAILED
    reasons = dict(report.judgement.reasons)
    assert FailReason.FAILOVER_REFUSED in reasons, report.judgement.reasons
    assert "`drkit checkpoint`, was not running" in reasons[FailReason.FAILOVER_REFUSED], reasons
    assert FailReason.LOST not in reasons and report.accounting.lost == 0  # nothing moved: nothing skipped
    assert committed_on(_clusters(toml)["B"], "broken-app", "A.drill.broken") == {}
    # The facade keeps the run in the drills table, listed by the CLI as JSON.
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["drill", "history", "-c", str(toml), "-o", "json"])
    assert exit_.value.code == 0
    rows = [r for r in json.loads(capsys.readouterr().out)["drills"] if r["id"] == report.id]
    assert [(r["verdict"], r["lost"]) for r in rows] == [("fail", 0)], rows


def test_a_drill_whose_mirror_lags_beyond_the_budget_fails_on_the_rpo(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path
) -> None:
    kafka, toml = drill_clusters
    spec = _spec(
        tmp_path / "lag.toml",
        kafka,
        "lag",
        "kill_source",
        jobs={"mirror_lag_seconds": 4},
        budget={"lost": 0, "redelivered": 0, "rpo_records": 40},
    )
    report, acks = _run(toml, spec)
    a = report.accounting
    print(report.markdown())
    # 4 s at 80 records/s went unmirrored: the RPO budget of 40 is exceeded, and nothing else is wrong. The
    # mirror copied until it was killed (tens of milliseconds behind): the oldest unmirrored record is
    # about 4 s old at the disaster.
    assert a.not_mirrored > 40 and report.measured()["rpo_seconds"] >= 3.5
    assert [r for r, _ in report.judgement.reasons] == [FailReason.RPO_BUDGET], report.judgement.reasons
    assert f"{a.not_mirrored} records were not mirrored" in dict(report.judgement.reasons)[FailReason.RPO_BUDGET]
    assert a.lost == 0 and a.redelivered == 0 and a.read_on_target > 0
    _a_is_back(kafka, toml, "lag")
    rows = _check_against_acks(report, acks, toml, "lag")
    assert _times_processed(rows) == Counter({1: len(acks) - a.not_mirrored, 0: a.not_mirrored}) - Counter()


def test_a_drill_whose_group_is_active_on_the_target_fails_and_leaves_the_target_alone(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path
) -> None:
    kafka, toml = drill_clusters
    spec = _spec(tmp_path / "busy.toml", kafka, "busy", "stop_mirror", jobs={"group_active_on_target": True})
    report = Drkit(load_config(toml)).drill_run(str(spec))
    reasons = dict(report.judgement.reasons)
    assert report.verdict is DrillVerdict.FAILED
    assert FailReason.FAILOVER_REFUSED in reasons and "active_group" in reasons[FailReason.FAILOVER_REFUSED], reasons
    assert FailReason.LOST not in reasons and report.accounting.lost == 0
    # Refused: the group holds no offset on B, as before the drill.
    assert committed_on(_clusters(toml)["B"], "busy-app", "A.drill.busy") == {}


def _clusters(toml: Path) -> dict[str, str]:
    return {alias: c.bootstrap_servers for alias, c in load_config(toml).clusters.items()}


def test_a_drill_on_a_schedule_lands_its_run_serves_its_metrics_and_stops_between_runs(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path
) -> None:
    """``drkit drill run --every``: the first run lands in ``drills`` and in the metrics the process serves;
    SIGTERM while it waits for the next run ends it at once, exit 0, with that run's report printed."""
    kafka, toml = drill_clusters
    spec = _spec(tmp_path / "every.toml", kafka, "every", "stop_mirror")
    port = DRILL.at(5)  # the module's block: A holds base and base + 1, B base + 10 and base + 11
    argv = ["drill", "run", str(spec), "-c", str(toml), "--every", "1h", "--metrics-port", str(port), "-o", "json"]
    proc = subprocess.Popen([sys.executable, "-m", "drkit.cli.app", *argv], stdout=subprocess.PIPE, text=True)
    try:
        deadline, landed = time.monotonic() + 600, []
        while not landed and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(2)
            landed = [d for d in Drkit(load_config(toml)).drill_history(50).drills if d.name == "every"]
        assert proc.poll() is None and len(landed) == 1, proc.returncode
        [record] = landed
        deadline, samples = time.monotonic() + 30, dict[tuple[str, str], float]()
        while ("drkit_drill_last_timestamp_seconds", "") not in samples and time.monotonic() < deadline:
            time.sleep(0.5)  # the row lands before the process reads it back and sets the gauges
            scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            samples = {
                (s.name, s.labels.get("verdict", "")): s.value
                for family in text_string_to_metric_families(scraped)
                for s in family.samples
                if s.labels.get("name") == "every" and s.labels.get("flow") == "A->B"
            }
        assert samples[("drkit_drill_last_timestamp_seconds", "")] == record.finished_ms / 1000
        assert samples[("drkit_drill_runs_total", record.verdict)] == 1.0
        assert samples[("drkit_drill_verdict", record.verdict)] == 1.0
        assert samples[("drkit_drill_rpo_records", "")] == record.rpo_records
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and time.monotonic() - stopping < 10  # no hour's wait, no second run
        assert json.loads(out)["id"] == record.id
        assert [d.id for d in Drkit(load_config(toml)).drill_history(50).drills if d.name == "every"] == [record.id]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
