"""Asset factories: a join spec becomes Dagster assets (versioned table, stream events, join)."""

from assets.factory import JoinAssets, build_join_assets
from assets.specs import JoinSpec, SourceSpec, parse_join_spec

__all__ = ["JoinAssets", "JoinSpec", "SourceSpec", "build_join_assets", "parse_join_spec"]
