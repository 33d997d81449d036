"""A drill's disaster signals only the broker it started: the session's real brokers pass the PID file's
check, and the same cluster's PID file edited to name an unrelated process is refused in one line (exit
3) while that process and the broker both survive."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from drkit.localdev.__main__ import main
from drkit.localdev.broker_process import BROKER_MAIN_CLASS, PidRecord, process_facts
from drkit.localdev.clusters import LocalKafka


def test_a_broker_started_by_local_kafka_is_recognised_by_its_pid_file(local_kafka: LocalKafka) -> None:
    home = Path(local_kafka.describe("A").home)
    record = PidRecord.parse((home / "kafka.pid").read_text())
    assert record is not None and record.start_ticks is not None, "the start time is recorded with the PID"
    facts = process_facts(record.pid)
    assert facts is not None and facts.start_ticks == record.start_ticks
    assert BROKER_MAIN_CLASS in facts.cmdline and str(home / "server.properties") in facts.cmdline
    assert local_kafka._broker_pid("A") == record.pid and local_kafka.describe("A").running


def test_an_edited_pid_file_is_refused_and_neither_process_is_signalled(
    local_kafka: LocalKafka, capsys: pytest.CaptureFixture[str]
) -> None:
    pid_file = Path(local_kafka.describe("A").home) / "kafka.pid"
    original = pid_file.read_text()
    broker = PidRecord.parse(original)
    assert broker is not None
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        facts = process_facts(sleeper.pid)
        while facts is None or facts.cmdline != ("sleep", "300"):  # until the fork has exec'd
            facts = process_facts(sleeper.pid)
        # Edited to name the sleeper, with its true start time: the command line gives it away.
        pid_file.write_text(PidRecord(sleeper.pid, facts.start_ticks).render())
        for command in ("kill", "stop"):
            code = main([command, "A", "--state-dir", str(local_kafka.state_dir)])
            err = capsys.readouterr().err.strip()
            assert code == 3, err
            assert err.count("\n") == 0 and f"cluster A: refusing to signal pid {sleeper.pid}" in err, err
        assert sleeper.poll() is None, "the unrelated process was signalled"
        # A stale file naming the broker's own PID with another start time (a PID reused): refused too.
        pid_file.write_text(PidRecord(broker.pid, (broker.start_ticks or 0) + 1).render())
        assert main(["kill", "A", "--state-dir", str(local_kafka.state_dir)]) == 3
        assert "started at another time" in capsys.readouterr().err
    finally:
        pid_file.write_text(original)
        sleeper.kill()
        sleeper.wait()
    os.kill(broker.pid, 0)
    assert local_kafka.describe("A").running, "the broker was signalled"
