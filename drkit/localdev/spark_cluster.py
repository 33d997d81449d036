"""A local Spark standalone cluster on 127.0.0.1: one master and N workers, each a JVM of its own.

The daemons come from the pyspark package (``$SPARK_HOME/bin/spark-class`` with SPARK_HOME the pyspark
folder): nothing else to install. Each daemon has a folder under the state folder (``master/``,
``worker-1/``...) with its properties file (named on its command line, which is how its PID file is
checked before any signal: drkit.localdev.broker_process), its log, its PID file and its ports
(``daemon.json``). The master listens on ``base_port`` (web UI one above); worker ``i`` on
``base_port + 10*i`` (web UI one above). Workers run their executors with this machine's Python
(``PYSPARK_PYTHON``: the venv's), and get the driver's jars from the driver (``spark.jars``).

Secure by default, like a production cluster drkit expects (drkit.core.spark_security): the daemons
authenticate and encrypt their RPC with a secret generated once into ``auth-secret`` (mode 0600) under the
state folder, which a driver names as ``[spark] auth_secret_file``; the secret is in each daemon's
properties file (0600), never on a command line. ``secure=False`` (``--insecure``) starts an open cluster.

Invariant: a cluster is ready only when its master, asked on its JSON endpoint, lists every one of its
workers ALIVE; killing a worker (a lost machine) kills the executors it launched and their Python
workers with it (its process group and every descendant), and ``down`` leaves no JVM behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from drkit.core.spark_security import SECRET_SETTING, SECURE_SETTINGS
from drkit.errors import ClusterError, DrkitError, RefusedError
from drkit.localdev.broker_process import PidRecord, Verdict, process_facts, verdict, wait_for_exec

DEFAULT_STATE = Path(".drkit/local-spark")
DEFAULT_BASE_PORT = 17077
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER = "master"
MAIN_CLASSES = frozenset({MASTER_CLASS, WORKER_CLASS})


@dataclass(frozen=True)
class Daemon:
    """One daemon of the cluster as found on disk and in the process table."""

    name: str
    port: int
    webui_port: int
    pid: int | None
    running: bool
    home: str


@dataclass(frozen=True)
class ClusterStatus:
    master_url: str
    webui_url: str
    #: Workers the master lists ALIVE (None: the master did not answer).
    alive_workers: int | None
    daemons: tuple[Daemon, ...]


def spark_home() -> Path:
    """The pyspark package's folder: a Spark distribution (bin/, jars/) as pip installs it."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def worker_name(index: int) -> str:
    return f"worker-{index}"


