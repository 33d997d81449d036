"""Local single-node KRaft Kafka clusters for trying drkit and for its tests."""
