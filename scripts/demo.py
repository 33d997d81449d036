"""The demo behind scripts/demo: the main job on the two local clusters, step by step.

1. produce records to ``demo.orders`` on A (3 partitions, keys, headers);
2. a consumer group ``demo-app`` reads part of them on A and commits;
3. ``drkit mirror --once`` copies A -> B and records the offset-syncs;
4. ``drkit checkpoint --once`` translates the group's committed offsets;
5. ``drkit failover --apply --yes`` commits them for the group on B;
6. a consumer of ``demo-app`` on B reads what the group had not processed on A: the demo
   counts them against what it expected (no record lost, none re-delivered);
7. ``scripts/render-notebooks`` executes notebooks/ on the state and renders them to HTML;
8. ``drkit drill run runbooks/drills/source-loss.toml``: the whole story again as a drill (runbooks/drill.md),
   live: traffic, the mirror and the translator running, A SIGKILLed, failover, the group on B; A
   started again, failback, the group home on A reading what B never got; every record verified, RPO
   and RTO measured (the clusters are left running) and the report's folder is printed. The demo's
   exit code is the drill's (0 pass, 30 fail).

Every run adds new records, so it can be run again on the same clusters. ``--base-port N`` uses
clusters on N (A) and N+10 (B), with a config written under ``.drkit/`` from
examples/drkit.local.toml and its own state root (offset-syncs of other clusters never mix in).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "drkit.local.toml"
DEFAULT_BASE_PORT = 19092
#: Set by main() from --base-port (module-level so that every step uses the same clusters).
CONFIG = str(EXAMPLE)
A, B = "127.0.0.1:19092", "127.0.0.1:19102"
TOPIC, PARTITIONS, RECORDS = "demo.orders", 3, 3000
#: A new group each run: a group left on B by an earlier run would resume where that run left it.
GROUP = f"demo-app-{uuid.uuid4().hex[:6]}"


#: The demo's own Kafka clients log nowhere: without a logger librdkafka writes its lines to the terminal
#: (``%4|...|GETPID|`` while A's coordinator loads); the demo checks what they did by its own counts.
KAFKA_LOG = logging.getLogger("demo.librdkafka")
KAFKA_LOG.disabled = True

#: The drill at the end (relative to ROOT, as runbooks/drill.md runs it). Its [local_kafka] state_dir is
#: the repository's .drkit/local-kafka, where scripts/local-kafka keeps A and B whatever --base-port says.
DRILL_SPEC = "runbooks/drills/source-loss.toml"


def drkit(*args: str, check: bool = True) -> int:
    print(f"\n$ drkit {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "drkit.cli.app", *args], check=check, cwd=ROOT).returncode


def ensure_topic() -> None:
    admin = AdminClient({"bootstrap.servers": A, "logger": KAFKA_LOG})
    if TOPIC not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)


def produce(run: str) -> None:
    producer = Producer({"bootstrap.servers": A, "acks": "all", "enable.idempotence": True, "logger": KAFKA_LOG})
    for i in range(RECORDS):
        producer.produce(
            TOPIC, key=f"customer-{i % 50}".encode(), value=f"{run}:order-{i}".encode(), headers=[("run", run.encode())]
        )
    producer.flush(60)
    print(f"produced {RECORDS} records to {TOPIC} on A (run {run})")


def consume(bootstrap: str, limit: int | None, idle_seconds: float = 5.0) -> list[bytes]:
    """Read with the demo group from its committed position; commit what was read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "logger": KAFKA_LOG,
        }
    )
    consumer.subscribe([TOPIC if bootstrap == A else f"A.{TOPIC}"])
    seen: list[bytes] = []
    idle_since = time.monotonic()
    while (limit is None or len(seen) < limit) and time.monotonic() - idle_since < idle_seconds:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        seen.append(msg.value())
        idle_since = time.monotonic()
        if limit is not None and len(seen) >= limit:
            break
    if seen:
        consumer.commit(asynchronous=False)
    consumer.close()
    return seen


def committed_positions(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "logger": KAFKA_LOG})
    tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    consumer.close()
    return {tp.partition: tp.offset for tp in tps}


