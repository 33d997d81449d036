"""The ``operations`` Delta table: the audit trail of every failover and failback, dry runs included.

One row per run, two for an apply (its intent, then its outcome, with one id): who, where, when,
what was asked (flow, groups, as-of), the plan as JSON, and the result as JSON (the status; for an
intent, the offsets it is about to commit; for an outcome, the partitions committed and not, the
errors). The intent and the outcome are rows of the same columns as before: the table's schema and
its version did not change, and an older drkit reads the new rows (their status is text).

Every row's commit records the operation id in its commit info (``drkit.operation``): the commit
version of an intent orders concurrent applies across hosts (drkit.core.lease).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC
from typing import Any

import pyarrow.compute as pc

from drkit.core.audit import Action, OperationRecord
from drkit.layout import StateLayout
from drkit.store import delta
from drkit.store.delta import TableSpec

#: The commit-info key naming the operation a commit wrote a row of.
OPERATION_KEY = "drkit.operation"
#: How many recent commits are searched for an intent's version: more than the rows that can be written
#: while one apply runs; an open intent not found among them is older than every one found.
VERSION_WINDOW = 500

SPEC = TableSpec(
    "operations",
    delta.schema(
        "id STRING NOT NULL, action STRING NOT NULL, flow STRING NOT NULL, groups ARRAY<STRING>, as_of STRING, "
        "dry_run BOOLEAN NOT NULL, plan STRING, result STRING, user STRING, host STRING, drkit_version STRING, "
        "started_at TIMESTAMP NOT NULL, finished_at TIMESTAMP"
    ),
)


def _to_row(record: OperationRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "action": record.action.value,
        "flow": record.flow,
        "groups": list(record.groups),
        "as_of": record.as_of,
        "dry_run": record.dry_run,
        "plan": json.dumps(record.plan, default=str),
        "result": json.dumps(record.result, default=str),
        "user": record.user,
        "host": record.host,
        "drkit_version": record.drkit_version,
        "started_at": record.started_at.astimezone(UTC),
        "finished_at": None if record.finished_at is None else record.finished_at.astimezone(UTC),
    }


def _from_row(r: dict[str, Any]) -> OperationRecord:
    return OperationRecord(
        id=r["id"],
        action=Action(r["action"]),
        flow=r["flow"],
        groups=tuple(r["groups"] or ()),
        as_of=r["as_of"],
        dry_run=r["dry_run"],
        plan=json.loads(r["plan"]) if r.get("plan") else {},
        result=json.loads(r["result"]) if r["result"] else {},
        user=r["user"],
        host=r["host"],
        drkit_version=r["drkit_version"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
    )


class OperationTable(delta.RowLog[OperationRecord, OperationRecord]):
    """``operations``: implements ``OperationLog``."""

    def __init__(self, layout: StateLayout) -> None:
        super().__init__(layout.operations, SPEC, _to_row, _from_row)

    def append(self, record: OperationRecord, metadata: Mapping[str, str] | None = None) -> None:
        super().append(record, {OPERATION_KEY: record.id, **(metadata or {})})

    def versions(self, ids: Iterable[str]) -> dict[str, int]:
        return self._handle.commit_versions(OPERATION_KEY, ids, VERSION_WINDOW)

    def recent(self, limit: int) -> list[OperationRecord]:
        return self.newest(limit, columns=[c for c in SPEC.columns if c != "plan"])

    def list(self, flow: str | None = None, limit: int = 50) -> list[OperationRecord]:
        """The latest ``limit`` operations (of ``flow``), newest first."""
        return self.newest(limit, None if flow is None else pc.field("flow") == flow)
