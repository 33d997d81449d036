"""Start, stop and inspect local single-node Apache Kafka clusters (KRaft combined mode).

Each cluster is one JVM that is both broker and controller, listening on 127.0.0.1 only, with
its data, log and PID file under ``<state>/<alias>/``. The broker comes from Maven Central (see
drkit.runtime.artifacts) and runs with a small heap, because the machine has 2 cores.

Cluster ``i`` (0-based) of a set gets broker port ``base_port + 10*i`` and controller port one
above it: with the default base 19092, A is 127.0.0.1:19092 and B is 127.0.0.1:19102. The ports a
cluster was made with are read back from its ``server.properties``, so ``status``, ``down`` and
``start`` need no ``--base-port``; ``up`` refuses ports that differ from a cluster's recorded ones
(its KRaft metadata names its controller's address) and ports another process already holds, and a
cluster is ready only when the broker that answers on its port has its own cluster id.

A cluster given a :class:`~drkit.localdev.security.Security` is secure instead (TLS from a local CA,
SASL or mutual TLS, the StandardAuthorizer; see drkit.localdev.security); the others are PLAINTEXT.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from drkit.errors import ClusterError, RefusedError
from drkit.localdev import security as sec
from drkit.localdev.broker_process import (
    BROKER_MAIN_CLASS,
    PidRecord,
    Verdict,
    process_facts,
    refusal,
    verdict,
    wait_for_exec,
)
from drkit.runtime.artifacts import kafka_broker_libs

DEFAULT_STATE = Path(".drkit/local-kafka")
DEFAULT_BASE_PORT = 19092
READY_TOPIC = "_drkit.readiness"

_ROLES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{cport}
"""
_PLAINTEXT_LISTENERS = """\
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
"""
_STORAGE = """\
log.dirs={data}
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=2
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=2
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.cleaner.backoff.ms=500
log.retention.check.interval.ms=1000
log.initial.task.delay.ms=500
"""


@dataclass(frozen=True)
class LocalCluster:
    alias: str
    bootstrap_servers: str
    port: int
    controller_port: int
    pid: int | None
    running: bool
    home: str


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); look at its state.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


