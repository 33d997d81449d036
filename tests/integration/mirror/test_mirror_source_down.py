"""A mirror whose source cluster does not answer: the process's stderr holds drkit's one line and no Spark
noise (no start-up banner, no JVM notice, no ERROR line, no Java or Py4J trace), then the log files it wrote
to (the JVM's output is in the state root's ``logs/spark.log``), and it exits 4 (a cluster error).

Once, Spark's ERROR lines and the failed query's Java stack trace came before drkit's line. The source
here is an address nobody listens on; the target is the session's cluster B. The client timeouts are
short so the test waits seconds, not Spark's default minutes, for the source to be declared lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.kafka_io import unique

#: Nothing listens on port 1: connections are refused at once.
NOBODY = "127.0.0.1:1"
#: A line the JVM itself prints on start (not log4j; no setting of Spark's removes it): in the Spark log.
JVM_NOTICE = "WARNING: Using incubator modules"


def test_a_mirror_whose_source_is_down_prints_only_drkits_line(clusters: dict[str, str], tmp_path: Path) -> None:
    topic = unique("nosource")
    toml = tmp_path / "drkit.toml"
    timeouts = "".join(
        f'"{k}" = "2000"\n'
        for k in ("default.api.timeout.ms", "request.timeout.ms", "socket.connection.setup.timeout.max.ms")
    )
    toml.write_text(
        f'[state]\nroot = {json.dumps(str(tmp_path / "state"))}\n\n[spark]\nmaster = "local[1]"\n'
        f'[clusters.A]\nbootstrap_servers = "{NOBODY}"\n\n[clusters.B]\nbootstrap_servers = "{clusters["B"]}"\n\n'
        f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        f"[flows.heartbeats]\ninterval_seconds = 0\n[flows.mirror.consumer]\n{timeouts}"
    )
    done = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", "mirror", "-c", str(toml), "--once"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 4, done.stderr[-3000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, lines
    assert f"source cluster A ({NOBODY}) cannot be read" in errors[0], errors[0]
    assert "drkit failover --flow 'A->B'" in errors[0]
    # Then the logs it wrote to: the Spark log holds what the JVM said.
    spark_log = tmp_path / "state" / "logs" / "spark.log"
    assert f"logs: {spark_log}" in lines, lines
    jvm = spark_log.read_text()
    assert JVM_NOTICE in jvm or " WARN NativeCodeLoader" in jvm, jvm[-2000:]
    # Everything else is drkit's own warnings about the flow (its topology follower saw A down).
    noise = [ln for ln in lines if ln not in errors and not ln.startswith(("flow A->B: ", "logs: "))]
    assert noise == [], "\n".join(noise[:30])
    assert done.stdout == ""
