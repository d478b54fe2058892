"""Spark session management (the only place a SparkSession is built)."""

from joins.spark.session import SparkSettings, get_spark, stop_spark

__all__ = ["SparkSettings", "get_spark", "stop_spark"]
