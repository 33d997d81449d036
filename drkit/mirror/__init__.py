"""The mirror: Spark Structured Streaming from a source cluster to a target, with exact offset-syncs."""
