"""SourceObserver over a fake source: what it records of the source's ends, and that it never fails."""

from __future__ import annotations

from pathlib import Path

from support.fakes import FakeCluster, two_cluster_config

from drkit.layout import JobKind, StateLayout
from drkit.mirror.observer import SourceObserver
from drkit.store.runs import RunFiles


def observer(tmp_path: Path, source: FakeCluster) -> tuple[SourceObserver, RunFiles]:
    config = two_cluster_config(tmp_path)
    runs = RunFiles(StateLayout(config.state_root()))
    return SourceObserver(config.flows[0], source, runs), runs


def test_the_ends_of_the_topics_the_mirror_copied_are_recorded(tmp_path: Path) -> None:
    source = FakeCluster("A", ends={("t", 0): 10, ("t", 1): 4, ("other", 0): 7})
    obs, runs = observer(tmp_path, source)
    obs.observe()  # nothing copied yet: nothing to observe
    assert runs.source_ends(JobKind.MIRROR, "A->B") == (None, None) and obs.observations == 0

    obs.after_batch({"t": "A.t"}, {}, {}, 0)
    obs.observe()
    latest, _ = runs.source_ends(JobKind.MIRROR, "A->B")
    assert latest is not None and latest.ends == {("t", 0): 10, ("t", 1): 4}
    assert obs.observations == 1


def test_an_unreachable_source_is_not_observed_and_does_not_fail(tmp_path: Path) -> None:
    source = FakeCluster("A", ends={("t", 0): 10}, reachable=False)
    obs, runs = observer(tmp_path, source)
    obs.after_batch({"t": "A.t"}, {}, {}, 0)
    obs.observe()
    assert runs.source_ends(JobKind.MIRROR, "A->B") == (None, None) and obs.observations == 0
