"""YAML as spec files and SQL options read it: PyYAML's safe loader, except that a timestamp
that is no calendar date (`start_date: 2024-02-30`) is a YAML error at its line and column,
not the bare ValueError PyYAML raises from deep in its constructor (a traceback for a typo)."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError


class _SpecLoader(yaml.SafeLoader):
    pass


def _timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError as exc:
        raise ConstructorError(None, None, f"{node.value!r} is no date or time ({exc})",
                               node.start_mark) from None


_SpecLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load(text)`, with impossible dates as `yaml.YAMLError`."""
    return yaml.load(text, Loader=_SpecLoader)  # a SafeLoader: no arbitrary objects
