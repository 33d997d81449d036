"""Operator actions that change where consumers read: failover and failback."""
