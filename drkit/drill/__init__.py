"""DR drills: a workload with verifiable records, a disaster, failover, and every record accounted for."""
