"""Sensors, schedules, checks, partitions and the Dagster `Definitions` (pipelines.definitions),
plus the demo (`python -m pipelines.demo`)."""
