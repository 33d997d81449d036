"""drkit: disaster recovery for Apache Kafka.

Mirror topics between clusters with exact offset-syncs, translate consumer-group offsets
record-exactly, and move consumers over (failover) and back (failback).
"""

__version__ = "0.1.0"
