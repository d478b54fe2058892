"""Errors the engine raises. Each names what is wrong and where, so a user never has to read a
traceback to find the offending field or record."""

from __future__ import annotations

from typing import Any


class JoinsError(Exception):
    """Base class of every error the engine raises on purpose."""


class ConfigError(JoinsError):
    """An operator configuration is invalid (unknown key, bad value, inconsistent settings)."""


def config_error(who: str, key: str, message: str) -> ConfigError:
    """THE shape of a configuration error: `<who>: invalid config: config.<key>: <message>`, where
    `who` names the operator (or the named spec) and `key` the setting's dotted path."""
    return ConfigError(f"{who}: invalid config: config.{key}: {message}")


class InputRecordError(JoinsError):
    """One input record is malformed. The message names the record and the field."""

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None,
                 record: Any = None, source: str | None = None) -> None:
        self.index = index
        self.field = field
        self.record = record
        self.source = source
        where = []
        if source is not None:
            where.append(source)
        if index is not None:
            where.append(f"record {index}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class StateLimitError(JoinsError):
    """An operator's bounded state (for example an interval join buffer) would exceed its limit."""
