"""Pipelines written in SQL (`*.sql` in the specs folder), planned onto the project's
operators as the settings of the same pipeline specs the YAML files hold (docs/sql.md)."""

from joins.sql.pipeline.plan import SqlPipeline, plan_sql_pipeline

__all__ = ["SqlPipeline", "plan_sql_pipeline"]
