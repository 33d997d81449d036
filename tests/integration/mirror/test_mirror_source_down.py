"""A mirror whose source cluster does not answer: it says so in one line within seconds and exits 4 (a
cluster error), before any Spark JVM starts: it probes its flow's clusters first (drkit.core.reach), where
Spark's own clients took minutes (3.5 min measured for ``--once``) and printed Spark's ERROR lines and a
Java stack trace before drkit's line. The source here is an address nobody listens on; the target is the
session's cluster B.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.kafka_io import unique

#: Nothing listens on port 1: connections are refused at once.
NOBODY = "127.0.0.1:1"
#: A line the JVM itself prints on start (not log4j; no setting of Spark's removes it).
JVM_NOTICE = "WARNING: Using incubator modules"


def test_a_mirror_whose_source_is_down_prints_only_drkits_line(clusters: dict[str, str], tmp_path: Path) -> None:
    topic = unique("nosource")
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f'[state]\nroot = {json.dumps(str(tmp_path / "state"))}\n\n[spark]\nmaster = "local[1]"\n'
        f'[clusters.A]\nbootstrap_servers = "{NOBODY}"\n\n[clusters.B]\nbootstrap_servers = "{clusters["B"]}"\n\n'
        f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        "[flows.heartbeats]\ninterval_seconds = 0\n"  # Spark's client timeouts left at their defaults (minutes)
    )
    done = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", "mirror", "-c", str(toml), "--once"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4, done.stderr[-3000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, lines
    assert errors[0].startswith(
        f"error: mirror A->B: cluster A is unreachable: every bootstrap server refused the connection ({NOBODY})"
    ), errors[0]
    assert "nothing was copied" in errors[0] and "drkit failover --flow 'A->B'" in errors[0], errors[0]
    assert "cluster B" not in errors[0]  # B answered
    # No JVM was started: no Spark log, and nothing but drkit's line and where the libraries' lines went.
    assert not (tmp_path / "state" / "logs" / "spark.log").exists()
    noise = [ln for ln in lines if ln not in errors and not ln.startswith("logs: ")]
    assert noise == [], "\n".join(noise[:30])
    assert JVM_NOTICE not in done.stderr
    assert done.stdout == ""
