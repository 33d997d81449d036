"""The operations table (the audit trail) on a real Delta table (no JVM: milliseconds).

That Spark reads the same rows is tests/integration/store/test_spark_shares_tables.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from drkit.core.audit import Action, OperationRecord
from drkit.layout import StateLayout
from drkit.store.operations import OperationTable

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def test_operations_newest_first(tmp_path: Path) -> None:
    log = OperationTable(StateLayout(tmp_path))
    assert log.list() == []
    for n, flow in enumerate(["A->B", "B->A", "A->B"]):
        started = T0 + timedelta(seconds=n)
        log.append(
            OperationRecord(
                f"op{n}",
                Action.FAILOVER,
                flow,
                ("g",),
                None,
                True,
                {"n": n},
                {"status": "dry_run"},
                "u",
                "h",
                "v",
                started,
                None,
            )
        )
    assert [o.id for o in log.list()] == ["op2", "op1", "op0"]
    assert [o.id for o in log.list("A->B", limit=1)] == ["op2"]
    assert log.list()[0].plan == {"n": 2} and log.list()[0].finished_at is None


def _row(id: str, status: str, seconds: int = 0) -> OperationRecord:
    return OperationRecord(
        id,
        Action.FAILOVER,
        "A->B",
        ("g",),
        None,
        False,
        {"moves": [1]},
        {"status": status},
        "u",
        "h",
        "v",
        T0 + timedelta(seconds=seconds),
        None,
    )


def test_each_rows_commit_names_its_operation_so_intents_are_ordered_by_commit_version(tmp_path: Path) -> None:
    log = OperationTable(StateLayout(tmp_path))
    assert log.versions(["a"]) == {}  # no table yet
    log.append(_row("a", "applying"))
    log.append(_row("b", "applying", 1))
    log.append(_row("a", "applied"))
    # From a second process (another handle on the table): the first commit of each operation.
    other = OperationTable(StateLayout(tmp_path))
    versions = other.versions(["a", "b", "nobody"])
    assert set(versions) == {"a", "b"} and versions["a"] < versions["b"]
    recent = other.recent(10)
    assert [(r.id, r.status) for r in recent][:1] == [("b", "applying")]
    assert all(r.plan == {} for r in recent)  # the plans are not read to find open intents
    assert other.list()[0].plan == {"moves": [1]}


def test_two_processes_whose_intents_overlap_agree_on_the_one_that_holds_the_group(tmp_path: Path) -> None:
    from drkit.core.lease import decide_lease, open_intents

    first, second = OperationTable(StateLayout(tmp_path)), OperationTable(StateLayout(tmp_path))
    first.append(_row("one", "applying"))
    second.append(_row("two", "applying"))  # before either has read the other's intent back

    def decision(log: OperationTable, mine: str) -> bool:
        recent = log.recent(100)
        return decide_lease(
            mine, open_intents(recent, log.versions(r.id for r in recent)), T0.timestamp() * 1000
        ).granted

    assert (decision(second, "two"), decision(first, "one")) == (False, True)
