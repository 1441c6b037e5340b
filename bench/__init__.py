"""Benchmarks of the service itself, not shipped: see the doc of each module."""
