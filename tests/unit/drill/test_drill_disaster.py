"""The drill's disaster: only on a broker drkit started; struck once its signal went out, undone when struck."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from drkit.config import ClusterConfig
from drkit.core.drill import DisasterKind, DrillPhase
from drkit.drill.disaster import Disaster, require_local_source
from drkit.drill.spec import DrillSpec
from drkit.errors import RefusedError

SOURCE = ClusterConfig(bootstrap_servers="localhost:39092")


def spec(tmp_path: Path, disaster: DisasterKind, failback: bool = False) -> DrillSpec:
    return DrillSpec.model_validate(
        {
            "drill": {"name": "d", "flow": "A->B", "disaster": disaster, "failback": failback},
            "workload": {"topic": "drill", "group": "g"},
            "path": str(tmp_path / "drill.toml"),
        }
    )


def test_a_disaster_on_the_source_needs_a_broker_drkit_started(tmp_path: Path) -> None:
    require_local_source(spec(tmp_path, DisasterKind.STOP_MIRROR), "A", SOURCE)  # the source is not touched
    for kind in (DisasterKind.KILL_SOURCE, DisasterKind.PARTITION_SOURCE):
        with pytest.raises(RefusedError) as refused:
            require_local_source(spec(tmp_path, kind), "A", SOURCE)
        assert str(refused.value) == (
            f"disaster {kind.value} needs cluster A (localhost:39092) to be a local cluster of scripts/local-kafka "
            f"under {tmp_path / '.drkit-local'} (set [local_kafka] state_dir); drkit signals no broker it did not start"
        )


def test_stopping_the_mirror_kills_its_job_and_leaves_nothing_to_undo(tmp_path: Path) -> None:
    phases: list[tuple[DrillPhase, str]] = []
    disaster = Disaster(spec(tmp_path, DisasterKind.STOP_MIRROR), "A", lambda p, d: phases.append((p, d)))
    disaster.restore()  # not struck: nothing to undo
    assert not disaster.struck
    mirror = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    at = disaster.strike({"mirror": mirror})
    assert disaster.struck and at > 1_700_000_000_000 and mirror.returncode == -9
    disaster.restore()
    assert disaster.struck and phases == []  # a killed mirror is not restarted by the drill


def test_a_killed_source_is_restarted_when_the_spec_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    monkeypatch.setattr("drkit.drill.disaster.LocalKafka.start", lambda self, alias: started.append(alias))
    phases: list[tuple[DrillPhase, str]] = []
    disaster = Disaster(spec(tmp_path, DisasterKind.KILL_SOURCE), "A", lambda p, d: phases.append((p, d)))
    disaster.struck = True
    disaster.restore()
    assert started == ["A"] and not disaster.struck
    assert phases == [(DrillPhase.RESTORE, "scripts/local-kafka start A")]
