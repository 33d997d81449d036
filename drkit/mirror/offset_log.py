"""Spark's checkpoint of the mirror's query (local or in an object store): its offset log and stream id.

Invariant: read only, never written (Spark owns the folder; only its parent is made before the query
starts); a file that is absent, truncated or not JSON reads as None, never as a guess, and the job refuses
the batch on it. The one module of drkit.mirror that reaches files itself (drkit.store.files): Spark's
checkpoint is Spark's, not drkit's state.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from drkit.core.mirror_lease import checkpoint_sources
from drkit.core.offsets import SourceOffsets
from drkit.core.replay import replayed_batch as core_replayed_batch
from drkit.layout import JobKind, StateLayout, StatePath
from drkit.store import files
from drkit.store.files import Location

log = logging.getLogger(__name__)


def logged_offsets(checkpoint: Location, batch_id: int) -> SourceOffsets | None:
    """The source's end offsets for ``batch_id`` as Spark's offset log holds them (written before the batch
    runs: its third line is the Kafka source's offsets); None when absent or unreadable."""
    return _offsets_line(checkpoint / "offsets" / str(batch_id), 2)


def initial_offsets(checkpoint: Location) -> SourceOffsets | None:
    """Where the query's first batch starts: the Kafka source's initial offsets (``sources/0/0``, a version
    line then the offsets), resolved from ``startingOffsets`` when the query first ran."""
    return _offsets_line(checkpoint / "sources" / "0" / "0", -1)


def batch_start_offsets(checkpoint: Location, batch_id: int) -> SourceOffsets | None:
    return initial_offsets(checkpoint) if batch_id == 0 else logged_offsets(checkpoint, batch_id - 1)


def _offsets_line(path: Location, line: int) -> SourceOffsets | None:
    try:
        offsets = json.loads((files.read_text(path) or "").splitlines()[line])
    except (OSError, IndexError, ValueError):
        return None
    return offsets if isinstance(offsets, dict) else None


def stream_id(checkpoint: Location) -> str:
    """The query's stream id (``metadata``, written by Spark when the query first started)."""
    metadata = json.loads(files.read_text(checkpoint / "metadata") or "{}")
    return str(metadata["id"])


def adopt(layout: StateLayout, flow: str, epoch: int) -> StatePath:
    """The streaming checkpoint of lease ``epoch`` (:meth:`~drkit.layout.StateLayout.stream_checkpoint`), made
    on first use as a copy of the newest earlier epoch's: the new holder goes on from the batches the earlier
    ones committed. The earlier holder is fenced (its sync appends are refused, so it commits no batch after
    the fence): what it may still write to its own folder, a batch's planned offsets, is re-planned or
    replayed here. Files Spark is still writing (hidden temporary files) are not copied."""
    target = layout.stream_checkpoint(flow, epoch)
    if files.exists(target / "metadata"):
        return target
    origin, _ = checkpoint_sources(_epochs(layout, flow), epoch)
    if origin is not None:
        source = layout.stream_checkpoint(flow, origin)
        # Spark restarts from its newest offsets and commits: older ones are not copied (it purges them anyway).
        newest = {log: _newest(files.listing(source / log), RESTART_BATCHES) for log in ("offsets", "commits")}

        def keep(relative: str) -> bool:
            folder, _, name = relative.partition("/")
            if name.startswith(".") or relative.startswith("."):
                return False  # a file Spark is still writing (its temporary), or a local checksum
            return name in newest[folder] if folder in newest else True

        copied = files.copy_tree(source, target, keep)
        log.info("flow %s: epoch %d goes on from the checkpoint of epoch %d (%d files)", flow, epoch, origin, copied)
    return target


def retire(layout: StateLayout, flow: str, epoch: int) -> list[int]:
    """Delete the checkpoints of the epochs older than the one epoch ``epoch`` went on from
    (drkit.core.mirror_lease.checkpoint_sources); the epochs deleted (none when the store refused: only space
    is at stake, the next holder tries again)."""
    try:
        _, old = checkpoint_sources(_epochs(layout, flow), epoch)
        for found in old:
            files.remove_tree(layout.stream_checkpoint(flow, found))
    except Exception as exc:
        log.warning("flow %s: old checkpoints not deleted: %s", flow, exc)
        return []
    if old:
        log.info("flow %s: deleted the checkpoints of epochs %s", flow, ", ".join(map(str, old)))
    return list(old)


def _epochs(layout: StateLayout, flow: str) -> list[int]:
    return [
        found
        for name in files.listing(layout.flow_dir(JobKind.MIRROR, flow))
        if (found := layout.checkpoint_epoch(name)) is not None
    ]


def open_store(layout: StateLayout, flow: str) -> None:
    """List the flow's folder (a standby's preparation: the object store's client made and connected)."""
    files.listing(layout.flow_dir(JobKind.MIRROR, flow))


#: Batches of Spark's offset and commit logs a new epoch's checkpoint starts with (the newest ones).
RESTART_BATCHES = 3


def replayed_batch(checkpoint: Location) -> int | None:
    """The batch Spark would run again when the query starts (drkit.core.replay), or None."""
    logged = [int(n) for n in files.listing(checkpoint / "offsets") if n.isdigit()]
    committed = [int(n) for n in files.listing(checkpoint / "commits") if n.isdigit()]
    return core_replayed_batch(logged, committed)


def settle_replay(flow: str, checkpoint: Location, recorded: Callable[[str, int], bool]) -> int | None:
    """Record as committed the batch Spark would replay, when ``recorded(stream id, batch)`` says its syncs are
    durable and a previous commit shows the content (drkit.core.replay); the batch settled, or None (the query
    then replays it, and the batch callback skips it: drkit.mirror.job)."""
    try:
        replay = replayed_batch(checkpoint)
        if replay is None or not recorded(stream_id(checkpoint), replay) or not settle(checkpoint, replay):
            return None
    except Exception as exc:  # only a batch cycle is at stake
        log.debug("flow %s: the replayed batch is left to Spark: %s", flow, exc)
        return None
    log.info("flow %s: batch %d was recorded before the restart; Spark goes on after it", flow, replay)
    return replay


def settle(checkpoint: Location, batch_id: int) -> bool:
    """Record batch ``batch_id`` as committed, as Spark records it after the batch: the content of the previous
    batch's commit (a query with no state and no watermark writes the same one for every batch). False, and
    nothing written, when there is no previous commit to follow."""
    previous = files.read_text(checkpoint / "commits" / str(batch_id - 1)) if batch_id > 0 else None
    if not previous:
        return False
    files.write_text(checkpoint / "commits" / str(batch_id), previous)
    return True


def _newest(names: list[str], count: int) -> set[str]:
    return {str(n) for n in sorted(int(n) for n in names if n.isdigit())[-count:]}


def make_parent(checkpoint: Location) -> None:
    """The checkpoint's parent folder, before Spark writes the checkpoint in it."""
    files.make_dirs(checkpoint.parent)
