"""The runtime is real: brokers serve records, Spark reads Kafka, Delta writes and time-travels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.kafka_io import create_topic, produce, read_all, unique


def test_produce_and_consume_back_on_each_cluster(clusters: dict[str, str]) -> None:
    for alias, bootstrap in clusters.items():
        topic = unique(f"runtime-{alias}")
        create_topic(bootstrap, topic, partitions=2)
        sent = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2} for i in range(20)]
        produce(bootstrap, topic, sent)
        got = read_all(bootstrap, topic)
        assert sorted((r.partition, r.key, r.value) for r in got) == sorted(
            (s["partition"], s["key"], s["value"]) for s in sent
        )
        assert [r.offset for r in got if r.partition == 0] == list(range(10))


def test_clusters_are_independent(clusters: dict[str, str]) -> None:
    topic = unique("only-on-a")
    create_topic(clusters["A"], topic)
    from confluent_kafka.admin import AdminClient

    assert topic in AdminClient({"bootstrap.servers": clusters["A"]}).list_topics(timeout=10).topics
    assert topic not in AdminClient({"bootstrap.servers": clusters["B"]}).list_topics(timeout=10).topics


def test_spark_reads_kafka_through_the_connector(clusters: dict[str, str], spark: Any) -> None:
    topic = unique("spark-read")
    create_topic(clusters["A"], topic, partitions=3)
    produce(clusters["A"], topic, [{"key": b"k", "value": f"{i}".encode(), "partition": i % 3} for i in range(30)])
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", clusters["A"])
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    rows = df.select("partition", "offset", "value").collect()
    assert len(rows) == 30
    assert sorted(int(r.value.decode()) for r in rows) == list(range(30))
    assert {r.partition for r in rows} == {0, 1, 2}


def test_spark_writes_delta_and_time_travels(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta").save(path)
    spark.createDataFrame([(3, "c")], "id INT, v STRING").write.format("delta").mode("append").save(path)
    now = sorted(r.id for r in spark.read.format("delta").load(path).collect())
    then = sorted(r.id for r in spark.read.format("delta").option("versionAsOf", 0).load(path).collect())
    assert now == [1, 2, 3]
    assert then == [1, 2]


def test_a_spark_secret_reaches_the_jvm_but_not_its_command_line(tmp_path: Path) -> None:
    """A secret the JVM reads at start (extraJavaOptions) takes effect, and no process's command
    line (``ps``) shows it: its own JVM, started in a child process."""
    import subprocess
    import sys

    secret = "s3cr3t-" + unique("pw")
    script = tmp_path / "start.py"
    script.write_text(
        "import subprocess, sys\n"
        "from drkit.config import SparkConfig\n"
        "from drkit.runtime.spark import build_session\n"
        f"conf = {{'spark.driver.extraJavaOptions': '-Ddrkit.test.password={secret}',\n"
        f"        'spark.sql.warehouse.dir': {str(tmp_path / 'wh')!r}}}\n"
        "spark = build_session(SparkConfig(conf=conf), 'drkit-secret-test')\n"
        "jvm = spark.sparkContext._jvm\n"
        "print('PROPERTY', jvm.java.lang.System.getProperty('drkit.test.password'))\n"
        "print('PS', subprocess.run(['ps', '-eww', '-o', 'args'], capture_output=True, text=True).stdout)\n"
        "spark.stop()\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    prop = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PROPERTY "))
    assert prop == f"PROPERTY {secret}"  # the JVM got it at start
    listing = proc.stdout.split("PS", 1)[1]
    assert "drkit-secret-test" in listing or "SparkSubmit" in listing  # the JVM is in the listing
    assert secret not in listing
    assert secret not in proc.stderr  # nor the JVM's own output
