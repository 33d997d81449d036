"""The JVM artifacts drkit runs on, in one place.

The Python pins in pyproject.toml (pyspark, delta-spark) must agree with these: the Spark Kafka
connector is built for one exact Spark version, and the Delta jar for one Spark line.
"""

from __future__ import annotations

SCALA_BINARY = "2.13"
SPARK_VERSION = "4.0.0"
DELTA_VERSION = "4.0.0"
KAFKA_VERSION = "4.3.1"
LOG4J_VERSION = "2.24.3"
#: pyspark's own Hadoop (pyspark/jars/hadoop-client-api-*.jar): hadoop-aws must match it exactly.
HADOOP_VERSION = "3.4.1"
#: The AWS SDK v2 that hadoop-aws 3.4.1 is built against (hadoop-project's ``aws-java-sdk-v2.version``).
AWS_SDK_V2_VERSION = "2.24.6"

#: Maven coordinates added to Spark's classpath (their runtime closure is resolved by Maven).
SPARK_EXTRA_ARTIFACTS: tuple[str, ...] = (
    f"io.delta:delta-spark_{SCALA_BINARY}:{DELTA_VERSION}",
    f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}",
)

#: Maven coordinates of a KRaft Kafka broker with a log4j2 binding for its SLF4J 1.x logging.
KAFKA_BROKER_ARTIFACTS: tuple[str, ...] = (
    f"org.apache.kafka:kafka_{SCALA_BINARY}:{KAFKA_VERSION}",
    f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
)

#: Maven coordinates of Apache Kafka's MirrorMaker 2 (dedicated mode, ``org.apache.kafka.connect.mirror.MirrorMaker``)
#: at the broker's version, with the same log4j2 binding: only the benchmark runs it, side by side with drkit.
MIRROR_MAKER_ARTIFACTS: tuple[str, ...] = (
    f"org.apache.kafka:connect-mirror:{KAFKA_VERSION}",
    f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
)

#: Spark's S3A file system (a streaming checkpoint under an ``s3a://`` state root): hadoop-aws with the AWS SDK
#: v2 modules S3A loads (the S3 client, sync and async, and the transfer manager for copies), instead of the
#: SDK's ``bundle`` jar hadoop-aws declares (558 MB, every AWS service).
S3A_ARTIFACTS: tuple[str, ...] = (
    f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}",
    f"software.amazon.awssdk:s3:{AWS_SDK_V2_VERSION}",
    # 2.24.6 of the transfer manager was never published to Maven Central; 2.24.5 is the bundle's neighbour.
    "software.amazon.awssdk:s3-transfer-manager:2.24.5",
    f"software.amazon.awssdk:sts:{AWS_SDK_V2_VERSION}",
)
S3A_EXCLUSIONS: tuple[str, ...] = ("software.amazon.awssdk:bundle",)
