"""What one micro-batch did, as the job logs it and sums it into the run's summary.

Invariant: filled by the job (its phases) and by its copy path (where the records were copied); read only
after the batch ended.
"""

from __future__ import annotations

from dataclasses import dataclass

from drkit.core.copying import CopySite


@dataclass
class BatchReport:
    batch_id: int
    records: int = 0
    bytes: int = 0
    ranges: int = 0
    skipped: bool = False
    seconds: float = 0.0
    plan_seconds: float = 0.0  # the batch's ranges from Spark's offset log, its topics prepared, the plan
    copy_seconds: float = 0.0  # read and produced, every attempt (outages waited out included)
    syncs_seconds: float = 0.0
    in_driver: bool = False
    #: taken from the continuous copier (drkit.mirror.continuous): copied as the records arrived
    ahead: bool = False
    #: where the batch's records were copied: one site per task (the attempt that succeeded), or the driver
    sites: tuple[CopySite, ...] = ()

    def where(self) -> str:
        """The batch log's words for where it was copied."""
        if self.ahead and self.sites and not self.in_driver:  # a cluster's copy tasks (drkit.mirror.copier_tasks)
            tasks = ", ".join(site.label() for site in self.sites)
            return f"copied as the records arrived by {len(self.sites)} task(s): {tasks}"
        if self.ahead:
            return "copied by the driver as the records arrived"
        if self.in_driver:
            return "copied by the driver"
        if not self.sites:
            return "nothing to copy"
        return f"copied by {len(self.sites)} task(s): " + ", ".join(site.label() for site in self.sites)
