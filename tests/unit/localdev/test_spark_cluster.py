"""The local Spark standalone cluster's layout and its PID checks (drkit.localdev.spark_cluster), without JVMs:
ports per daemon, the command lines that name each daemon's properties file, and signals only to a process
whose command line runs that daemon's main class with that file."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.errors import ClusterError, RefusedError
from drkit.localdev import spark_cluster as sc
from drkit.localdev.broker_process import PidRecord, ProcessFacts, Verdict, verdict


def test_ports_follow_the_base_port(tmp_path: Path) -> None:
    spark = sc.LocalSpark(tmp_path, base_port=40000)
    assert spark.master_url() == "spark://127.0.0.1:40000" and spark.webui_url() == "http://127.0.0.1:40001"
    assert spark._ports("worker-1") == (40010, 40011) and spark._ports("worker-2") == (40020, 40021)


def test_command_lines_name_the_daemons_class_master_and_own_properties(tmp_path: Path) -> None:
    spark = sc.LocalSpark(tmp_path, base_port=40000, cores=2, memory="768m")
    home = tmp_path / "worker-2"
    command = spark._command("worker-2", home)
    assert command[0].endswith("bin/spark-class") and command[1] == sc.WORKER_CLASS
    assert command[2] == "spark://127.0.0.1:40000"
    assert command[3:9] == ["--host", "127.0.0.1", "--port", "40020", "--webui-port", "40021"]
    assert command[command.index("--cores") + 1] == "2" and command[command.index("--memory") + 1] == "768m"
    assert command[-2:] == ["--properties-file", str(home / "daemon.properties")]
    master = spark._command("master", tmp_path / "master")
    assert master[1] == sc.MASTER_CLASS and "--cores" not in master


def test_the_daemons_environment_is_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_CONF_DIR", "/etc/spark")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--properties-file /x pyspark-shell")
    env = sc.LocalSpark(tmp_path, python="/venv/bin/python")._environment(tmp_path / "master")
    assert env["SPARK_CONF_DIR"] == str(tmp_path / "master") and "PYSPARK_SUBMIT_ARGS" not in env
    assert env["PYSPARK_PYTHON"] == "/venv/bin/python" and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert Path(env["SPARK_HOME"], "bin", "spark-class").exists()


def test_a_pid_file_is_trusted_only_for_that_daemon(tmp_path: Path) -> None:
    props = tmp_path / "worker-1" / "daemon.properties"
    record = PidRecord(4242, 99)
    worker = ProcessFacts(("java", "-cp", "x", sc.WORKER_CLASS, "--properties-file", str(props)), 99)
    assert verdict(record, worker, props, main_class=sc.WORKER_CLASS) is Verdict.OURS
    assert verdict(record, worker, props, main_class=sc.MASTER_CLASS) is Verdict.FOREIGN
    assert verdict(record, worker, tmp_path / "worker-2" / "daemon.properties", sc.WORKER_CLASS) is Verdict.FOREIGN
    assert verdict(PidRecord(4242, 98), worker, props, main_class=sc.WORKER_CLASS) is Verdict.FOREIGN


def test_a_pid_file_naming_another_process_is_refused_not_signalled(tmp_path: Path) -> None:
    import os

    home = tmp_path / "worker-1"
    home.mkdir()
    (home / "daemon.json").write_text('{"port": 40010, "webui_port": 40011}')
    facts = sc.process_facts(os.getpid())
    assert facts is not None
    (home / "daemon.pid").write_text(PidRecord(os.getpid(), facts.start_ticks).render())  # this very pytest
    spark = sc.LocalSpark(tmp_path)
    with pytest.raises(RefusedError, match="refusing to signal pid"):
        spark.stop("worker-1", kill=True)
    assert (home / "daemon.pid").exists()


def test_up_needs_a_worker_and_kill_needs_a_running_one(tmp_path: Path) -> None:
    spark = sc.LocalSpark(tmp_path)
    with pytest.raises(ClusterError, match="at least one worker"):
        spark.up(workers=0)
    with pytest.raises(ClusterError, match="worker-3 is not running"):
        spark.kill_worker(3)
    assert spark.down() == [] and spark.status().daemons == ()


def test_a_daemon_that_exited_on_its_own_is_named_with_its_exit_code_not_taken_for_another_process(
    tmp_path: Path,
) -> None:
    """A worker this object started that died by itself (say, out of memory) stays its child until asked, so
    its PID is never another process's by then: killing it says it exited, with its code and log."""
    import subprocess
    import sys
    import time

    home = tmp_path / "worker-1"
    home.mkdir()
    (home / "daemon.log").write_text("java.lang.OutOfMemoryError: Java heap space\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(52)"])
    facts = sc.process_facts(proc.pid)
    (home / "daemon.pid").write_text(PidRecord(proc.pid, facts.start_ticks if facts else None).render())
    spark = sc.LocalSpark(tmp_path)
    spark._started["worker-1"] = proc  # as _start records it
    while sc.process_facts(proc.pid) is not None:  # exited, not reaped: a zombie
        time.sleep(0.01)
    with pytest.raises(
        ClusterError, match=r"(?s)worker-1 \(pid \d+\) exited on its own with code 52; .*OutOfMemoryError"
    ):
        spark.kill_worker(1)