def demo_config(base_port: int) -> str:
    """The example config as is on the default ports; otherwise a copy for the given clusters."""
    if base_port == DEFAULT_BASE_PORT:
        return str(EXAMPLE)
    text = EXAMPLE.read_text(encoding="utf-8")
    text = text.replace("127.0.0.1:19092", A).replace("127.0.0.1:19102", B)
    # Relative to the new file (.drkit/), one state root per pair of clusters.
    text = text.replace('root = "../.drkit/state"', f'root = "state-{base_port}"')
    path = ROOT / ".drkit" / f"demo-{base_port}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def main() -> None:
    global A, B, CONFIG
    parser = argparse.ArgumentParser(prog="scripts/demo", description="drkit on two local clusters.")
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, help="A's port; B's is 10 above")
    args = parser.parse_args()
    A, B = f"127.0.0.1:{args.base_port}", f"127.0.0.1:{args.base_port + 10}"
    CONFIG = demo_config(args.base_port)
    print(f"clusters: A {A}, B {B}; config {CONFIG}")
    run = uuid.uuid4().hex[:6]
    drkit("config", "validate", "-c", CONFIG)
    ensure_topic()
    produce(run)
    first = consume(A, limit=RECORDS // 3)
    print(f"group {GROUP} processed {len(first)} records on A and committed")
    drkit("mirror", "-c", CONFIG, "--flow", "A->B", "--once")
    drkit("checkpoint", "-c", CONFIG, "--flow", "A->B", "--once")
    drkit("failover", "-c", CONFIG, "--flow", "A->B", "--group", GROUP, "--apply", "--yes")
    # What the group had not processed on A: everything after its committed offsets.
    expected = _unprocessed_on_a()
    got = consume(B, limit=None)
    lost = len(set(expected) - set(got))
    duplicated = len(got) - len(set(got)) + len(set(got) - set(expected))
    print(
        f"\nafter failover, {GROUP} read {len(got)} records on B; expected {len(expected)}: "
        f"{lost} lost, {duplicated} re-delivered"
    )
    if lost or duplicated or len(got) != len(expected):
        sys.exit("demo failed: the failover was not exact")
    drkit("status", "-c", CONFIG, check=False)
    print("\n$ scripts/render-notebooks", flush=True)
    render = [
        sys.executable,
        str(ROOT / "scripts" / "render_notebooks.py"),
        "-c",
        CONFIG,
        "--flow",
        "A->B",
        "--topic",
        TOPIC,
        "--group",
        GROUP,
    ]
    if subprocess.run(render, check=False).returncode == 0:
        from drkit.service import Drkit

        print(f"\nThe notebooks, rendered: {Drkit.from_file(CONFIG).layout.root.resolve() / 'notebooks'}/*.html")
    else:
        print("\nthe notebooks could not be rendered (see above)")
    code = drill(args.base_port)
    print("\nDone. Stop the clusters with: scripts/local-kafka down")
    print(f"Try drkit yourself: source .venv/bin/activate; drkit status -c {CONFIG}")
    if code != 0:
        sys.exit(f"demo failed: the drill exited {code} (see its report above)")


def drill(base_port: int) -> int:
    """The routine DR drill (runbooks/drill.md) on the demo's clusters; A is started again afterwards."""
    print("\nThe same story as a drill: live traffic, the mirror and the translator running, A SIGKILLed,")
    print("failover, the group resumed on B; A back, failback, the group home on A; every record verified,")
    print("RPO and RTO measured (a few minutes).")
    code = drkit("drill", "run", DRILL_SPEC, "-c", CONFIG, check=False)
    # The drill starts A again after its kill_source; if it could not (or refused early), do it here.
    ports = [] if base_port == DEFAULT_BASE_PORT else ["--base-port", str(base_port)]
    up = " ".join(["A", "B", *ports])
    print(f"\n$ scripts/local-kafka up {up}      # both running, whatever the drill did", flush=True)
    subprocess.run([str(ROOT / "scripts" / "local-kafka"), "up", "A", "B", *ports], check=False, cwd=ROOT)
    from drkit.service import Drkit

    try:
        drills = Drkit.from_file(CONFIG).drill_history(1).as_dict()["drills"]
    except Exception as exc:  # the report is on screen already; the history is a convenience
        drills = []
        print(f"(drill history unavailable: {exc})")
    if drills:
        last = drills[0]
        folder = json.loads(last["report"]).get("report_dir", "?")
        rto = "-" if last["rto_ms"] is None else f"{last['rto_ms'] / 1000:.1f}s"
        print(
            f"\ndrill {last['name']}: {last['verdict'].upper()}; {last['acked']} records, {last['lost']} lost, "
            f"{last['redelivered']} re-delivered, RPO {last['rpo_records']} records, RTO {rto}"
        )
        print(f"The report: {folder}/report.md (and report.json, the jobs' logs)")
        print(f"Every drill: drkit drill history -c {CONFIG}")
    return code


def _unprocessed_on_a() -> list[bytes]:
    positions = committed_positions(A, TOPIC)
    consumer = Consumer(
        {
            "bootstrap.servers": A,
            "group.id": f"demo-reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "logger": KAFKA_LOG,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, max(off, 0)) for p, off in positions.items()])
    _, high = zip(
        *(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 10) for p in range(PARTITIONS)), strict=True
    )
    remaining = sum(h - max(positions[p], 0) for p, h in enumerate(high))
    out: list[bytes] = []
    while len(out) < remaining:
        msg = consumer.poll(5)
        if msg is None:
            break
        if not msg.error():
            out.append(msg.value())
    consumer.close()
    return out


if __name__ == "__main__":
    main()
