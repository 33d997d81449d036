"""Runtime plumbing: JVM artifacts and the Spark session."""
