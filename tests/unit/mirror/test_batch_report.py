"""Where a batch was copied, as its log line says it: the continuous copy names who copied as records arrived."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from drkit.core.copying import CopySite
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.copy_path import ContinuousCopy, CopyRequest
from drkit.mirror.lanes import Taken
from drkit.mirror.report import BatchReport

SITES = (CopySite("0", "w1", 11, 0, 2, 5), CopySite("1", "w2", 12, 1, 2, 5))


class Copier:
    def __init__(self, taken: Taken) -> None:
        self.taken = taken

    def start(self, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> None:
        return None

    def take(
        self,
        ranges: Any,
        end: Mapping[Any, int],
        topic_map: Mapping[str, str],
        producer_conf: dict[str, Any],
        stopping: Callable[[], bool],
    ) -> Taken:
        return self.taken

    def stop_reading(self) -> None:
        return None

    def held(self) -> int:
        return 0

    def close(self) -> None:
        return None


def taken_by(sites: tuple[CopySite, ...]) -> BatchReport:
    path = ContinuousCopy(
        "A->B",
        Copier(Taken(pa.Table.from_pylist([], schema=COPY_SCHEMA), sites=sites)),
        SimpleNamespace(),  # type: ignore[arg-type]
        SimpleNamespace(skipped=lambda n: None),  # type: ignore[arg-type]
        lambda: False,
    )
    report = BatchReport(3)
    path.take(CopyRequest(3, {("t", 0): (0, 5)}, 5, {}, {"t": "A.t"}), {("t", 0): 5}, report)
    return report


def test_a_batch_taken_from_a_cluster_s_copy_tasks_names_them() -> None:
    report = taken_by(SITES)
    assert report.ahead and not report.in_driver and report.sites == SITES
    assert report.where() == (
        "copied as the records arrived by 2 task(s): executor 0@w1 (pid 11), executor 1@w2 (pid 12, attempt 1)"
    )


def test_a_batch_taken_from_the_driver_s_copier_names_the_driver() -> None:
    report = taken_by(())
    assert report.ahead and report.in_driver and [s.in_driver for s in report.sites] == [True]
    assert report.where() == "copied by the driver as the records arrived"