class LocalSpark:
    """A standalone cluster under one state folder."""

    def __init__(
        self,
        state_dir: Path = DEFAULT_STATE,
        base_port: int = DEFAULT_BASE_PORT,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "512m",
        python: str | None = None,
        secure: bool = True,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.base_port = base_port
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.python = python or sys.executable
        self.secure = secure
        #: The daemons this object started, so one that exits on its own is told apart from a PID file that
        #: names another process: a child is reaped only when asked (``poll``), so its PID cannot be reused by
        #: then (with 32,768 PIDs and JVMs making threads, a reaped daemon's PID is taken within minutes).
        self._started: dict[str, subprocess.Popen[bytes]] = {}

    # -- where things are ------------------------------------------------------------------------------

    def _home(self, name: str) -> Path:
        return self.state_dir / name

    def _recorded(self, name: str) -> dict[str, Any] | None:
        path = self._home(name) / "daemon.json"
        return dict(json.loads(path.read_text())) if path.exists() else None

    def _ports(self, name: str) -> tuple[int, int]:
        recorded = self._recorded(name)
        if recorded is not None:
            return int(recorded["port"]), int(recorded["webui_port"])
        offset = 0 if name == MASTER else 10 * int(name.removeprefix("worker-"))
        return self.base_port + offset, self.base_port + offset + 1

    def _bound_port(self, name: str) -> int:
        """The port the worker runs on: Spark moves to the next port when its own is taken (a connection of
        the previous worker in TIME_WAIT), and says so in its log; the recorded port otherwise."""
        found = None
        with contextlib.suppress(OSError), (self._home(name) / "daemon.log").open(errors="replace") as log:
            for line in log:
                match = _WORKER_STARTED.search(line)
                if match:
                    found = int(match[1])
        return found if found is not None else self._ports(name)[0]

    def secret_file(self) -> Path:
        """The file holding the cluster's Spark secret (a driver's ``[spark] auth_secret_file``)."""
        return self.state_dir / "auth-secret"

    def _secret(self) -> str:
        """The cluster's secret, generated on first use (0600): kept across restarts, so running drivers still fit."""
        path = self.secret_file()
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_private(path, secrets.token_hex(32) + "\n")
        return path.read_text().strip()

    def daemon_properties(self) -> str:
        """A daemon's properties file: the cluster's settings, and its security with the secret when secure."""
        if not self.secure:
            return _PROPERTIES
        security = {**SECURE_SETTINGS, SECRET_SETTING: self._secret()}
        return _PROPERTIES + "".join(f"{k}={v}\n" for k, v in security.items())

    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self._ports(MASTER)[0]}"

    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self._ports(MASTER)[1]}"

    def _names(self) -> list[str]:
        if not self.state_dir.exists():
            return []
        found = [p.name for p in self.state_dir.iterdir() if (p / "daemon.json").exists()]
        workers = sorted((n for n in found if n.startswith("worker-")), key=lambda n: int(n.removeprefix("worker-")))
        return ([MASTER] if MASTER in found else []) + workers

    def _pid(self, name: str) -> int | None:
        """The daemon's PID when its PID file names it (main class, properties file, start time); None when
        nothing runs; refused when the file names a live process that is not this daemon."""
        home = self._home(name)
        try:
            record = PidRecord.parse((home / "daemon.pid").read_text())
        except FileNotFoundError:
            return None
        proc = self._started.get(name)
        if record is not None and proc is not None and proc.pid == record.pid and proc.poll() is None:
            # This object's own child, not reaped yet: its PID cannot name another process.
            return record.pid
        facts = process_facts(record.pid) if record is not None else None
        main = MASTER_CLASS if name == MASTER else WORKER_CLASS
        found = verdict(record, facts, home / "daemon.properties", main_class=main)
        if found is Verdict.OURS and record is not None:
            return record.pid
        if found is Verdict.FOREIGN and record is not None:
            self._raise_if_exited(name)
            raise RefusedError(
                f"local Spark {name}: refusing to signal pid {record.pid}: its PID file {home / 'daemon.pid'} "
                f"names a process that is not this {main}; check it yourself and delete the file"
            )
        return None

    def _raise_if_exited(self, name: str) -> None:
        """Name a daemon this object started that exited on its own, with its exit code and log's tail."""
        proc = self._started.get(name)
        if proc is not None and proc.poll() is not None:
            raise ClusterError(
                f"local Spark {name} (pid {proc.pid}) exited on its own with code {proc.returncode}; "
                f"log tail:\n{self._log_tail(name)}"
            )

    def describe(self, name: str) -> Daemon:
        port, webui = self._ports(name)
        port = port if name == MASTER else self._bound_port(name)
        pid = self._pid(name)
        return Daemon(name, port, webui, pid, pid is not None, str(self._home(name)))

    # -- master's view ---------------------------------------------------------------------------------

    def master_state(self, timeout: float = 3.0) -> dict[str, Any] | None:
        """The master's JSON status (``/json/``), or None when it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui_url()}/json/", timeout=timeout) as response:  # noqa: S310
                return dict(json.loads(response.read()))
        except (OSError, ValueError):
            return None

    def alive_worker_ports(self) -> set[int] | None:
        state = self.master_state()
        if state is None:
            return None
        return {int(w["port"]) for w in state.get("workers", []) if w.get("state") == "ALIVE"}

    def status(self) -> ClusterStatus:
        alive = self.alive_worker_ports()
        daemons = tuple(self.describe(n) for n in self._names())
        return ClusterStatus(self.master_url(), self.webui_url(), None if alive is None else len(alive), daemons)

    # -- start and stop --------------------------------------------------------------------------------

    def up(self, workers: int = 2, timeout: float = 120.0) -> ClusterStatus:
        """Start the master and workers 1..N that are not running; wait until the master lists them ALIVE."""
        if workers < 1:
            raise ClusterError("a local Spark cluster needs at least one worker")
        names = [MASTER, *(worker_name(i) for i in range(1, workers + 1))]
        for name in names:
            if self._pid(name) is None:
                self._start(name)
        deadline = time.monotonic() + timeout
        while True:
            wanted = {self._bound_port(n) for n in names[1:]}
            for name in names:
                if self._pid(name) is None:
                    raise ClusterError(f"local Spark {name} exited; log tail:\n{self._log_tail(name)}")
            alive = self.alive_worker_ports() or set()
            if wanted <= alive:
                return self.status()
            if time.monotonic() > deadline:
                missing = sorted(wanted - alive)
                raise ClusterError(
                    f"local Spark cluster at {self.master_url()} not ready in {timeout:g}s: workers on ports "
                    f"{missing} not ALIVE; logs under {self.state_dir}"
                )
            time.sleep(0.5)

    def _environment(self, home: Path) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("SPARK_CONF_DIR", "SPARK_MASTER_HOST", "SPARK_WORKER_OPTS", "PYSPARK_SUBMIT_ARGS"):
            env.pop(key, None)
        env.update(
            SPARK_HOME=str(spark_home()),
            # No spark-env.sh or spark-defaults.conf of the machine's: the daemon's own folder.
            SPARK_CONF_DIR=str(home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            PYSPARK_PYTHON=self.python,
        )
        return env

    def _command(self, name: str, home: Path) -> list[str]:
        port, webui = self._ports(name)
        spark_class = str(spark_home() / "bin" / "spark-class")
        common = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui)]
        properties = ["--properties-file", str(home / "daemon.properties")]
        if name == MASTER:
            return [spark_class, MASTER_CLASS, *common, *properties]
        worker = [self.master_url(), *common, "--cores", str(self.cores), "--memory", self.memory]
        return [spark_class, WORKER_CLASS, *worker, "--work-dir", str(home / "work"), *properties]

    def _start(self, name: str) -> None:
        home = self._home(name)
        home.mkdir(parents=True, exist_ok=True)
        port, webui = self._ports(name)
        for p in (port, webui):
            _ensure_free(name, p)
        (home / "daemon.json").write_text(json.dumps({"port": port, "webui_port": webui}) + "\n")
        with contextlib.suppress(FileNotFoundError):  # the log holds this start's lines only (its bound port)
            (home / "daemon.log").replace(home / "daemon.log.1")
        _write_private(home / "daemon.properties", self.daemon_properties())
        log = (home / "daemon.log").open("ab")
        # spark-class execs java: the PID is the JVM's. Its own session: a worker's executors share its
        # process group, so a killed worker takes them along (as a lost machine would).
        proc = subprocess.Popen(
            self._command(name, home),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=home,
            env=self._environment(home),
        )
        log.close()
        try:
            facts = wait_for_exec(proc.pid, MAIN_CLASSES, timeout=30.0)  # spark-class execs java
        except BaseException:
            proc.kill()  # no PID file yet: nothing else would ever stop it
            raise
        (home / "daemon.pid").write_text(PidRecord(proc.pid, facts.start_ticks if facts else None).render())
        self._started[name] = proc

    def stop(self, name: str, kill: bool = False, timeout: float = 30.0) -> bool:
        """Stop one daemon (SIGTERM, or SIGKILL: a lost machine) with every process of its group; True when
        it was running."""
        pid = self._pid(name)
        if pid is not None:
            # Python workers put themselves in groups of their own: a lost machine takes them too.
            tree = descendants(pid) if kill else []
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL if kill else signal.SIGTERM)
            for child in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
            deadline = time.monotonic() + timeout
            while _group_alive(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.2)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # executors a stopped worker left behind
            while _group_alive(pid):
                _reap(pid)
                time.sleep(0.1)
        (self._home(name) / "daemon.pid").unlink(missing_ok=True)
        self._started.pop(name, None)
        return pid is not None

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` and its executors at once."""
        name = worker_name(index)
        if self._pid(name) is None:
            self._raise_if_exited(name)
            raise ClusterError(f"local Spark {name} is not running: nothing to kill")
        self.stop(name, kill=True)

    def down(self) -> list[str]:
        """Stop the workers, then the master; the names of those that were running."""
        names = self._names()
        workers = [n for n in names if n != MASTER]
        stopped = [n for n in workers if self.stop(n)]
        if MASTER in names and self.stop(MASTER):
            stopped.append(MASTER)
        return stopped

    def _log_tail(self, name: str) -> str:
        path = self._home(name) / "daemon.log"
        return path.read_text(errors="replace")[-800:] if path.exists() else "(no log)"


