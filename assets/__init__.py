"""The asset factory: a pipeline spec becomes Dagster assets (inputs, join) and its micro-batch job."""

from assets.factory import PipelineAssets, build_pipeline_assets

__all__ = ["PipelineAssets", "build_pipeline_assets"]
