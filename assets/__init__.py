"""The asset factory: a pipeline spec becomes Dagster assets (inputs, join) and its micro-batch job."""

from assets.beta_apis import silence_notes_of_used_apis

silence_notes_of_used_apis()

from assets.factory import PipelineAssets, build_pipeline_assets  # noqa: E402  (after the filter)

__all__ = ["PipelineAssets", "build_pipeline_assets"]
