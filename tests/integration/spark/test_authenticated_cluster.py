"""Spark's security on the standalone cluster (drkit.core.spark_security): the session's cluster authenticates
with its secret (tests/integration/spark/conftest.py). An application without the secret cannot join it; one
with it runs its tasks in the executors, and the Kafka clients' secrets reach them only as the file the driver
added (drkit.runtime.task_secrets): read there, narrowed to 0600, equal to what the driver sealed."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from drkit.localdev.spark_cluster import LocalSpark

#: A driver: argv = master, secret file ('' for none), 'secure' or 'open', the password to seal, the app's name.
APP = """
import json, os, sys
from drkit.config import SparkConfig
from drkit.runtime.spark import build_session
from drkit.runtime.task_secrets import TaskSecrets, settings, spark_files

master, secret_file, mode, password, name = sys.argv[1:6]
config = SparkConfig(
    master=master, driver_host="127.0.0.1", driver_bind_address="127.0.0.1", secure=mode == "secure",
    auth_secret_file=secret_file or None,
    conf={"spark.executor.memory": "512m", "spark.driver.memory": "1g"},
)
spark = build_session(config, name)
sealed = {"producer": {"bootstrap.servers": "b:1", "sasl.password": password}}
public, ref = TaskSecrets(spark_files(spark)).seal(sealed)

def probe(_):
    import hashlib, os, stat
    from pyspark import SparkFiles
    conf = settings(public["producer"], ref, "producer")
    mode = stat.S_IMODE(os.stat(SparkFiles.get(ref.name)).st_mode)
    yield {"pid": os.getpid(), "digest": hashlib.sha256(conf["sasl.password"].encode()).hexdigest(), "mode": mode}

rows = spark.sparkContext.parallelize(range(4), 4).mapPartitions(probe).collect()
print(json.dumps({"rows": rows, "driver": os.getpid(), "conf": dict(spark.sparkContext.getConf().getAll())}))
spark.stop()
"""


def run(script: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_an_application_with_the_secret_joins_and_its_tasks_read_the_sealed_secrets(
    spark_cluster: LocalSpark, tmp_path: Path
) -> None:
    script = tmp_path / "app.py"
    script.write_text(APP)
    password = f"pw-{secrets.token_hex(8)}"
    done = run(
        script, spark_cluster.master_url(), str(spark_cluster.secret_file()), "secure", password, "drkit-auth-member"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(answer["rows"]) == 4
    for row in answer["rows"]:
        assert row["pid"] != answer["driver"], "the task ran in the driver"
        assert row["digest"] == hashlib.sha256(password.encode()).hexdigest()
        assert row["mode"] == 0o600, oct(row["mode"])
    conf = answer["conf"]
    assert conf["spark.authenticate"] == "true" and conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.io.encryption.enabled"] == "true"
    assert "[spark] secure = false" not in done.stderr


def test_an_application_without_the_secret_cannot_join_and_says_security_is_off_once(
    spark_cluster: LocalSpark, tmp_path: Path
) -> None:
    script = tmp_path / "app.py"
    script.write_text(APP)
    done = run(script, spark_cluster.master_url(), "", "open", "pw-unused", "drkit-auth-intruder")
    assert done.returncode != 0, done.stdout[-2000:]
    assert '"rows"' not in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "[spark] secure = false" in line]
    assert len(warnings) == 1, warnings
    # The master never registered it (an application that joined is listed, running or completed).
    state = spark_cluster.master_state()
    assert state is not None
    names = {a.get("name") for a in [*state.get("activeapps", []), *state.get("completedapps", [])]}
    assert "drkit-auth-intruder" not in names, names