#: A worker's log line naming the port it bound.
_WORKER_STARTED = re.compile(r"Starting Spark worker [^\s:]+:(\d+) ")

#: Daemon settings: no REST submission server, executors' folders cleaned when their application ends.
_PROPERTIES = """\
spark.master.rest.enabled=false
spark.worker.cleanup.enabled=true
spark.worker.cleanup.appDataTtl=3600
spark.ui.showConsoleProgress=false
"""


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by this user only from its creation (a secret is never world-readable)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def descendants(pid: int) -> list[int]:
    """The live descendants of ``pid`` (children first), from ``/proc``: none where there is no ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found.extend(kids)
        todo.extend(kids)
    return found


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _ensure_free(name: str, port: int) -> None:
    """Refuse a port another process listens on (the daemon would fail to bind it, and readiness would ask
    the other process). A port that only has connections in TIME_WAIT (a daemon just stopped) is free: the
    JVM binds with SO_REUSEADDR."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            raise ClusterError(
                f"local Spark {name}: port 127.0.0.1:{port} is already in use by another process; "
                "pick other ports with --base-port"
            )


def main(argv: list[str] | None = None) -> int:
    """``scripts/local-spark up|down|status|kill``."""
    parser = argparse.ArgumentParser(prog="local-spark", description="A local Spark standalone cluster.")
    parser.add_argument("command", choices=["up", "down", "status", "kill"])
    parser.add_argument("worker", nargs="?", type=int, help="kill: the worker's number (1..N)")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores each worker offers")
    parser.add_argument("--memory", default="1g", help="memory each worker offers its executors")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="up: no authentication or encryption (drivers set [spark] secure = false)",
    )
    args = parser.parse_args(argv)
    spark = LocalSpark(args.state_dir, args.base_port, args.cores, args.memory, secure=not args.insecure)
    try:
        if args.command == "up":
            status = spark.up(args.workers)
        elif args.command == "down":
            stopped = spark.down()
            print(json.dumps({"stopped": stopped}) if args.json else f"stopped: {', '.join(stopped) or 'none'}")
            return 0
        elif args.command == "kill":
            if args.worker is None:
                parser.error("kill needs a worker number")
            spark.kill_worker(args.worker)
            status = spark.status()
        else:
            status = spark.status()
    except DrkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(asdict(status), indent=2))
    else:
        print(f"master\t{status.master_url}\tUI {status.webui_url}\talive workers: {status.alive_workers}")
        if spark.secure:
            print(f"secret\t{spark.secret_file()}\t(a driver's [spark] auth_secret_file)")
        for d in status.daemons:
            state = f"running (pid {d.pid})" if d.running else "stopped"
            print(f"{d.name}\t127.0.0.1:{d.port}\t{state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
