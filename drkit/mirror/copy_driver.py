"""At-least-once, in the driver: a batch read by the driver's own consumer and copied by the ``Copier``.

No Spark job, whose fixed cost is most of a steady-state batch's time: the reader (drkit.mirror.reader)
hands its chunks to the same ``Copier`` the copy tasks use (drkit.mirror.deliver). Invariant: a partition
whose read ended before the end Spark planned is never committed as copied (drkit.mirror.settle); any
failure aborts the copy, whose producer is dropped (a retry starts with a fresh one).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from drkit.config import FlowConfig
from drkit.core.batch import MirrorState
from drkit.errors import ClusterError
from drkit.mirror.copy_path import CopyRequest
from drkit.mirror.deliver import Copier
from drkit.mirror.failure import source_unreachable
from drkit.mirror.lease import LeaseStamp
from drkit.mirror.reader import BatchReader, SourceStalled
from drkit.mirror.report import BatchReport
from drkit.mirror.settle import ReadSettler, driver_site


class DriverCopy:
    """A batch copied by the driver with the flow's cached idempotent producer."""

    def __init__(
        self,
        flow: FlowConfig,
        source_servers: str,
        reader: BatchReader,
        settle: ReadSettler,
        stopping: Callable[[], bool],
        lease: LeaseStamp | None = None,
    ) -> None:
        self.flow, self._servers, self.reader, self._settle, self._stopping = (
            flow,
            source_servers,
            reader,
            settle,
            stopping,
        )
        self._lease = lease

    def copy(self, request: CopyRequest, state: MirrorState, report: BatchReport) -> tuple[pa.Table, MirrorState]:
        ranges = request.ranges
        lease = self._lease
        copier = Copier(
            request.producer_conf,
            request.topic_map,
            self.flow.source,
            self.flow.target,
            epoch=0 if lease is None else lease.epoch,
            gate=None if lease is None else lease.refusal,
        )
        try:
            result = self.reader.read(ranges, copier.copy, self._stopping)
            self._settle.removed(result.removed)
            state = self._settle.short_reads(ranges, result.reached, state)
            rows = copier.finish()
            self._settle.skipped(copier.skipped)
            report.sites = (driver_site(ranges, rows),)
            return rows, state
        except SourceStalled as exc:
            copier.abort()
            raise ClusterError(source_unreachable(self.flow, self._servers, str(exc))) from None
        except BaseException:
            copier.abort()
            raise
