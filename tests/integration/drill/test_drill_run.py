"""Drills end to end on their own two clusters: the source is really killed, every record is counted.

The passing drill: a workload with per-key sequence numbers, the mirror and the translator as real
``drkit`` processes, SIGKILL of A's broker, failover through the facade, the group resumes on B: 0 lost,
0 re-delivered, RPO and RTO measured, a row in ``drills``. The broken setup: no translator running, so
failover is refused and the drill fails naming why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ports import DISASTER_BASE_PORT

from drkit.cli.app import main
from drkit.config import load_config
from drkit.core.drill import DrillVerdict, FailReason
from drkit.localdev.clusters import LocalKafka
from drkit.service import Drkit


@pytest.fixture(scope="module")
def drill_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, Path]]:
    home = tmp_path_factory.mktemp("drill")
    kafka = LocalKafka(home / "local-kafka", base_port=DISASTER_BASE_PORT + 400, heap="384m")
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


def _spec(path: Path, kafka: LocalKafka, name: str, disaster: str, translator: bool = True) -> Path:
    path.write_text(
        f'[drill]\nname = "{name}"\nflow = "A->B"\ndisaster = "{disaster}"\n\n'
        f'[workload]\ntopic = "drill.{name}"\npartitions = 3\nkeys = 12\nrate_per_second = 80\n'
        f'group = "{name}-app"\nwarmup_seconds = 6\nconsumers_stop_before_disaster_seconds = 4\nidle_seconds = 6\n\n'
        f"[jobs]\ntranslator = {str(translator).lower()}\n\n"
        f"[budget]\nlost = 0\nredelivered = 0\n\n"
        f"[local_kafka]\nstate_dir = {json.dumps(str(kafka.state_dir))}\n"
    )
    return path


def test_a_drill_that_kills_the_source_passes_with_every_record_accounted_for(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka, toml = drill_clusters
    service = Drkit(load_config(toml))
    phases: list[str] = []
    report = service.drill_run(
        str(_spec(tmp_path / "kill.toml", kafka, "kill", "kill_source")), lambda p, d: phases.append(p.value)
    )
    a, m = report.accounting, report.measured()
    print(report.markdown())
    assert report.verdict is DrillVerdict.PASSED, report.judgement.reasons
    assert a.acked > 0 and a.processed_on_source > 0 and a.read_on_target > 0
    assert a.lost == 0 and a.redelivered == 0 and a.out_of_order_keys == 0 and a.corrupt == 0
    # Every acknowledged record is in exactly one class.
    assert a.acked == a.processed_on_source + a.not_mirrored + a.read_on_target and a.not_resumed == 0
    assert m["rto_seconds"] is not None and m["rto_seconds"] > 0
    assert m["detection_seconds"] is not None and m["failover_seconds"] is not None
    assert m["rpo_records"] == a.not_mirrored and m["rpo_seconds"] is not None
    assert report.reported_rpo["source_reachable"] is False
    assert phases[0] == "prepare" and "disaster" in phases and phases[-1] == "verify"
    assert (Path(report.report_dir) / "report.md").read_text().startswith("# Drill kill: PASS")
    # The run is in the drills table, listed by the CLI as JSON.
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["drill", "history", "-c", str(toml), "-o", "json"])
    assert exit_.value.code == 0
    [row] = json.loads(capsys.readouterr().out)["drills"]
    assert (row["id"], row["verdict"], row["lost"], row["redelivered"]) == (report.id, "pass", 0, 0)
    kafka.start("A")  # for the next drill


def test_a_drill_without_the_translator_fails_and_says_why(
    drill_clusters: tuple[LocalKafka, Path], tmp_path: Path
) -> None:
    kafka, toml = drill_clusters
    if not kafka.describe("A").running:
        kafka.start("A")
    spec = _spec(tmp_path / "broken.toml", kafka, "broken", "stop_mirror", translator=False)
    report = Drkit(load_config(toml)).drill_run(str(spec))
    assert report.verdict is DrillVerdict.FAILED
    reasons = dict(report.judgement.reasons)
    assert FailReason.FAILOVER_REFUSED in reasons, report.judgement.reasons
    assert "`drkit checkpoint`, was not running" in reasons[FailReason.FAILOVER_REFUSED], reasons
    assert FailReason.LOST not in reasons and report.accounting.lost == 0  # nothing moved: nothing skipped
