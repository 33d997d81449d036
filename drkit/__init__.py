"""drkit: disaster recovery for Apache Kafka.

Mirror topics between clusters with exact offset-syncs, translate consumer-group offsets
record-exactly, and move consumers over (failover) and back (failback).

The public API for notebooks and scripts is ``__all__``: the facade (:class:`Drkit`), loading a config,
and the typed results its methods return. Names are imported on first use (PEP 562), so ``import drkit``
stays cheap and imports neither Spark nor Delta; ``tests/unit/test_public_api.py`` holds it to that.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from drkit._version import __version__

#: Public name -> the module that defines it.
_EXPORTS = {
    "Drkit": "drkit.service",
    "load_config": "drkit.config",
    "parse_config": "drkit.config",
    "DrkitConfig": "drkit.config",
    "FlowConfig": "drkit.config",
    "DrkitError": "drkit.errors",
    "StatusReport": "drkit.core.status",
    "FlowStatus": "drkit.core.status",
    "Verdict": "drkit.core.status",
    "RpoReport": "drkit.core.status",
    "GroupOffsets": "drkit.core.status",
    "OperationResult": "drkit.core.outcome",
    "OperationStatus": "drkit.core.audit",
    "OperationRecord": "drkit.core.audit",
    "Plan": "drkit.core.plan",
    "Position": "drkit.core.translate",
    "MirrorSummary": "drkit.core.reports",
    "TranslationRun": "drkit.core.reports",
    "MaintenanceReport": "drkit.core.reports",
    "DrillReport": "drkit.core.drill",
    "DrillVerdict": "drkit.core.drill",
    "OffsetsReport": "drkit.results",
    "History": "drkit.results",
    "SyncHistory": "drkit.results",
    "CheckpointHistory": "drkit.results",
    "TableVersions": "drkit.results",
    "TopicsSyncReport": "drkit.results",
    "DrillHistory": "drkit.results",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # the names for type checkers, as re-exports
    from drkit.config import DrkitConfig as DrkitConfig
    from drkit.config import FlowConfig as FlowConfig
    from drkit.config import load_config as load_config
    from drkit.config import parse_config as parse_config
    from drkit.core.audit import OperationRecord as OperationRecord
    from drkit.core.audit import OperationStatus as OperationStatus
    from drkit.core.drill import DrillReport as DrillReport
    from drkit.core.drill import DrillVerdict as DrillVerdict
    from drkit.core.outcome import OperationResult as OperationResult
    from drkit.core.plan import Plan as Plan
    from drkit.core.reports import MaintenanceReport as MaintenanceReport
    from drkit.core.reports import MirrorSummary as MirrorSummary
    from drkit.core.reports import TranslationRun as TranslationRun
    from drkit.core.status import FlowStatus as FlowStatus
    from drkit.core.status import GroupOffsets as GroupOffsets
    from drkit.core.status import RpoReport as RpoReport
    from drkit.core.status import StatusReport as StatusReport
    from drkit.core.status import Verdict as Verdict
    from drkit.core.translate import Position as Position
    from drkit.errors import DrkitError as DrkitError
    from drkit.results import CheckpointHistory as CheckpointHistory
    from drkit.results import DrillHistory as DrillHistory
    from drkit.results import History as History
    from drkit.results import OffsetsReport as OffsetsReport
    from drkit.results import SyncHistory as SyncHistory
    from drkit.results import TableVersions as TableVersions
    from drkit.results import TopicsSyncReport as TopicsSyncReport
    from drkit.service import Drkit as Drkit


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'drkit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value
