"""The Dagster code location: sensors, schedules, checks, partitions and the `Definitions`
that workspace.yaml loads (`pipelines.definitions`). The demo is `demo`, the run platform
`runplatform`."""
