"""A job per versioned table that answers `get(key, as of a time)` in the Dagster UI: open the
job's Launchpad, give the key and the time (and optionally a commit), launch; the run's log and
its output's metadata hold the answer, in the words of `./tj table` (`joins.query`)."""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.
from dagster import Config, Failure, JobDefinition, MetadataValue, OpExecutionContext, Output, job, op
from pydantic import Field

from joins.pipeline import PipelineInput
from resources import LakeResource, SparkResource


class QueryConfig(Config):
    key: str = Field(description="the key (several key columns: values separated by commas)")
    as_of: str = Field(description="the event time: ISO 8601 (2024-03-02T14:05:00Z) or epoch ms")
    as_of_commit: int = Field(default=-1, description="what the table held at this Delta version "
                                                      "(-1: now)")


def query_job_name(item: PipelineInput) -> str:
    return f"{item.name}_query"


def query_job(item: PipelineInput) -> JobDefinition:
    assert item.source is not None and item.kind == "versioned"

    @op(name=f"{item.name}_get_as_of", tags={"kind": "spark"},
        description=f"The value of a key of `{item.name}` valid at an event time.")
    def _get(context: OpExecutionContext, config: QueryConfig, spark: SparkResource,
             lake: LakeResource) -> Output[dict]:  # type: ignore[type-arg]
        from joins.errors import JoinsError
        from joins.query import get, parse_key, parse_time
        from joins.query.tables import table_ref

        table = table_ref(item, lake.root_path())
        try:
            answer = get(spark.session_for(context), table, parse_key(config.key, table.key_types),
                         parse_time(config.as_of),
                         commit=None if config.as_of_commit < 0 else config.as_of_commit)
        except JoinsError as exc:
            raise Failure(description=str(exc)) from None
        context.log.info(answer.text())
        return Output(answer.to_json(), metadata={"answer": MetadataValue.text(answer.text()),
                                                  "found": MetadataValue.bool(answer.value is not None)})

    @job(name=query_job_name(item),
         description=f"Ask the versioned table `{item.name}` for a key's value valid at an event "
                     f"time (Launchpad: key, as_of, optionally as_of_commit).")
    def _job() -> None:
        _get()

    return _job
