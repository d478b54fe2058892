"""A job per join that reproduces a past output in the Dagster UI: open the job's Launchpad,
give a batch id, or an event day and optionally an output commit, launch; the run's output
metadata holds the report of `./tj reproduce` (`joins.reproduce`). A difference fails the run,
with the same report, as the command exits 1."""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.
from dagster import Config, Failure, JobDefinition, MetadataValue, OpExecutionContext, Output, job, op
from pydantic import Field

from joins.pipeline import PipelineLayout, PipelineSpec
from resources import LakeResource, SparkResource


class ReproduceConfig(Config):
    batch: int = Field(default=-1, description="a micro-batch id (-1: reproduce a day instead)")
    day: str = Field(default="", description="an event day, YYYY-MM-DD (with batch -1)")
    as_of_commit: int = Field(default=-1, description="the day as the output held it at this "
                                                      "Delta version (-1: the latest)")


def reproduce_job_name(spec: PipelineSpec) -> str:
    return f"{spec.name}_reproduce"


def reproducible(spec: PipelineSpec) -> bool:
    """Whether the join's engine can be rebuilt as the runtime runs it (`runtime()`)."""
    return hasattr(spec.engine(PipelineLayout("/lake", spec)), "runtime")


def _metadata(result: object) -> dict[str, MetadataValue]:
    from joins.reproduce import Reproduction

    assert isinstance(result, Reproduction)
    return {"report": MetadataValue.md(f"```\n{result.text()}\n```"),
            "agrees": MetadataValue.bool(result.agrees),
            "rows_output": MetadataValue.int(result.rows_output),
            "rows_recomputed": MetadataValue.int(result.rows_recomputed),
            "missing": MetadataValue.int(result.missing), "extra": MetadataValue.int(result.extra),
            "output_commit": MetadataValue.int(-1 if result.output_commit is None else result.output_commit),
            "pins": MetadataValue.json({k: str(v) for k, v in result.pins.items()})}


def reproduce_job(spec: PipelineSpec) -> JobDefinition:
    @op(name=f"{spec.name}_reproduce_output", tags={"kind": "spark"},
        description=f"Recompute a past batch or day of `{spec.name}` from its pinned inputs and "
                    f"diff it with the output.")
    def _reproduce(context: OpExecutionContext, config: ReproduceConfig, spark: SparkResource,
                   lake: LakeResource) -> Output[dict]:  # type: ignore[type-arg]
        from joins.errors import JoinsError
        from joins.reproduce import ReproduceError, reproduce_batch, reproduce_day
        from joins.reproduce.cli import parse_day

        try:
            if (config.batch < 0) == (not config.day):
                raise ReproduceError("give a batch id, or a day (and optionally as_of_commit)")
            runtime = spec.engine(lake.layout(spec)).runtime()  # type: ignore[attr-defined]
            session = spark.session_for(context)
            if config.batch >= 0:
                result = reproduce_batch(session, runtime, config.batch)
            else:
                result = reproduce_day(session, runtime, parse_day(config.day),
                                       None if config.as_of_commit < 0 else config.as_of_commit)
        except JoinsError as exc:
            raise Failure(description=str(exc)) from None
        context.log.info(result.text())
        if not result.agrees:
            raise Failure(description=result.text(), metadata=_metadata(result))
        return Output(result.to_json(), metadata=_metadata(result))

    @job(name=reproduce_job_name(spec),
         description=f"Reproduce a past output of `{spec.name}` (Launchpad: batch, or day and "
                     f"optionally as_of_commit) and diff it with what the output held.")
    def _job() -> None:
        _reproduce()

    return _job
