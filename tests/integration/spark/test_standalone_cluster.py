"""drkit on a real Spark standalone cluster (a master and two workers on loopback, tests/integration/spark/
conftest.py): executors import the drkit the driver ships, and ``drkit mirror`` runs against ``spark://``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from support.kafka_io import create_topic, produce, read_all, unique
from support.mirror_checks import assert_exact_copy, audit_syncs

from drkit._version import __version__
from drkit.config import load_config
from drkit.localdev.spark_cluster import LocalSpark
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable

#: A driver that runs one task per partition and reports, from each task, where drkit came from and which
#: processes it descends from (a worker's executor launched the Python worker that ran it).
PROBE = """
import json, sys
from drkit.config import SparkConfig
from drkit.runtime.spark import build_session

config = SparkConfig(master=sys.argv[1], driver_host="127.0.0.1", driver_bind_address="127.0.0.1",
                     auth_secret_file=sys.argv[2],
                     conf={"spark.executor.memory": "512m", "spark.driver.memory": "1g"})
spark = build_session(config, "drkit-probe")

def where(_):
    import os
    import drkit
    from drkit._version import __version__
    ancestors, pid = [], os.getpid()
    while pid > 1:
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        ancestors.append(pid)
    yield {"file": drkit.__file__, "version": __version__, "pid": os.getpid(), "ancestors": ancestors}

rows = spark.sparkContext.parallelize(range(8), 8).mapPartitions(where).collect()
import os
print(json.dumps({"rows": rows, "driver": os.getpid()}))
spark.stop()
"""


def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_executors_import_the_drkit_the_driver_ships(spark_cluster: LocalSpark, tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    done = run(str(script), spark_cluster.master_url(), str(spark_cluster.secret_file()))
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    rows = answer["rows"]
    assert len(rows) == 8
    workers = {d.pid for d in spark_cluster.status().daemons if d.name.startswith("worker-")}
    assert len(workers) == 2
    for row in rows:
        # From the zip (Spark's copy of it in the executor's folder), not from the worktree the venv names.
        zip_name = Path(row["file"]).parent.parent.name
        assert zip_name.startswith(f"drkit-{__version__}-") and zip_name.endswith(".zip"), row
        assert row["version"] == __version__
        assert answer["driver"] not in row["ancestors"] and row["pid"] != answer["driver"], row
        assert len(workers & set(row["ancestors"])) == 1, f"task ran outside the workers' processes: {row}"
    used = {pid for row in rows for pid in row["ancestors"] if pid in workers}
    assert used == workers, "eight tasks, two executors: both used"


#: The must-show's backlog: twelve partitions, 60k records, copied in batches of at most 20k offsets.
PARTITIONS, RECORDS, PER_BATCH = 12, 60_000, 20_000
#: The batch log's line for one batch (drkit.mirror.job), and where its records were copied.
BATCH_LINE = re.compile(r"batch (\d+) mirrored (\d+) records in \d+ ranges \([^)]*, (copied by .*|nothing to copy)\)$")
TASK_SITE = re.compile(r"executor (\S+)@")


def test_a_multi_partition_topic_is_mirrored_exactly_by_the_executors(
    spark_cluster: LocalSpark, cluster_config: Callable[..., Path], clusters: dict[str, str]
) -> None:
    topic = unique("standalone")
    create_topic(clusters["A"], topic, partitions=PARTITIONS)
    records = [
        {"value": f"v{i}".encode() * 8, "key": f"k{i}".encode(), "partition": i % PARTITIONS} for i in range(RECORDS)
    ]
    produce(clusters["A"], topic, records)
    path = cluster_config(topic, mirror={"max_offsets_per_trigger": PER_BATCH})
    # --verbose: the batch log (one line per batch, where it was copied) on stderr.
    done = run("-m", "drkit.cli.app", "--verbose", "mirror", "-c", str(path), "--once", "-o", "json")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    # Every record, counted one by one on the target, in order per partition, naming its origin.
    source = read_all(clusters["A"], topic)
    target = read_all(clusters["B"], f"A.{topic}")
    assert len(source) == RECORDS
    assert_exact_copy(source, target)
    ranges = SyncTable(Drkit(load_config(path)).layout).ranges("A->B", [topic])
    audit = audit_syncs({p: rs for (t, p), rs in ranges.items() if t == topic}, source, target)
    assert (audit.described, audit.orphans, audit.duplicates) == (RECORDS, 0, 0)

    # Every batch was copied by Spark tasks in the workers' executors; none by the driver.
    [summary] = json.loads(done.stdout)
    assert summary["records"] == RECORDS and summary["batches"] >= RECORDS // PER_BATCH
    assert summary["driver_batches"] == 0
    assert summary["copy_executors"] and "driver" not in summary["copy_executors"], summary
    batches = [m for m in map(BATCH_LINE.search, done.stderr.splitlines()) if m and int(m[2])]
    assert sum(int(m[2]) for m in batches) == RECORDS, done.stderr[-3000:]
    for m in batches:
        assert m[3].startswith("copied by ") and "task(s)" in m[3], m[0]
        assert set(TASK_SITE.findall(m[3])) <= set(summary["copy_executors"]), m[0]
    print(json.dumps({"batches": [m[0] for m in batches], "summary": summary}, indent=1))
