"""Generic conversion between protobuf messages and plain Python values.

Enums become short lower-case names (``ROLE_USER`` <-> ``"user"``,
``TOOL_CALL_STATUS_SUCCESS`` <-> ``"success"``), timestamps become aware
`datetime`s in UTC (``None`` when unset), integers stay integers (unlike
protobuf's JSON mapping, which turns 64-bit integers into strings), and
field names are the proto's. Nothing here knows about particular RPCs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

_TIMESTAMP = Timestamp.DESCRIPTOR.full_name

# A FieldDescriptor: the pure-Python and the upb implementation have
# different types in protobuf's stubs, and both occur at run time.
Field = Any


def _enum_prefix(enum: EnumDescriptor) -> str:
    """``ToolCallStatus`` -> ``TOOL_CALL_STATUS_`` (the proto style guide's value prefix)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_name(enum: EnumDescriptor, number: int) -> str:
    """The short lower-case name of an enum value; unknown numbers stay ints as text."""
    value = enum.values_by_number.get(number)
    if value is None:
        return str(number)
    return value.name.removeprefix(_enum_prefix(enum)).lower()


def enum_value_name(enum: EnumDescriptor, name: str) -> str:
    """The proto name of an enum value given as ``"user"``, ``"USER"`` or ``"ROLE_USER"``.

    Raises `ValueError` listing the valid short names.
    """
    upper = name.upper()
    for candidate in (upper, _enum_prefix(enum) + upper):
        if candidate in enum.values_by_name:
            return candidate
    valid = ", ".join(enum_name(enum, v.number) for v in enum.values if v.number != 0)
    raise ValueError(f"{name!r} is not a valid {enum.name} (one of: {valid})")


def to_datetime(timestamp: Timestamp) -> datetime:
    """A protobuf Timestamp as an aware UTC datetime."""
    return timestamp.ToDatetime(tzinfo=timezone.utc)


def _is_repeated(field: Field) -> bool:
    is_repeated = getattr(field, "is_repeated", None)  # protobuf >= 5.29
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _is_map(field: Field) -> bool:
    return field.message_type is not None and bool(field.message_type.GetOptions().map_entry)


def _scalar_to_python(field: Field, value: Any) -> Any:
    if field.enum_type is not None:
        return enum_name(field.enum_type, value)
    if field.message_type is not None:
        if field.message_type.full_name == _TIMESTAMP:
            return to_datetime(value)
        return message_to_dict(value)
    return value


def message_to_dict(message: Message) -> dict[str, Any]:
    """Every field of `message` (defaults included) as plain Python values.

    A singular sub-message that is not set is ``None``; lists and maps are
    always present (empty when nothing is in them).
    """
    out: dict[str, Any] = {}
    descriptor: Any = message.DESCRIPTOR
    for field in descriptor.fields:
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _scalar_to_python(value_field, v) for k, v in value.items()}
        elif _is_repeated(field):
            out[field.name] = [_scalar_to_python(field, v) for v in value]
        elif field.message_type is not None and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _scalar_to_python(field, value)
    return out


def fill_message(message: Message, values: Mapping[str, Any] | Any, *, path: str = "") -> Message:
    """Sets the fields of `message` from a mapping (or a dataclass) of plain values.

    Keys are the proto's field names; an unknown key raises `ValueError`
    naming it, so a typo fails here instead of being silently dropped.
    ``None`` values are skipped. Enums take short names, timestamps take
    `datetime`s, sub-messages take mappings.
    """
    if dataclasses.is_dataclass(values) and not isinstance(values, type):
        values = dataclasses.asdict(values)
    if not isinstance(values, Mapping):
        raise TypeError(f"{path or message.DESCRIPTOR.name}: expected a dict, got {type(values).__name__}")
    descriptor: Any = message.DESCRIPTOR
    fields = descriptor.fields_by_name
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        field = fields.get(key)
        if field is None:
            known = ", ".join(fields)
            raise ValueError(f"{where}: unknown field of {message.DESCRIPTOR.name} (known: {known})")
        if value is None:
            continue
        if _is_map(field):
            target = getattr(message, key)
            for k, v in value.items():
                target[k] = v
        elif _is_repeated(field):
            target = getattr(message, key)
            for i, item in enumerate(value):
                if field.message_type is not None:
                    fill_message(target.add(), item, path=f"{where}[{i}]")
                else:
                    target.append(_python_to_scalar(field, item, f"{where}[{i}]"))
        elif field.message_type is not None:
            sub = getattr(message, key)
            if field.message_type.full_name == _TIMESTAMP:
                if not isinstance(value, datetime):
                    raise TypeError(f"{where}: expected a datetime, got {type(value).__name__}")
                sub.FromDatetime(value)
            else:
                fill_message(sub, value, path=where)
        else:
            setattr(message, key, _python_to_scalar(field, value, where))
    return message


def _python_to_scalar(field: Field, value: Any, where: str) -> Any:
    if field.enum_type is not None and not isinstance(value, int):
        try:
            return field.enum_type.values_by_name[enum_value_name(field.enum_type, value)].number
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return value
