"""Shared pytest setup: unit tests run everywhere; integration tests need the JVM side."""
