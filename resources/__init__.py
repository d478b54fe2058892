"""Dagster resources: the shared SparkSession and the Delta lake."""

from resources.lake import LakeResource
from resources.spark import SparkResource

__all__ = ["LakeResource", "SparkResource"]
