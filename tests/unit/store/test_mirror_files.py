"""The mirror's own files: per-batch states (attempts Spark did not commit are replaced), created topics,
topology findings."""

from __future__ import annotations

from pathlib import Path

from drkit.core.batch import MirrorState, state_before
from drkit.core.topology import TopicIssue, TopicIssueKind
from drkit.layout import StateLayout
from drkit.store.runs import MirrorFiles


def test_states_round_trip_and_a_replayed_batch_replaces_its_uncommitted_state(tmp_path: Path) -> None:
    files = MirrorFiles(StateLayout(tmp_path))
    assert files.states("A->B") == []
    for b in range(5):
        files.record_state("A->B", MirrorState("s", b, {"t": f"id{b}"}, {("t", 0): b}))
    kept = files.states("A->B")
    assert [s.batch_id for s in kept] == [2, 3, 4] and kept[-1].held == {("t", 0): 4}
    files.record_state("A->B", MirrorState("s", 3, {"t": "again"}))  # batch 3 replayed: 4 was never committed
    assert [s.batch_id for s in files.states("A->B")] == [2, 3]
    assert state_before(files.states("A->B"), "s", 4).topic_ids == {"t": "again"}


def test_created_topics_and_findings(tmp_path: Path) -> None:
    files = MirrorFiles(StateLayout(tmp_path))
    files.add_created_topics("A->B", ["A.t"])
    files.add_created_topics("A->B", ["A.u", "A.t"])
    assert files.created_topics("A->B") == {"A.t", "A.u"}
    issue = TopicIssue(TopicIssueKind.SOURCE_DELETED, "t", "A.t", "deleted")
    files.write_findings("A->B", 123, (issue,))
    assert files.findings("A->B") == (123, (issue,))
    assert files.findings("B->A") == (None, ())
