"""The ``drills`` Delta table: one row per drill run, destructive or a probe (no JVM needed to list them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from drkit.core.drill import DrillRecord, DrillReport
from drkit.core.probe import PROBE_DISASTER, ProbeReport
from drkit.layout import StateLayout
from drkit.store import delta
from drkit.store.delta import TableSpec

SPEC = TableSpec(
    "drills",
    delta.schema(
        "id STRING NOT NULL, name STRING NOT NULL, flow STRING NOT NULL, disaster STRING NOT NULL, "
        "verdict STRING NOT NULL, reasons ARRAY<STRING>, acked BIGINT NOT NULL, lost BIGINT NOT NULL, "
        "redelivered BIGINT NOT NULL, rpo_records BIGINT NOT NULL, rpo_ms BIGINT NOT NULL, rto_ms BIGINT, "
        "report STRING NOT NULL, spec STRING NOT NULL, drkit_version STRING NOT NULL, "
        "started_at TIMESTAMP NOT NULL, finished_at TIMESTAMP NOT NULL"
    ),
)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _probe_row(report: ProbeReport) -> dict[str, Any]:
    """A probe's row: its window records as ``acked``, the missed as ``lost``, the re-read as ``redelivered``."""
    return {
        "id": report.id,
        "name": f"{PROBE_DISASTER} {report.group}",
        "flow": report.flow,
        "disaster": PROBE_DISASTER,
        "verdict": report.verdict.value,
        "reasons": [f"{r.value}: {d}" for r, d in report.reasons],
        "acked": report.total("expected"),
        "lost": report.total("missed"),
        "redelivered": report.total("reread"),
        "rpo_records": report.total("not_mirrored"),
        "rpo_ms": report.rpo_ms,
        "rto_ms": report.timings.rto_ms,
        "report": json.dumps(report.as_dict(), default=str),
        "spec": json.dumps({"group": report.group}),
        "drkit_version": report.drkit_version,
        "started_at": datetime.fromtimestamp(report.started_ms / 1000, UTC),
        "finished_at": datetime.fromtimestamp(report.finished_ms / 1000, UTC),
    }


def _to_row(report: DrillReport | ProbeReport) -> dict[str, Any]:
    if isinstance(report, ProbeReport):
        return _probe_row(report)
    t, oldest = report.timeline, report.accounting.oldest_unmirrored_ms
    return {
        "id": report.id,
        "name": report.name,
        "flow": report.flow,
        "disaster": report.disaster.value,
        "verdict": report.verdict.value,
        "reasons": [f"{r.value}: {d}" for r, d in report.judgement.reasons],
        "acked": report.accounting.acked,
        "lost": report.accounting.lost,
        "redelivered": report.accounting.redelivered,
        "rpo_records": report.accounting.not_mirrored,
        "rpo_ms": 0 if oldest is None else max(0, t.disaster_ms - oldest),
        "rto_ms": None if t.first_read_on_target_ms is None else t.first_read_on_target_ms - t.disaster_ms,
        "report": json.dumps(report.as_dict(), default=str),
        "spec": json.dumps(report.spec, default=str),
        "drkit_version": report.drkit_version,
        "started_at": datetime.fromtimestamp(report.started_ms / 1000, UTC),
        "finished_at": datetime.fromtimestamp(report.finished_ms / 1000, UTC),
    }


def _from_row(r: dict[str, Any]) -> DrillRecord:
    return DrillRecord(
        id=r["id"],
        name=r["name"],
        flow=r["flow"],
        disaster=r["disaster"],
        verdict=r["verdict"],
        reasons=tuple(r["reasons"] or ()),
        acked=r["acked"],
        lost=r["lost"],
        redelivered=r["redelivered"],
        rpo_records=r["rpo_records"],
        rpo_ms=r["rpo_ms"],
        rto_ms=r["rto_ms"],
        report=r["report"],
        drkit_version=r["drkit_version"],
        started_ms=_ms(r["started_at"]),
        finished_ms=_ms(r["finished_at"]),
    )


class DrillLog(delta.RowLog[DrillReport | ProbeReport, DrillRecord]):
    """``drills``: the drills run with this state root; a record is listed without the spec it ran."""

    def __init__(self, layout: StateLayout) -> None:
        super().__init__(layout.drills, SPEC, _to_row, _from_row)

    def list(self, limit: int = 20) -> list[DrillRecord]:
        return self.newest(limit, columns=[n for n in SPEC.columns if n != "spec"])
