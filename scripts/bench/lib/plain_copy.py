"""The plain client copy: one confluent-kafka consumer, one producer, one loop, run as a file by copiers.py.
The machine's limit for a client copy, not a DR tool: no offset-syncs, no restart safety beyond the consumer
group.

Copies every record of ``--topic`` on ``--source`` to the same partition of ``--target-topic`` on
``--target`` (key, value, headers, timestamp), with the producer settings of the other copiers
(acks=all, idempotence, the same compression). Stops after ``--records`` records (a backlog run) or on
SIGINT/SIGTERM (a steady-state run).
"""

from __future__ import annotations

import argparse
import signal
import sys
import uuid

from confluent_kafka import Consumer, Producer


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--target-topic", required=True)
    p.add_argument("--records", type=int, default=0, help="stop after this many (0: run until signalled)")
    p.add_argument("--compression", default="lz4")
    args = p.parse_args()
    stop = False

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    consumer = Consumer(
        {
            "bootstrap.servers": args.source,
            "group.id": f"bench-plain-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.target,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": args.compression,
            "queue.buffering.max.messages": 500_000,
        }
    )
    consumer.subscribe([args.topic])
    copied = 0
    target = args.target_topic
    while not stop and (not args.records or copied < args.records):
        msgs = consumer.consume(10_000, 0.2)
        for m in msgs:
            if m.error():
                continue
            while True:
                try:
                    producer.produce(
                        target, m.value(), m.key(), m.partition(), timestamp=m.timestamp()[1], headers=m.headers()
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        copied += len(msgs)
        producer.poll(0)
    producer.flush(60)
    consumer.close()
    print(copied, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
