"""Reproduce any past output of a join: a micro-batch from its plan, an event day as the output
held it at a commit, from the inputs pinned to the versions that run read (`engine.py`), and
compared with the output (`diff.py`). `python -m joins reproduce` is its command line."""

from joins.reproduce.diff import Reproduction
from joins.reproduce.engine import Runtime, reproduce_batch, reproduce_day
from joins.reproduce.lineage import ReproduceError

__all__ = ["ReproduceError", "Reproduction", "Runtime", "reproduce_batch", "reproduce_day"]
