"""The pure core of drkit: offset-sync ranges, translation, replication policies, selections.

Nothing here imports Kafka, Spark, Delta, Typer or Rich (tests/unit/core/test_purity.py checks
it), so all of it is tested in milliseconds.
"""
