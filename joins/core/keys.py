"""THE key-equality rule, one for every engine.

Kafka Streams compares a table's keys as serialized bytes, so two keys are equal iff they are
equal by value AND by JSON type: the numbers 1 and 1.0 are two keys, true and 1 are two keys,
"1" and 1 are two keys, and objects compare member by member with the same rule (member order
does not matter: an object's members are serialized sorted).

A key's identity is its canonical JSON text (`joins.core.fields.canonical_json`): JSON's own
spelling keeps the integer 1 (`1`) apart from the float 1.0 (`1.0`) and true (`true`) apart from
both. The reference engines index their state by `key_id`; the Spark engines store `key_text`
in their key columns, so a Spark equi-join on that text is the same rule.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

from joins.core.fields import canonical_json

# The hashable identity of a key (its canonical JSON text).
KeyId = str


def key_id(key: Any) -> KeyId:
    """The identity of a key: equal ids iff equal keys (value and JSON type)."""
    return canonical_json(key)


def keys_equal(a: Any, b: Any) -> bool:
    """Are `a` and `b` the same key? 1 and 1.0 are not, true and 1 are not."""
    return key_id(a) == key_id(b)


def key_text(key: Any) -> str | None:
    """The text a Spark engine stores for a key; a null key stays SQL NULL (it joins nothing)."""
    return None if key is None else key_id(key)


def _key_not_null_or_array(key: Any) -> Any:
    # A table cannot hold a null key (Kafka's table source drops it); arrays are not keys in the
    # scenario format. Refusing here names the record instead of losing it.
    if key is None:
        raise ValueError("key must not be null")
    if isinstance(key, list):
        raise ValueError("key must be a JSON scalar or object, not an array")
    return key


# The key of a table record: a JSON scalar or object, never null.
TableKey = Annotated[Any, AfterValidator(_key_not_null_or_array)]
