"""What every copy path does with the end of a read: removed records logged, skipped records counted,
short reads settled; and the driver's own copy site.

Invariant: a partition read short of its planned end is never committed as copied: the batch fails in one
line (``fail_on_data_loss``, the default), or the partition is held from where its read stopped
(drkit.core.batch.hold_short_reads).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import replace

import pyarrow as pa

from drkit import metrics
from drkit.config import FlowConfig
from drkit.core.batch import MirrorState, hold_short_reads, short_read_message, short_reads
from drkit.core.copying import DRIVER_ID, CopySite
from drkit.core.offsets import BatchRanges
from drkit.errors import MirrorError
from drkit.mirror.copied import totals

log = logging.getLogger(__name__)


class ReadSettler:
    """One flow's handling of what its reads returned, the same on every copy path."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow

    def removed(self, removed: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        for (topic, partition), (since, until) in sorted(removed.items()):
            log.warning(
                "flow %s: offsets %d to %d of source partition %s/%d were removed from the source before they "
                "were mirrored (fail_on_data_loss = false: going on past them)",
                self.flow.name,
                since,
                until - 1,
                topic,
                partition,
            )

    def skipped(self, skipped: int) -> None:
        if skipped:
            metrics.MIRROR_SKIPPED.labels(self.flow.name).inc(skipped)
            log.info(
                "flow %s: %d records not copied: they came from %s (their origin header names it)",
                self.flow.name,
                skipped,
                self.flow.target,
            )

    def short_reads(
        self, ranges: BatchRanges, reached: Mapping[tuple[str, int], int], state: MirrorState
    ) -> MirrorState:
        """Partitions read short of the planned end are never committed as copied: the batch fails in one
        line (``fail_on_data_loss``, the default), or each is held from where its read stopped."""
        shorts = short_reads(ranges, reached)
        if shorts and self.flow.mirror.fail_on_data_loss:
            raise MirrorError(
                short_read_message(self.flow.name, shorts[0])
                + (f" ({len(shorts) - 1} more partition(s) alike)" if len(shorts) > 1 else "")
                + "; the batch is not committed. To go on past them, set [flows.mirror] fail_on_data_loss = false"
            )
        for short in shorts:
            log.warning(
                "%s; the partition is copied from offset %d on in the next batch",
                short_read_message(self.flow.name, short),
                short.reached,
            )
        return replace(state, held=hold_short_reads(state.held, shorts)) if shorts else state


def driver_site(ranges: BatchRanges, rows: pa.Table) -> CopySite:
    """Where a batch the driver copied itself was copied: this process."""
    return CopySite(DRIVER_ID, socket.gethostname(), os.getpid(), -1, len(ranges), totals(rows).records)
