"""Prometheus metrics of the mirror and checkpoint processes (prometheus_client).

Served over HTTP on 127.0.0.1 when ``[metrics] port`` is set (or ``--metrics-port``). Names:

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
drkit_errors_total{flow,process}            counter    failed batches / runs
==========================================  =========  ======================================
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

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
ERRORS = Counter("drkit_errors", "Failed mirror batches and translator runs", ["flow", "process"])

_started: set[int] = set()


def serve(port: int | None, host: str = "127.0.0.1") -> None:
    """Expose the metrics on ``host:port`` once per process (None or 0: off)."""
    if port and port not in _started:
        start_http_server(port, addr=host)
        _started.add(port)
