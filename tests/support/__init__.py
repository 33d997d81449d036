"""Helpers shared by the integration tests: produce and read back records one by one."""
