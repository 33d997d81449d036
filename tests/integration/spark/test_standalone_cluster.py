"""drkit on a real Spark standalone cluster (a master and two workers on loopback, tests/integration/spark/
conftest.py): executors import the drkit the driver ships, and ``drkit mirror`` runs against ``spark://``."""

from __future__ import annotations

import json
import os
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
    done = run(str(script), spark_cluster.master_url())
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


def test_drkit_mirror_runs_against_the_standalone_master(
    spark_cluster: LocalSpark, cluster_config: Callable[..., Path], clusters: dict[str, str]
) -> None:
    topic = unique("standalone")
    create_topic(clusters["A"], topic, partitions=4)
    produce(
        clusters["A"],
        topic,
        [{"value": f"v{i}".encode(), "key": f"k{i}".encode(), "partition": i % 4} for i in range(2_000)],
    )
    path = cluster_config(topic)
    done = run("-m", "drkit.cli.app", "mirror", "-c", str(path), "--once")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    source = read_all(clusters["A"], topic)
    target = read_all(clusters["B"], f"A.{topic}")
    assert len(source) == 2_000
    assert_exact_copy(source, target)
    config = load_config(path)
    ranges = SyncTable(Drkit(config).layout).ranges("A->B", [topic])
    audit = audit_syncs({p: rs for (t, p), rs in ranges.items() if t == topic}, source, target)
    assert audit.described == 2_000 and audit.orphans == 0 and audit.duplicates == 0
