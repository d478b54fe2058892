"""Pipelines: a join of any operator over sources fed from landing folders, declared as a spec
(pydantic, a union discriminated by `operator`; YAML files too) that the Dagster layer turns
into assets, jobs, sensors, a schedule and checks. No Dagster here."""

from joins.pipeline.files import LoadedSpecs, SpecFileError, load_spec_file, load_spec_folder
from joins.pipeline.registry import parse_pipeline_spec, spec_classes
from joins.pipeline.sources import SourceSpec
from joins.pipeline.spec import InputKind, PipelineEngine, PipelineInput, PipelineLayout, PipelineSpec
from joins.pipeline.summary import BackfillSummary, CheckSummary, DayDifference, RunSummary

__all__ = [
    "BackfillSummary",
    "CheckSummary",
    "DayDifference",
    "InputKind",
    "LoadedSpecs",
    "PipelineEngine",
    "PipelineInput",
    "PipelineLayout",
    "PipelineSpec",
    "RunSummary",
    "SourceSpec",
    "SpecFileError",
    "load_spec_file",
    "load_spec_folder",
    "parse_pipeline_spec",
    "spec_classes",
]
