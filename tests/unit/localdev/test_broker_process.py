"""A drill signals only the broker it started: the PID file's check, pure (fakes) and on real processes
that are not brokers (no JVM)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.waiting import wait_until

from drkit.errors import RefusedError
from drkit.localdev.broker_process import (
    BROKER_MAIN_CLASS,
    PidRecord,
    ProcessFacts,
    Verdict,
    parse_ps,
    process_facts,
    refusal,
    verdict,
    wait_for_exec,
)
from drkit.localdev.clusters import LocalKafka

PROPS = Path("/state/A/server.properties")
BROKER = ("java", "-Xmx256m", "-cp", "/jars/*", "-Dlog4j2.configurationFile=/state/A/log4j2.yaml", BROKER_MAIN_CLASS)


@pytest.mark.parametrize(
    ("record", "facts", "expected"),
    [
        (PidRecord(42, 1000), ProcessFacts((*BROKER, str(PROPS)), 1000), Verdict.OURS),
        (None, ProcessFacts((*BROKER, str(PROPS)), 1000), Verdict.GONE),  # no PID file, or not a PID
        (PidRecord(42, 1000), None, Verdict.GONE),  # the process ended
        (PidRecord(42, 1000), ProcessFacts((*BROKER, str(PROPS)), 1001), Verdict.FOREIGN),  # PID reused
        (PidRecord(42, None), ProcessFacts((*BROKER, str(PROPS)), 1000), Verdict.FOREIGN),  # no start time
        (PidRecord(42, 1000), ProcessFacts(("sleep", "300"), 1000), Verdict.FOREIGN),  # edited to another process
        (PidRecord(42, 1000), ProcessFacts((*BROKER, "/state/B/server.properties"), 1000), Verdict.FOREIGN),
        (PidRecord(42, 1000), ProcessFacts(("java", "Other", str(PROPS)), 1000), Verdict.FOREIGN),
    ],
)
def test_only_the_broker_started_with_this_clusters_properties_at_the_recorded_time_is_ours(
    record: PidRecord | None, facts: ProcessFacts | None, expected: Verdict
) -> None:
    assert verdict(record, facts, PROPS) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42\n1000\n", PidRecord(42, 1000)),
        ("42\n", PidRecord(42, None)),
        ("", None),
        ("0\n5\n", None),
        ("-4\n", None),
        ("42 1000 7", None),
        ("\uff14\uff12\n", None),  # non-ASCII digits
        ("pid\n", None),
    ],
)
def test_pid_files_parse_strictly(text: str, expected: PidRecord | None) -> None:
    assert PidRecord.parse(text) == expected


def test_a_pid_file_round_trips() -> None:
    assert PidRecord.parse(PidRecord(7, 99).render()) == PidRecord(7, 99)


def test_each_refusal_is_one_line_naming_the_cluster_the_pid_and_why() -> None:
    pid_file = Path("/state/A/kafka.pid")
    lines = [
        refusal("A", pid_file, PidRecord(42, None), ProcessFacts(("sleep",), 1), PROPS),
        refusal("A", pid_file, PidRecord(42, 5), ProcessFacts(("sleep",), 1), PROPS),
        refusal("A", pid_file, PidRecord(42, 1), ProcessFacts(("sleep",), 1), PROPS),
    ]
    for line in lines:
        assert "\n" not in line and line.startswith("cluster A: refusing to signal pid 42") and str(pid_file) in line
    assert "no start time" in lines[0] and "another time" in lines[1] and str(PROPS) in lines[2]


def test_the_facts_of_a_live_process_come_from_proc_and_an_ended_one_has_none() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        # /proc may still show the forked parent's command line for a moment under load (seen once in a busy
        # unit run): wait for the exec, then the facts must hold and stay the same.
        wanted = ("-c", "import sys; sys.stdin.read()")
        wait_until(lambda: (f := process_facts(proc.pid)) is not None and f.cmdline[1:] == wanted, 10, "the exec")
        facts = process_facts(proc.pid)
        assert facts is not None and facts.cmdline[1:] == wanted
        assert facts.start_ticks > 0 and process_facts(proc.pid) == facts
    finally:
        proc.communicate(b"")
    assert process_facts(proc.pid) is None


@pytest.mark.parametrize("with_start_time", [True, False])
def test_a_pid_file_naming_another_process_is_refused_and_that_process_survives(
    tmp_path: Path, with_start_time: bool
) -> None:
    """A stale or edited PID file naming a live process (here `sleep 300`, started at the recorded time or
    not) is never signalled: stop, freeze, thaw and down refuse in one line; status calls the cluster stopped."""
    kafka = LocalKafka(tmp_path, 39092)
    kafka._prepare("A", 0)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        facts = process_facts(sleeper.pid)
        while facts is None or facts.cmdline != ("sleep", "300"):  # until the fork has exec'd
            facts = process_facts(sleeper.pid)
        start = facts.start_ticks if with_start_time else None
        (tmp_path / "A" / "kafka.pid").write_text(PidRecord(sleeper.pid, start).render())
        for act in (lambda: kafka.stop("A", kill=True), lambda: kafka.freeze("A"), kafka.down):
            with pytest.raises(RefusedError, match=rf"^cluster A: refusing to signal pid {sleeper.pid}: ") as raised:
                act()
            assert "\n" not in str(raised.value)
        with pytest.raises(RefusedError):
            kafka.thaw("A")
        assert not kafka.describe("A").running
        assert sleeper.poll() is None, "the unrelated process was signalled"
        os.kill(sleeper.pid, 0)
        state = Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert process_facts(sleeper.pid) == facts and state != "T", "the unrelated process was stopped"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_pid_file_of_a_process_that_ended_is_nothing_to_signal(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path, 39092)
    kafka._prepare("A", 0)
    ended = subprocess.Popen(["true"])
    ended.wait()
    (tmp_path / "A" / "kafka.pid").write_text(PidRecord(ended.pid, 1).render())
    kafka.stop("A", kill=True)
    assert not (tmp_path / "A" / "kafka.pid").exists()


def test_without_proc_the_facts_come_from_ps() -> None:
    line = "S    Wed Nov 25 11:40:22 2026 java -cp /jars/* kafka.Kafka /state/A/server.properties\n"
    facts = parse_ps(line)
    assert facts is not None and facts.cmdline[-2:] == (BROKER_MAIN_CLASS, "/state/A/server.properties")
    assert facts.start_ticks == 1795606822  # the start second: another start of the same PID differs
    assert parse_ps("Z    Wed Nov 25 11:40:22 2026 java\n") is None  # a zombie has ended
    assert parse_ps("") is None and parse_ps("S not a date at all here ok") is None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_started_process_is_waited_for_until_it_runs_its_program_and_keeps_its_start_time() -> None:
    """Before its exec a child is a copy of its parent: its PID file, read then, names no broker (CI once saw
    wait_ready give up on a broker that was starting). Then, as Spark's ``spark-class``, a launcher script
    names the main class before it execs the program: a reader during that exec may find an empty command
    line (CI saw a local Spark worker refused as foreign). The child here waits before each exec."""
    script = "sleep 0.3; exec sleep 30"
    code = f"import os, time; time.sleep(0.3); os.execvp('sh', ['sh', '-c', {script!r}, 'sh', '30'])"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        before = process_facts(child.pid)
        assert before is not None and "30" not in before.cmdline
        facts = wait_for_exec(child.pid, ["30"], program="sleep")
        assert facts is not None and facts.cmdline == ("sleep", "30") and facts.start_ticks == before.start_ticks
    finally:
        child.kill()
        child.wait()
    assert wait_for_exec(child.pid, ["30"], program="sleep") is None  # gone: no wait
