"""Adapters around confluent-kafka: clients built from the config, admin and group operations."""
