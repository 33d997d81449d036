"""Delta tables: offset_syncs, checkpoints, operations. Each table has its own module."""