class LocalKafka:
    """A set of local clusters under one state folder."""

    def __init__(
        self,
        state_dir: Path = DEFAULT_STATE,
        base_port: int = DEFAULT_BASE_PORT,
        heap: str = "512m",
        extra_properties: dict[str, str] | None = None,
        security: dict[str, sec.Security] | None = None,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.base_port = base_port
        self.heap = heap
        #: Broker properties added to every cluster's server.properties (e.g. an authorizer, for tests).
        self.extra_properties = dict(extra_properties or {})
        #: Secure clusters by alias (the others are PLAINTEXT); one local CA for all of them.
        self.security = dict(security or {})
        self.ca = sec.LocalCA(self.state_dir / "ca")

    def _home(self, alias: str) -> Path:
        return self.state_dir / alias

    def _ports(self, index: int) -> tuple[int, int]:
        port = self.base_port + 10 * index
        return port, port + 1

    def _recorded_ports(self, alias: str) -> tuple[int, int] | None:
        """The (broker, controller) ports in the cluster's server.properties, if it was prepared."""
        props = self._home(alias) / "server.properties"
        if not props.exists():
            return None
        match = _LISTENERS.search(props.read_text())
        return (int(match["port"]), int(match["cport"])) if match else None

    def _cluster_id(self, alias: str) -> str | None:
        """The id the cluster's storage was formatted with (None before the first start)."""
        meta = self._home(alias) / "data" / "meta.properties"
        if not meta.exists():
            return None
        for line in meta.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cluster.id":
                return value.strip()
        return None

    def _pid(self, alias: str) -> int | None:
        """The PID of the cluster's running broker: None when its PID file names no live process, or one
        that is not this cluster's broker (drkit.localdev.broker_process)."""
        try:
            return self._broker_pid(alias)
        except RefusedError:
            return None

    def _broker_pid(self, alias: str) -> int | None:
        """The PID to signal: the cluster's running broker, verified; None when nothing runs; refused when
        the PID file names a live process that is not this cluster's broker (never signalled)."""
        pid_file = self._home(alias) / "kafka.pid"
        try:
            record = PidRecord.parse(pid_file.read_text())
        except FileNotFoundError:
            return None
        facts = process_facts(record.pid) if record is not None else None
        props = self._home(alias) / "server.properties"
        found = verdict(record, facts, props)
        if found is Verdict.OURS and record is not None:
            return record.pid
        if found is Verdict.FOREIGN and record is not None:
            raise RefusedError(refusal(alias, pid_file, record, facts, props))
        return None

    def _aliases(self) -> list[str]:
        if not self.state_dir.exists():
            return []
        return sorted(p.name for p in self.state_dir.iterdir() if (p / "cluster.index").exists())

    def describe(self, alias: str) -> LocalCluster:
        home = self._home(alias)
        # The recorded ports, not this instance's base port: `status` after `up --base-port N`.
        port, cport = self._recorded_ports(alias) or self._ports(int((home / "cluster.index").read_text()))
        pid = self._pid(alias)
        return LocalCluster(alias, f"127.0.0.1:{port}", port, cport, pid, pid is not None, str(home))

    def status(self) -> list[LocalCluster]:
        return [self.describe(a) for a in self._aliases()]

    def up(self, aliases: list[str], timeout: float = 120.0) -> list[LocalCluster]:
        """Start the clusters that are not running, then wait until each serves produce/consume."""
        libs = kafka_broker_libs()
        for index, alias in enumerate(aliases):
            self._prepare(alias, index)
            if self._pid(alias) is None:
                self._start(alias, libs)
        deadline = time.monotonic() + timeout
        for alias in aliases:
            self.wait_ready(alias, deadline)
        return [self.describe(a) for a in aliases]

    def _prepare(self, alias: str, index: int) -> None:
        home = self._home(alias)
        port, cport = self._ports(index)
        recorded = self._recorded_ports(alias)
        if recorded is not None and recorded != (port, cport):
            # A running broker keeps its ports; a formatted one has its controller's address in its
            # KRaft metadata, so moving it would not start. Say so instead of "running" on a port
            # that is not this cluster's.
            running = self._pid(alias) is not None
            if running or self._cluster_id(alias) is not None:
                state = "is running" if running else "was created"
                raise ClusterError(
                    f"cluster {alias} {state} on 127.0.0.1:{recorded[0]}, not 127.0.0.1:{port}: use "
                    f"--base-port {recorded[0] - 10 * index} or stop it and delete {home} "
                    "(scripts/local-kafka down)"
                )
        if self._pid(alias) is not None:
            return  # running with these ports: leave its files alone
        home.mkdir(parents=True, exist_ok=True)
        (home / "cluster.index").write_text(str(index))
        extra = "".join(f"{k}={v}\n" for k, v in sorted(self.extra_properties.items()))
        security = self._security(alias)
        if security is None:
            listeners = _PLAINTEXT_LISTENERS.format(port=port, cport=cport)
        else:
            broker = f"broker-{alias}"
            keystore = sec.broker_keystore(self.ca.ensure(), home / "tls", broker)
            listeners = sec.listener_properties(
                security, port, cport, self.ca.cert, keystore, broker, self.admin_password(alias)
            )
        # Owner-only: a secure cluster's listener JAAS configs hold the admin's and the users' passwords.
        _write_private(
            home / "server.properties",
            _ROLES.format(cport=cport) + listeners + _STORAGE.format(data=home / "data") + extra,
        )
        log4j = resources.files("drkit.localdev").joinpath("log4j2.yaml").read_text()
        (home / "log4j2.yaml").write_text(log4j)

    def _security(self, alias: str) -> sec.Security | None:
        """The cluster's security: as given to this instance (and then recorded in its folder, so a later
        ``status``, ``start`` or ``client`` knows it), else as recorded; None for a PLAINTEXT cluster."""
        recorded = self._home(alias) / "security.json"
        given = self.security.get(alias)
        if given is not None:
            recorded.parent.mkdir(parents=True, exist_ok=True)
            recorded.touch(0o600)
            recorded.write_text(sec.dump(given))
            return given
        return sec.load(recorded.read_text()) if recorded.exists() else None

    def admin_password(self, alias: str) -> str:
        """The SASL password of a secure cluster's admin principal (made once, kept in its folder)."""
        path = self._home(alias) / "admin.password"
        if not path.exists():
            _write_private(path, secrets.token_urlsafe(18))
        return path.read_text().strip()

    def _scram_arguments(self, alias: str) -> list[str]:
        security = self._security(alias)
        return [] if security is None else sec.scram_arguments(security, self.admin_password(alias))

    def client_properties(self, alias: str, principal: str = sec.ADMIN) -> dict[str, str]:
        """librdkafka properties that reach cluster ``alias`` as ``principal`` (a SASL user or a certificate
        CN of its Security; the admin by default); none for a PLAINTEXT cluster."""
        security = self._security(alias)
        if security is None:
            return {}
        password = self.admin_password(alias) if principal == sec.ADMIN else security.users.get(principal)
        return sec.client_properties(security, self.ca.ensure(), self._home(alias) / "tls", principal, password)

    def _java(self, libs: Path, *args: str, heap: str = "256m") -> list[str]:
        return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-cp", f"{libs}/*", *args]

    def _start(self, alias: str, libs: Path) -> None:
        home = self._home(alias)
        props = home / "server.properties"
        for port in self._recorded_ports(alias) or ():
            _ensure_free(alias, port)
        if not (home / "data" / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            tool = ["kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(props), "--standalone"]
            # The SCRAM passwords go in a java @argfile (owner-only, removed after): on the command line any
            # user of the machine would read them in `ps`.
            argfile = home / "format.args"
            _write_private(argfile, "".join(_argfile_line(a) for a in [*tool, *self._scram_arguments(alias)]))
            try:
                fmt = subprocess.run(self._java(libs, f"@{argfile}"), capture_output=True, text=True, check=False)
            finally:
                argfile.unlink(missing_ok=True)
            if fmt.returncode != 0:
                raise ClusterError(f"cluster {alias}: formatting storage failed: {fmt.stderr.strip()[-500:]}")
        log = (home / "kafka.log").open("ab")
        cmd = self._java(
            libs,
            f"-Dlog4j2.configurationFile={home / 'log4j2.yaml'}",
            "kafka.Kafka",
            str(props),
            heap=self.heap,
        )
        cmd.insert(1, f"-Xms{min(128, int(self.heap.rstrip('m')))}m")
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=home
        )
        # The start time identifies the process: a PID alone may name another process after a crash. Once
        # java runs: a reader of the PID file before the exec would find no broker (and wait_ready give up).
        facts = wait_for_exec(proc.pid, [BROKER_MAIN_CLASS])
        (home / "kafka.pid").write_text(PidRecord(proc.pid, facts.start_ticks if facts else None).render())

    def wait_ready(self, alias: str, deadline: float) -> None:
        """Block until the cluster accepts a produce and serves the record back to a consumer."""
        from drkit.localdev.readiness import probe

        info = self.describe(alias)
        own_id = self._cluster_id(alias)
        last_error = "not started"
        while time.monotonic() < deadline:
            if not info.running:
                tail = (Path(info.home) / "kafka.log").read_text(errors="replace")[-800:]
                raise ClusterError(f"cluster {alias}: broker process exited; log tail:\n{tail}")
            try:
                answered = probe(info.bootstrap_servers, READY_TOPIC, self.client_properties(alias))
            except Exception as exc:  # not ready yet: keep probing until the deadline
                last_error = str(exc)
                time.sleep(0.5)
                info = self.describe(alias)
                continue
            if own_id is not None and answered is not None and answered != own_id:
                # Another broker holds the port (ours is still starting or failed to bind).
                raise ClusterError(
                    f"cluster {alias}: 127.0.0.1:{info.port} is served by another Kafka cluster "
                    f"(id {answered}, this one is {own_id}); pick other ports with --base-port"
                )
            return
        raise ClusterError(f"cluster {alias} at {info.bootstrap_servers} not ready in time: {last_error}")

    def stop(self, alias: str, kill: bool = False, timeout: float = 60.0) -> None:
        """Stop one cluster: SIGTERM (controlled shutdown) or SIGKILL (a disaster)."""
        pid = self._broker_pid(alias)
        if pid is not None:
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)  # a frozen broker (freeze) handles its SIGTERM only once thawed
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                while _alive(pid):
                    time.sleep(0.1)
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, os.WNOHANG)
        (self._home(alias) / "kafka.pid").unlink(missing_ok=True)

    def freeze(self, alias: str) -> None:
        """SIGSTOP the broker: it keeps its connections but answers nothing (a network partition, seen
        from its clients: requests time out instead of being refused)."""
        pid = self._broker_pid(alias)
        if pid is None:
            raise ClusterError(f"cluster {alias} is not running: nothing to freeze")
        os.kill(pid, signal.SIGSTOP)

    def thaw(self, alias: str) -> bool:
        """SIGCONT a frozen broker (harmless on a running one); False when it is not running."""
        pid = self._broker_pid(alias)
        if pid is None:
            return False
        os.kill(pid, signal.SIGCONT)
        return True

    def start(self, alias: str, timeout: float = 120.0) -> LocalCluster:
        """Start a stopped cluster again with its data (recovery after a disaster)."""
        if self._pid(alias) is None:
            self._start(alias, kafka_broker_libs())
        self.wait_ready(alias, time.monotonic() + timeout)
        return self.describe(alias)

    def down(self) -> list[str]:
        stopped = []
        for alias in self._aliases():
            if self._pid(alias) is not None:
                stopped.append(alias)
            self.stop(alias)
        return stopped


_LISTENERS = re.compile(r"^listeners=[A-Z_]+://[^:]+:(?P<port>\d+),CONTROLLER://[^:]+:(?P<cport>\d+)$", re.M)


def _ensure_free(alias: str, port: int) -> None:
    """Refuse a port another process listens on, before the broker would fail to bind it and the
    readiness probe would reach the other process instead."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of our last run is fine
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise ClusterError(
                f"cluster {alias}: port 127.0.0.1:{port} is already in use by another process; "
                "pick other ports with --base-port (scripts/local-kafka up --base-port 39092)"
            ) from None


def as_dicts(clusters: list[LocalCluster]) -> list[dict[str, object]]:
    return [asdict(c) for c in clusters]


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(0o600)
    path.chmod(0o600)  # a file made by an earlier version may be more open
    path.write_text(text)


def _argfile_line(argument: str) -> str:
    """One argument of a java @argfile, quoted (the launcher reads backslash escapes inside quotes)."""
    escaped = argument.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"\n'
