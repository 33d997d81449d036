"""The ``drills`` Delta table: one row per drill run, through delta-rs (no JVM needed to list them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa

from drkit.core.drill import DrillRecord, DrillReport
from drkit.layout import StateLayout
from drkit.store.fast import _append, _read, open_table
from drkit.store.tables import DRILLS_DDL, arrow_schema


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


class DrillLog:
    def __init__(self, layout: StateLayout) -> None:
        self.path = layout.drills

    def append(self, report: DrillReport) -> None:
        t, oldest = report.timeline, report.accounting.oldest_unmirrored_ms
        row = {
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
        _append(self.path, "drills", DRILLS_DDL, pa.Table.from_pylist([row], schema=arrow_schema(DRILLS_DDL)))

    def list(self, limit: int = 20) -> list[DrillRecord]:
        table = open_table(self.path, "drills")
        if table is None:
            return []
        names = [n for n in arrow_schema(DRILLS_DDL).names if n != "spec"]
        rows = _read(table, names, None).sort_by([("started_at", "descending")]).slice(0, limit)
        return [
            DrillRecord(
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
            for r in rows.to_pylist()
        ]
