"""The mirror's streaming query name, and the refusal to start while a query of that name is registered."""

from __future__ import annotations

from pathlib import Path

from drkit.mirror.query import query_name, registration_refusal


def test_the_name_is_per_flow_and_state_root(tmp_path: Path) -> None:
    one = query_name("A->B", tmp_path / "one" / "stream")
    assert one == query_name("A->B", tmp_path / "one" / "stream")
    assert one.startswith("drkit-mirror-A_to_B-")
    assert one != query_name("A->B", tmp_path / "two" / "stream")
    assert one != query_name("A->C", tmp_path / "one" / "stream")


def test_no_refusal_without_a_query_of_that_name() -> None:
    assert registration_refusal("A->B", "A", "q1", []) is None
    assert registration_refusal("A->B", "A", "q1", [("q2", True), ("q3", False)]) is None


def test_a_running_query_and_a_stopped_unreleased_one_are_told_apart() -> None:
    running = registration_refusal("A->B", "A", "q1", [("q2", True), ("q1", True)])
    assert running == (
        "flow A->B: its mirror is already running in this Spark session; stop it before starting another"
    )
    stopped = registration_refusal("A->B", "A", "q1", [("q1", False)])
    assert stopped is not None
    assert "was stopped but Spark has not released it yet" in stopped
    assert "source cluster A" in stopped
    assert "new process" in stopped


def test_a_once_run_across_a_topology_change_says_what_to_do() -> None:
    from drkit.mirror.failure import failure_message

    spark_text = (
        "Kafka data source in Trigger.AvailableNow should provide the same topic partitions in pre-fetched "
        "offset to end offset for each microbatch. The error could be transient - restart your query"
    )
    line = failure_message(RuntimeError(spark_text))
    assert "--once cannot plan across such a change" in line and "without --once" in line
