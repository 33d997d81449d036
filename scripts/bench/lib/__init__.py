"""What the benchmarks share; nothing here runs on import."""
