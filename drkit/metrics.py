"""Prometheus metrics of drkit's long-running processes (prometheus_client): the mirror, the translator and
the status exporter (``drkit status --watch S``).

Served over HTTP on ``[metrics] host`` (127.0.0.1) on the command's ``--metrics-port``, else ``[metrics]
port`` (processes on one host need one port each: the mirror, the translator and the exporter of one
config give theirs on the command line). Every name below is declared once, in this module: the
dashboard (``dashboards/drkit.json``) and the alerting rules (``dashboards/drkit-alerts.yml``) query only
these (``tests/unit/test_dashboards.py``). Names:

==========================================  =========  ======================================
drkit_mirror_records_total{flow}            counter    records delivered to the target
drkit_mirror_bytes_total{flow}              counter    key + value bytes delivered
drkit_mirror_batch_seconds{flow}            histogram  duration of a micro-batch (driver side)
drkit_offset_sync_write_seconds{flow}       histogram  latency of the offset_syncs append
drkit_mirror_lag_records{flow,topic,partition} gauge   source end - next offset to mirror
drkit_mirror_lag_seconds{flow}              gauge      upper bound of the age of the oldest unmirrored record
drkit_mirror_records_per_second{flow}       gauge      records mirrored per second over the last 10 s
drkit_mirror_last_batch_timestamp_seconds{flow} gauge  when the last batch finished
drkit_checkpoint_runs_total{flow}           counter    translator runs
drkit_checkpoint_run_seconds{flow}          histogram  duration of a translator run
drkit_checkpoint_last_success_timestamp_seconds{flow} gauge  checkpoint age = now - this
drkit_checkpoint_appended_total{flow}       counter    checkpoint rows appended
drkit_checkpoint_follow_age_seconds{flow}   histogram  followed commit: source commit -> its append acknowledged
drkit_checkpoint_follow_mode{flow}          gauge      1: following __consumer_offsets, 0: the admin API every interval
drkit_errors_total{flow,process}            counter    failed batches / runs
drkit_mirror_skipped_records_total{flow}    counter    records not copied back to the cluster they came from
drkit_heartbeat_latency_seconds{flow}       gauge      newest heartbeat's trip from source to target
drkit_heartbeat_age_seconds{flow}           gauge      how old the newest heartbeat on the target is
==========================================  =========  ======================================

Set by ``drkit status --watch`` from each ``StatusReport`` (``record_status``), so they are there when the
mirror or the translator is not running; an unknown figure (the source gone, nothing mirrored yet) is NaN,
never a value that looks better than the truth:

===================================================  =====  =============================================
drkit_status_verdict{flow,verdict}                   gauge  1 for the flow's verdict, 0 for every other
drkit_status_source_reachable{flow}                  gauge  1: the source answered the last status, 0: not
drkit_status_target_reachable{flow}                  gauge  1: the target answered the last status, 0: not
drkit_status_target_diverged_partitions{flow}        gauge  target partitions holding fewer records than their syncs say
drkit_status_lag_records{flow}                       gauge  records not mirrored yet (NaN: unknown)
drkit_status_left_behind_offsets{flow}               gauge  offsets a failover left on the source (NaN: unknown)
drkit_status_checkpoint_age_seconds{flow,group}      gauge  age of the group's oldest partition checkpoint
drkit_status_group_reread_records{flow,group}        gauge  records a failover now re-reads (NaN: unknown)
drkit_status_group_readiness{flow,group,readiness}   gauge  1 for what a failover now would do with the group
drkit_status_group_at_risk_records{flow,group}       gauge  unread records not mirrored yet (NaN: unknown)
drkit_status_translator_run_age_seconds{flow}        gauge  since the translator's last run (NaN: never ran)
drkit_status_heartbeat_age_seconds{flow}             gauge  newest heartbeat's age on the target (NaN: none)
drkit_status_heartbeat_latency_seconds{flow}         gauge  newest heartbeat's trip (NaN: none)
drkit_status_job_running{flow,job}                   gauge  1: the mirror / translator holds its PID file
drkit_status_last_run_timestamp_seconds              gauge  when the exporter last finished a status
drkit_operation_last_timestamp_seconds{flow,action,status}  gauge  newest failover/failback of that outcome
===================================================  =====  =============================================

Set by a repeating drill (``drkit drill run SPEC --every D``) from each run's row of the ``drills`` table
(``record_drill``; at its start from the newest row of each drill already there), per drill name and flow:

==================================================  =======  ============================================
drkit_drill_runs_total{name,flow,verdict}           counter  drills this process ran, by verdict
drkit_drill_verdict{name,flow,verdict}              gauge    1 for the last drill's verdict, 0 for the other
drkit_drill_rpo_records{name,flow}                  gauge    records acknowledged and never mirrored (RPO)
drkit_drill_rpo_seconds{name,flow}                  gauge    age of the oldest of them at the disaster
drkit_drill_rto_seconds{name,flow}                  gauge    disaster to first record read on the target (NaN: never)
drkit_drill_last_timestamp_seconds{name,flow}       gauge    when the last drill finished
==================================================  =======  ============================================
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge, Histogram, start_http_server

if TYPE_CHECKING:
    from drkit.core.audit import OperationRecord
    from drkit.core.drill import DrillRecord
    from drkit.core.status import StatusReport

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)

MIRROR_RECORDS = Counter("drkit_mirror_records", "Records delivered to the target", ["flow"])
MIRROR_SKIPPED = Counter(
    "drkit_mirror_skipped_records",
    "Records not copied because they came from the flow's target (an origin header names it): loops stopped",
    ["flow"],
)
MIRROR_BYTES = Counter("drkit_mirror_bytes", "Key and value bytes delivered to the target", ["flow"])
MIRROR_BATCH_SECONDS = Histogram(
    "drkit_mirror_batch_seconds", "Duration of a mirror micro-batch", ["flow"], buckets=_BUCKETS
)
MIRROR_TRANSACTION_COMMIT_SECONDS = Histogram(
    "drkit_mirror_transaction_commit_seconds",
    "Exactly-once continuous copy: how long one commit of the due transactions (flush, then EndTxn) held the "
    "copying thread; no copy is made meanwhile",
    ["flow"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2),
)
SYNC_WRITE_SECONDS = Histogram(
    "drkit_offset_sync_write_seconds", "Latency of the offset_syncs append", ["flow"], buckets=_BUCKETS
)
MIRROR_LAG = Gauge(
    "drkit_mirror_lag_records", "Source end offset minus the next offset to mirror", ["flow", "topic", "partition"]
)
HEARTBEAT_LATENCY = Gauge(
    "drkit_heartbeat_latency_seconds",
    "The newest heartbeat's trip from the source to the target (its append time there minus its creation)",
    ["flow"],
)
HEARTBEAT_AGE = Gauge(
    "drkit_heartbeat_age_seconds",
    "How old the newest heartbeat copied to the target is (grows while nothing is replicated)",
    ["flow"],
)
MIRROR_LAG_SECONDS = Gauge(
    "drkit_mirror_lag_seconds",
    "Upper bound of the age of the oldest record not yet mirrored (0 when caught up)",
    ["flow"],
)
MIRROR_RATE = Gauge("drkit_mirror_records_per_second", "Records mirrored per second over the last 10 s", ["flow"])
MIRROR_LEASE_ACTIVE = Gauge(
    "drkit_mirror_lease_active",
    "1 while this process holds the flow's lease and may copy, 0 while it stands by or its lease lapsed",
    ["flow", "host"],
)
MIRROR_LEASE_EPOCH = Gauge(
    "drkit_mirror_lease_epoch", "The epoch of the flow's lease this process holds (0: none yet)", ["flow", "host"]
)
MIRROR_LEASE_REMAINING = Gauge(
    "drkit_mirror_lease_remaining_seconds",
    "How long this process may still copy without another accepted renewal (0: it may not)",
    ["flow", "host"],
)
MIRROR_COPY_TASKS = Gauge(
    "drkit_mirror_copy_tasks",
    "With a cluster master: the long-lived copy tasks connected to this driver, of those its job runs",
    ["flow", "state"],
)
MIRROR_LAST_BATCH = Gauge("drkit_mirror_last_batch_timestamp_seconds", "When the last batch finished", ["flow"])
CHECKPOINT_RUNS = Counter("drkit_checkpoint_runs", "Checkpoint translator runs", ["flow"])
CHECKPOINT_SECONDS = Histogram(
    "drkit_checkpoint_run_seconds", "Duration of a translator run", ["flow"], buckets=_BUCKETS
)
CHECKPOINT_LAST_SUCCESS = Gauge(
    "drkit_checkpoint_last_success_timestamp_seconds",
    "When the last translator run succeeded (age = now - this)",
    ["flow"],
)
CHECKPOINT_APPENDED = Counter("drkit_checkpoint_appended", "Checkpoint rows appended", ["flow"])
#: The buckets of the follower's checkpoint age (drkit.translator.follow): short, so from 5 ms.
FOLLOW_AGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30)
CHECKPOINT_FOLLOW_AGE = Histogram(
    "drkit_checkpoint_follow_age_seconds",
    "Age of a commit followed when its live checkpoint's append was acknowledged (source commit timestamp to "
    "then); "
    "commits made before the follower caught up are not counted",
    ["flow"],
    buckets=FOLLOW_AGE_BUCKETS,
)
CHECKPOINT_FOLLOW_MODE = Gauge(
    "drkit_checkpoint_follow_mode",
    "1 while the translator follows the source's __consumer_offsets, 0 while only its admin API runs do",
    ["flow"],
)
ERRORS = Counter("drkit_errors", "Failed mirror batches and translator runs", ["flow", "process"])


STATUS_VERDICT = Gauge(
    "drkit_status_verdict",
    "1 for the flow's verdict in the last status, 0 for every other verdict",
    ["flow", "verdict"],
)
STATUS_SOURCE_REACHABLE = Gauge(
    "drkit_status_source_reachable", "1 when the flow's source answered the last status, 0 when not", ["flow"]
)
STATUS_TARGET_REACHABLE = Gauge(
    "drkit_status_target_reachable", "1 when the flow's target answered the last status, 0 when not", ["flow"]
)
STATUS_DIVERGED = Gauge(
    "drkit_status_target_diverged_partitions",
    "Target partitions holding fewer records than their offset-syncs say (deleted, re-created or truncated)",
    ["flow"],
)
STATUS_LAG_RECORDS = Gauge(
    "drkit_status_lag_records",
    "Records on the source not mirrored yet (NaN: unknown, e.g. the source is gone)",
    ["flow"],
)
STATUS_LEFT_BEHIND = Gauge(
    "drkit_status_left_behind_offsets",
    "Offsets the flow's open failover left on its source that the target does not hold yet, by the offset-syncs "
    "(0: none, or no failover since the last failback; NaN: unknown, the source did not answer)",
    ["flow"],
)
STATUS_CHECKPOINT_AGE = Gauge(
    "drkit_status_checkpoint_age_seconds",
    "Age of the group's oldest partition checkpoint, as failover's freshness check sees it",
    ["flow", "group"],
)
STATUS_GROUP_REREAD = Gauge(
    "drkit_status_group_reread_records",
    "Records the group committed on the source past the checkpoint a failover now would use: read again on the "
    "target (NaN: unknown, the source did not answer)",
    ["flow", "group"],
)
STATUS_GROUP_READINESS = Gauge(
    "drkit_status_group_readiness",
    "1 for what a failover now would do with the group (exact, skips_unmirrored, stale, untranslatable), 0 for "
    "every other",
    ["flow", "group", "readiness"],
)
STATUS_GROUP_AT_RISK = Gauge(
    "drkit_status_group_at_risk_records",
    "Records on the source the group has not read that the mirror has not copied: lost to it if the source died "
    "now (NaN: unknown, the source did not answer)",
    ["flow", "group"],
)
STATUS_TRANSLATOR_RUN_AGE = Gauge(
    "drkit_status_translator_run_age_seconds", "Seconds since the translator's last run (NaN: it never ran)", ["flow"]
)
STATUS_HEARTBEAT_AGE = Gauge(
    "drkit_status_heartbeat_age_seconds",
    "How old the newest heartbeat copied to the target is, read on the target (NaN: none seen)",
    ["flow"],
)
STATUS_HEARTBEAT_LATENCY = Gauge(
    "drkit_status_heartbeat_latency_seconds",
    "The newest heartbeat's trip from the source to the target, read on the target (NaN: none seen)",
    ["flow"],
)
STATUS_JOB_RUNNING = Gauge(
    "drkit_status_job_running", "1 when the flow's job (mirror, checkpoint) holds its PID file here", ["flow", "job"]
)
STATUS_LAST_RUN = Gauge("drkit_status_last_run_timestamp_seconds", "When the status exporter last finished a status")
OPERATION_LAST = Gauge(
    "drkit_operation_last_timestamp_seconds",
    "When the newest audited failover or failback of this flow, action and outcome ended (started, without an end)",
    ["flow", "action", "status"],
)

DRILL_RUNS = Counter("drkit_drill_runs", "Drills this process ran, by verdict", ["name", "flow", "verdict"])
DRILL_VERDICT = Gauge(
    "drkit_drill_verdict", "1 for the last drill's verdict, 0 for the other verdict", ["name", "flow", "verdict"]
)
DRILL_RPO_RECORDS = Gauge(
    "drkit_drill_rpo_records",
    "The last drill's RPO: records acknowledged on the source, never mirrored",
    ["name", "flow"],
)
DRILL_RPO_SECONDS = Gauge(
    "drkit_drill_rpo_seconds",
    "The last drill's RPO in time: the age of the oldest record never mirrored, at the disaster",
    ["name", "flow"],
)
DRILL_RTO_SECONDS = Gauge(
    "drkit_drill_rto_seconds",
    "The last drill's RTO: the disaster to the first record read on the target (NaN: none was read)",
    ["name", "flow"],
)
DRILL_LAST = Gauge("drkit_drill_last_timestamp_seconds", "When the last drill finished", ["name", "flow"])

#: Label sets the last ``record_status`` set on each gauge with labels that come and go (groups,
#: operations): a group no longer checkpointed is removed, not left at its last age.
_seen: dict[str, set[tuple[str, ...]]] = {}


def _known(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _replace(gauge: Gauge, name: str, values: dict[tuple[str, ...], float]) -> None:
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    for gone in _seen.get(name, set()) - set(values):
        gauge.remove(*gone)
    _seen[name] = set(values)


def record_status(report: StatusReport, operations: Iterable[OperationRecord], now_seconds: float) -> None:
    """Set the ``drkit_status_*`` gauges from one status report, and the newest failover/failback of each
    (flow, action, outcome) from ``operations`` (folded: one record per operation)."""
    from drkit.core.readiness import Readiness
    from drkit.core.status import Verdict

    ages: dict[tuple[str, ...], float] = {}
    rereads: dict[tuple[str, ...], float] = {}
    at_risk: dict[tuple[str, ...], float] = {}
    ready: dict[tuple[str, ...], float] = {}
    for f in report.flows:
        for v in Verdict:
            STATUS_VERDICT.labels(f.flow, v.value).set(1.0 if f.verdict is v else 0.0)
        STATUS_SOURCE_REACHABLE.labels(f.flow).set(1.0 if f.source_reachable else 0.0)
        STATUS_TARGET_REACHABLE.labels(f.flow).set(1.0 if f.target_reachable else 0.0)
        # An unreachable target's divergence is unknown, not 0.
        STATUS_DIVERGED.labels(f.flow).set(len(f.target_divergences) if f.target_reachable else math.nan)
        STATUS_LAG_RECORDS.labels(f.flow).set(_known(f.lag_records))
        STATUS_LEFT_BEHIND.labels(f.flow).set(_known(f.left_behind_offsets))
        STATUS_TRANSLATOR_RUN_AGE.labels(f.flow).set(_known(f.checkpoint_last_run_age_seconds))
        STATUS_HEARTBEAT_AGE.labels(f.flow).set(_known(f.heartbeat_age_seconds))
        STATUS_HEARTBEAT_LATENCY.labels(f.flow).set(_known(f.heartbeat_latency_seconds))
        STATUS_JOB_RUNNING.labels(f.flow, "mirror").set(1.0 if f.mirror_running else 0.0)
        STATUS_JOB_RUNNING.labels(f.flow, "checkpoint").set(1.0 if f.checkpoint_running else 0.0)
        ages.update({(f.flow, g.group): g.checkpoint_age_seconds for g in f.groups})
        rereads.update({(f.flow, g.group): _known(g.reread_records) for g in f.groups})
        at_risk.update({(f.flow, g.group): _known(g.at_risk_records) for g in f.groups})
        ready.update({(f.flow, g.group, r.value): float(g.readiness is r) for g in f.groups for r in Readiness})
    _replace(STATUS_CHECKPOINT_AGE, "checkpoint_age", ages)
    _replace(STATUS_GROUP_REREAD, "group_reread", rereads)
    _replace(STATUS_GROUP_AT_RISK, "group_at_risk", at_risk)
    _replace(STATUS_GROUP_READINESS, "group_readiness", ready)
    newest: dict[tuple[str, ...], float] = {}
    for op in operations:
        at = (op.finished_at or op.started_at).timestamp()
        key = (op.flow, op.action.value, op.status or "unknown")
        newest[key] = max(newest.get(key, at), at)
    _replace(OPERATION_LAST, "operation_last", newest)
    STATUS_LAST_RUN.set(now_seconds)


def record_drill(record: DrillRecord, ran: bool = True) -> None:
    """Set the ``drkit_drill_*`` gauges from one row of the ``drills`` table; ``ran``: this process ran it
    (counted), else it is a row found at the start (the gauges only)."""
    from drkit.core.drill import DrillVerdict

    labels = (record.name, record.flow)
    for v in DrillVerdict:
        DRILL_VERDICT.labels(*labels, v.value).set(1.0 if record.verdict == v.value else 0.0)
    DRILL_RPO_RECORDS.labels(*labels).set(record.rpo_records)
    DRILL_RPO_SECONDS.labels(*labels).set(record.rpo_ms / 1000)
    DRILL_RTO_SECONDS.labels(*labels).set(math.nan if record.rto_ms is None else record.rto_ms / 1000)
    DRILL_LAST.labels(*labels).set(record.finished_ms / 1000)
    if ran:
        DRILL_RUNS.labels(*labels, record.verdict).inc()


_started: set[int] = set()


def serve(port: int | None, host: str = "127.0.0.1") -> None:
    """Expose the metrics on ``host:port`` once per process (None or 0: off)."""
    if port and port not in _started:
        start_http_server(port, addr=host)
        _started.add(port)
