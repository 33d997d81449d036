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
