"""The Delta commit of a batch's offset-syncs fails mid-batch (after its records were delivered): Spark does
not commit the batch, and after the table is back a restart loses nothing.

The failure is a real one of delta-rs, for any user (a read-only folder does not stop root): the table's
``_delta_log`` folder is swapped for a file while the mirror runs, so the next commit cannot be written."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.kafka_io import create_topic, end_offsets, produce, read_all, unique
from support.mirror_checks import audit_syncs, latest_checkpoint

from drkit.config import DrkitConfig
from drkit.layout import StateLayout
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable


def test_a_failed_sync_commit_leaves_the_batch_uncommitted_and_a_restart_loses_nothing(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, total = unique("deltafail"), 60_000
    create_topic(clusters["A"], topic, 2)
    produce(
        clusters["A"], topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": b"v" * 50} for i in range(total)]
    )
    config = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [topic]}, "mirror": {"max_offsets_per_trigger": 2000}}]
    )
    layout = StateLayout(config.state_root())
    log = Path(layout.offset_syncs) / "_delta_log"
    aside = log.with_name("_delta_log.aside")
    failure: list[BaseException] = []

    def run() -> None:
        try:
            Drkit(config, spark).mirror(None, once=True)
        except BaseException as exc:
            failure.append(exc)

    mirror = threading.Thread(target=run)
    mirror.start()
    try:
        deadline = time.monotonic() + 240
        while not _copied(clusters["B"], f"A.{topic}"):
            assert mirror.is_alive() and time.monotonic() < deadline, f"the mirror did not start copying: {failure}"
            time.sleep(0.05)
        log.rename(aside)
        log.write_text("not a folder: the next commit fails")
        mirror.join(240)
        assert not mirror.is_alive(), "the mirror did not stop on the failed commit"
    finally:
        if aside.exists():
            log.unlink(missing_ok=True)
            aside.rename(log)
    assert failure, "the mirror copied everything before the table was broken: make the backlog larger"
    print(f"failed as it should: {str(failure[0]).splitlines()[0][:300]}")

    # Every batch Spark committed has its syncs; the batch whose commit failed was not committed.
    checkpoint = latest_checkpoint(config)
    stream = json.loads((checkpoint / "metadata").read_text())["id"]
    committed = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    planned = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    syncs = SyncTable(layout)
    assert all(syncs.batch_written(stream, b) for b in committed), committed
    assert planned not in committed and not syncs.batch_written(stream, planned), (planned, committed)
    delivered = sum(end_offsets(clusters["B"], f"A.{topic}").values())

    Drkit(config, spark).mirror(None, once=True)  # the table is back: a restart
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    ranges = {p: rs for (t, p), rs in SyncTable(layout).ranges("A->B", [topic]).items() if t == topic}
    audit = audit_syncs(ranges, source, target, exact=False)
    assert audit.described == len(source) == total  # 0 missing
    # The only extra copies are the failed batch's, re-copied after the restart (no sync describes them).
    assert audit.orphans == audit.duplicates == len(target) - total <= 2000
    print(f"sync commit failed after {delivered} records on B (batch {planned}); {audit.duplicates} duplicates")


def _copied(bootstrap: str, topic: str) -> int:
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except Exception:
        return 0
