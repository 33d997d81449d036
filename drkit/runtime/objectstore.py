"""What Spark needs to reach a state root in an object store: its Hadoop file system's jars and settings.

Only S3 (``s3a://``, ``s3://``) is provided: hadoop-aws at pyspark's Hadoop version with the AWS SDK v2
modules it loads (drkit.runtime.artifacts.object_store_jars), and the ``spark.hadoop.fs.s3a.*`` settings
derived from ``[state.storage]`` by drkit.core.storage (the same settings delta-rs and pyarrow get). For
``abfss://``, ``gs://`` and ``hdfs://`` roots, Spark needs the store's connector (hadoop-azure, the GCS
connector, a Hadoop client configuration) given through ``[spark] conf`` (``spark.jars.packages``,
``spark.hadoop.*``), as for any Spark job reaching that store.
"""

from __future__ import annotations

from pathlib import Path

from drkit.core.storage import S3_SCHEMES, StorageSettings, hadoop_settings
from drkit.layout import StateLayout


def spark_settings(state: StateLayout) -> tuple[dict[str, str], list[Path]]:
    """(Spark settings, extra jars) for the session of a job whose state root is ``state``."""
    if state.remote is None or state.remote.scheme not in S3_SCHEMES:
        return {}, []
    from drkit.runtime.artifacts import object_store_jars

    return hadoop_settings(state.remote, state.storage or StorageSettings()), object_store_jars()