def test_a_daemon_this_object_started_is_its_own_even_mid_exec(tmp_path: Path) -> None:
    """``spark-class`` names the main class, then execs java: read during that exec, the command line may be
    empty (CI saw a starting worker refused as foreign, its cluster never up). A child not reaped yet cannot
    have handed its PID on: this object's own is its daemon; another object still checks the command line."""
    import subprocess
    import sys

    home = tmp_path / "worker-1"
    home.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        facts = sc.process_facts(proc.pid)
        (home / "daemon.pid").write_text(PidRecord(proc.pid, facts.start_ticks if facts else None).render())
        spark = sc.LocalSpark(tmp_path)
        with pytest.raises(RefusedError, match="names a process that is not this"):
            spark._pid("worker-1")
        spark._started["worker-1"] = proc  # as _start records it
        assert spark._pid("worker-1") == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_worker_is_found_on_the_port_it_bound(tmp_path: Path) -> None:
    # Spark takes the next port when its own is held (a TIME_WAIT of the worker it replaces): readiness and
    # status follow the worker's log, not the port it was asked for.
    spark = sc.LocalSpark(tmp_path, base_port=40000)
    home = tmp_path / "worker-1"
    home.mkdir()
    (home / "daemon.json").write_text('{"port": 40010, "webui_port": 40011}')
    assert spark._bound_port("worker-1") == 40010  # no log yet: the port it was given
    (home / "daemon.log").write_text(
        "WARN Utils: Service 'sparkWorker' could not bind on port 40010. Attempting port 40011.\n"
        "INFO Worker: Starting Spark worker 127.0.0.1:40011 with 1 cores, 1024.0 MiB RAM\n"
    )
    assert spark._bound_port("worker-1") == 40011
    assert spark.describe("worker-1").port == 40011


def test_a_secure_cluster_keeps_its_generated_secret_in_private_files_only(tmp_path: Path) -> None:
    spark = sc.LocalSpark(tmp_path, base_port=40000)
    properties = spark.daemon_properties()
    secret = spark.secret_file().read_text().strip()
    assert len(secret) == 64 and oct(spark.secret_file().stat().st_mode & 0o777) == "0o600"
    assert f"spark.authenticate.secret={secret}\n" in properties and "spark.authenticate=true\n" in properties
    assert "spark.network.crypto.enabled=true\n" in properties
    assert spark.daemon_properties() == properties  # generated once, kept across restarts
    assert secret not in " ".join(spark._command("worker-1", tmp_path / "worker-1"))
    assert "spark.authenticate" not in sc.LocalSpark(tmp_path / "open", secure=False).daemon_properties()
