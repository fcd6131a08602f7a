"""Kafka's generated-message serialization, driven by schemas: one reader, one writer, one JSON converter.

Kafka describes every protocol message, KRaft metadata record and coordinator record in a JSON schema and
generates a Java class per schema (``generator/.../MessageDataGenerator.java``) plus a ``*JsonConverter``
(``JsonConverterGenerator.java``). This module interprets our own transcription of those schemas
(:mod:`segments.kafka_schemas`) with the same rules, so one engine reads and writes all of them:

* a field exists in the versions of its ``versions`` range; a field absent from a version reads as its default;
* in ``flexibleVersions`` strings, bytes and arrays are *compact* (unsigned varint of length + 1, 0 = null) and
  every struct ends with tagged fields (count, then ``tag``, ``size``, payload each; unknown tags are skipped);
  otherwise strings have an int16 length and bytes/arrays an int32 length, -1 meaning null;
* ``nullableVersions`` says when null is allowed; a null where it is not is an error, as in Kafka;
* version checks are Kafka's ``VersionConditional``: a bound is only tested when it is narrower than the
  enclosing struct's versions, so a version above the schema's highest reads like the highest (Kafka reads any
  version number it is handed and so do we).

Reading never trusts a length: every string, bytes and array length is checked against the bytes left before
anything is allocated, and malformed input raises :class:`MessageFormatError` (a
:class:`~segments.errors.CorruptRecordError`) naming the message, the field path and the byte position inside
the value. :attr:`MessageFormatError.java_message` carries what Kafka's reader would have said
(``getMessage()``, ``None`` for Java's message-less ``BufferUnderflowException``), which the ``kafka-dump-log``
decoders in :mod:`segments.record_decoders` print.

Values are plain Python: a message or struct is a ``dict`` keyed by the camelCase field name (the schema name
with a lowercase first letter, as Kafka's JSON), holding ``int``, ``bool``, ``float``, ``str``, ``bytes``,
``uuid.UUID``, ``list``, nested ``dict`` or ``None``. :func:`message_json` turns one into what Kafka's
``*JsonConverter.write`` builds, and :func:`json_text` prints that as Jackson's ``JsonNode.toString()`` does.
"""

from __future__ import annotations

import base64
import math
import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from os import PathLike
from typing import Any, Self

from checkpoints.kafka_uuid import ZERO_UUID, uuid_to_kafka
from segments.errors import CorruptRecordError
from segments.varint import encode_unsigned_varint

__all__ = [
    "Field",
    "JavaDouble",
    "MessageFormatError",
    "MessageSchema",
    "Versions",
    "default_value",
    "json_text",
    "message_json",
    "read_message",
    "read_unsigned_varint",
    "write_message",
    "write_unsigned_varint",
]

_MAX_VERSION = 0x7FFF
_MAX_STRING_LENGTH = 0x7FFF
_FIXED = {
    "bool": struct.Struct(">?"),
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "uint32": struct.Struct(">I"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_INT_TYPES = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})
_VARIABLE_TYPES = frozenset({"string", "bytes", "records"})
PRIMITIVE_TYPES = frozenset(_FIXED) | _VARIABLE_TYPES | {"uuid"}


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range as the schemas write it: ``"0+"``, ``"1-3"``, ``"2"`` or ``"none"``."""

    low: int
    high: int

    @classmethod
    def parse(cls, spec: str) -> Versions:
        """Parse a schema version string. O(len(spec))."""
        if spec == "none":
            return cls(0, -1)
        if spec.endswith("+"):
            return cls(int(spec[:-1]), _MAX_VERSION)
        low, _, high = spec.partition("-")
        return cls(int(low), int(high or low))

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def intersect(self, other: Versions) -> Versions:
        """The versions in both ranges. O(1)."""
        return Versions(max(self.low, other.low), min(self.high, other.high))

    def member(self, version: int, context: Versions) -> bool:
        """Kafka's generated check (``VersionConditional``) for ``version`` inside a struct read or written in
        ``context``: only the bounds narrower than the context's are tested. O(1)."""
        if self.intersect(context).empty:
            return False
        return (self.low <= context.low or version >= self.low) and (self.high >= context.high or version <= self.high)


NO_VERSIONS = Versions(0, -1)


@dataclass(frozen=True, slots=True)
class Field:
    """One schema field. ``type`` is a primitive name, a struct name, or either prefixed with ``[]`` for an
    array; struct and struct-array fields carry the struct's own ``fields``."""

    name: str
    type: str
    versions: Versions
    nullable: Versions = NO_VERSIONS
    tag: int | None = None
    tagged: Versions = NO_VERSIONS
    default: str | None = None
    zero_copy: bool = False
    fields: tuple[Field, ...] = ()
    key: str = field(init=False)
    element: str = field(init=False)
    is_array: bool = field(init=False)

    def __post_init__(self) -> None:
        # Kafka's JSON and accessors use the schema name with a lowercase first letter.
        object.__setattr__(self, "key", self.name[:1].lower() + self.name[1:])
        object.__setattr__(self, "is_array", self.type.startswith("[]"))
        object.__setattr__(self, "element", self.type[2:] if self.is_array else self.type)
        if (self.element in PRIMITIVE_TYPES) == bool(self.fields):
            raise ValueError(f"field {self.name}: a struct type needs fields, a primitive type none")

    @property
    def is_struct(self) -> bool:
        return bool(self.fields)


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """A top-level message: its name, KRaft ``apiKey`` (None for coordinator and control records), valid and
    flexible versions and fields."""

    name: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]


def field_spec(
    name: str,
    type_: str,
    versions: str,
    *,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str = "none",
    default: str | None = None,
    zero_copy: bool = False,
    fields: Sequence[Field] = (),
) -> Field:
    """A :class:`Field` from the schema's own strings (the transcription helper). O(len(fields))."""
    return Field(
        name,
        type_,
        Versions.parse(versions),
        Versions.parse(nullable),
        tag,
        Versions.parse(tagged),
        default,
        zero_copy,
        tuple(fields),
    )


def message_spec(name: str, api_key: int | None, valid: str, flexible: str, fields: Sequence[Field]) -> MessageSchema:
    """A :class:`MessageSchema` from the schema's own strings (the transcription helper). O(len(fields))."""
    return MessageSchema(name, api_key, Versions.parse(valid), Versions.parse(flexible), tuple(fields))


class MessageFormatError(CorruptRecordError):
    """Bytes that do not decode as the message: the text names the message, field and position; ``java_message``
    is what Kafka's reader reports for the same bytes (None where Java's exception has no message)."""

    java_message: str | None = None

    def at(self, path: str | PathLike[str] | None = None, *, position_base: int = 0) -> Self:
        moved = super().at(path, position_base=position_base)
        moved.java_message = self.java_message
        return moved


@dataclass(frozen=True, slots=True)
class JavaDouble:
    """A float64 value in JSON output, printed as Java's ``Double.toString`` (Jackson's ``DoubleNode``)."""

    value: float


# -- defaults --------------------------------------------------------------------------------------------------


def default_value(spec: Field) -> Any:
    """The value a field takes when absent from a version (Kafka's ``FieldSpec.fieldDefault``). O(struct size)."""
    default = spec.default
    if spec.is_array:
        return None if default == "null" else []
    kind = spec.element
    if spec.is_struct:
        return None if default == "null" else struct_defaults(spec.fields)
    if kind == "bool":
        return default == "true"
    if kind in _INT_TYPES:
        if not default:
            return 0
        return int(default, 16) if default.lower().startswith(("0x", "-0x")) else int(default)
    if kind == "float64":
        return float(default) if default else 0.0
    if kind == "uuid":
        return ZERO_UUID if not default else uuid.UUID(bytes=base64.urlsafe_b64decode(default + "=="))
    if kind == "string":
        return None if default == "null" else (default or "")
    return None if default == "null" or kind == "records" else b""


def struct_defaults(fields: Sequence[Field]) -> dict[str, Any]:
    """A struct whose every field holds its default. O(struct size)."""
    return {spec.key: default_value(spec) for spec in fields}


def _is_default(spec: Field, value: Any) -> bool:
    """Kafka's non-default test for tagged fields (``generateNonDefaultValueCheck``)."""
    default = default_value(spec)
    if default is None:
        return value is None
    # Python's == matches Java's here: != on doubles (NaN never default, -0.0 == 0.0), equals() on the rest.
    return bool(value == default)


# -- reading ---------------------------------------------------------------------------------------------------


class _Reader:
    """A cursor over one value, raising :class:`MessageFormatError` with Kafka's wording."""

    __slots__ = ("_data", "_message", "_pos", "path")

    def __init__(self, data: bytes | memoryview, position: int, message: str) -> None:
        self._data = data
        self._pos = position
        self._message = message
        self.path: list[str] = []

    @property
    def position(self) -> int:
        return self._pos

    def remaining(self) -> int:
        return len(self._data) - self._pos

    def fail(self, text: str, java_message: str | None, position: int | None = None) -> MessageFormatError:
        where = "".join(part if part.startswith("[") else "." + part for part in self.path) or "."
        err = MessageFormatError(
            f"{self._message}{where}: {text}", position=self._pos if position is None else position
        )
        err.java_message = java_message
        return err

    def take(self, size: int, *, java_message: str | None = None, start: int | None = None) -> bytes:
        """``size`` bytes; a shortfall is reported at ``start`` (the field's first byte) when given."""
        if size > self.remaining():
            raise self.fail(f"needs {size} bytes, only {self.remaining()} left", java_message, start)
        chunk = bytes(self._data[self._pos : self._pos + size])
        self._pos += size
        return chunk

    def fixed(self, kind: str) -> Any:
        codec = _FIXED[kind]
        # Java's ByteBuffer getters throw BufferUnderflowException, whose message is null.
        (value,) = codec.unpack(self.take(codec.size))
        return value

    def byte_array(self, size: int, start: int | None = None) -> bytes:
        """``ByteBufferAccessor.readArray``: the length is checked against what is left first."""
        if size < 0:
            # new byte[negative] in Java: NegativeArraySizeException with the size as its message.
            raise self.fail(f"negative length {size}", str(size), start)
        left = self.remaining()
        return self.take(
            size, java_message=f"Error reading byte array of {size} byte(s): only {left} byte(s) available", start=start
        )

    def unsigned_varint(self) -> int:
        """``ByteUtils.readUnsignedVarint``: at most 5 bytes, the result a Java int (may be negative)."""
        start = self._pos
        result = 0
        for shift in (0, 7, 14, 21):
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
        byte = self.take(1)[0]
        result = (result | (byte << 28)) & 0xFFFFFFFF
        if byte >= 0x80:
            converted = f"{result:x}"
            raise self.fail(
                "unsigned varint longer than 5 bytes",
                f"Varint is too long, the most significant bit in the 5th byte is set, converted value: {converted}",
                start,
            )
        return result - (1 << 32) if result >= 1 << 31 else result


def _int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


class _MessageReader:
    def __init__(self, schema: MessageSchema, version: int, reader: _Reader) -> None:
        self._schema = schema
        self._version = version
        self._r = reader

    def read_struct(self, fields: Sequence[Field], context: Versions) -> dict[str, Any]:
        version = self._version
        r = self._r
        out: dict[str, Any] = {}
        for spec in fields:
            r.path.append(spec.key)
            if spec.versions.member(version, context) and not (
                spec.tag is not None and spec.tagged.member(version, context)
            ):
                out[spec.key] = self._value(spec, context, self._schema.flexible.member(version, context), False)
            else:
                out[spec.key] = default_value(spec)
            r.path.pop()
        if self._schema.flexible.member(version, context):
            self._tagged(fields, context, out)
        return out

    def _tagged(self, fields: Sequence[Field], context: Versions, out: dict[str, Any]) -> None:
        r = self._r
        by_tag = {spec.tag: spec for spec in fields if spec.tag is not None and not spec.versions.intersect(spec.tagged).empty}
        r.path.append("_taggedFields")
        count = r.unsigned_varint()
        r.path.pop()
        for _ in range(count):
            tag_position = r.position
            r.path.append("_taggedFields")
            tag = r.unsigned_varint()
            size = r.unsigned_varint()
            r.path.pop()
            spec = by_tag.get(tag)
            if spec is None:
                r.path.append(f"_unknownTag{tag}")
                r.byte_array(size)
                r.path.pop()
                continue
            r.path.append(spec.key)
            if not spec.versions.intersect(spec.tagged).member(self._version, context):
                raise r.fail(
                    f"tag {tag} is not valid for version {self._version}",
                    f"Tag {tag} is not valid for version {self._version}",
                    tag_position,
                )
            out[spec.key] = self._value(spec, context, True, True)
            r.path.pop()

    def _length(self, spec: Field, flexible: bool, kind: str) -> int:
        r = self._r
        if flexible:
            return _int32(r.unsigned_varint() - 1)
        return int(r.fixed("int16" if kind == "string" else "int32"))

    def _value(self, spec: Field, context: Versions, flexible: bool, tagged: bool) -> Any:
        r = self._r
        if spec.is_array:
            start = r.position
            length = self._length(spec, flexible, "array")
            if length < 0:
                return self._null(spec, context, start)
            if length > r.remaining():
                raise r.fail(
                    f"array of {length} elements cannot fit in the {r.remaining()} bytes left",
                    f"Tried to allocate a collection of size {length}, but there are only {r.remaining()} bytes remaining.",
                    start,
                )
            items = []
            inner = context.intersect(spec.versions)
            for index in range(length):
                r.path.append(f"[{index}]")
                if spec.is_struct:
                    items.append(self.read_struct(spec.fields, inner))
                else:
                    items.append(self._scalar(spec, spec.element, context, flexible, element=True))
                r.path.pop()
            return items
        if spec.is_struct:
            inner = context.intersect(spec.versions)
            if spec.nullable.member(self._version, context):
                marker = r.unsigned_varint() if tagged else r.fixed("int8")
                if (marker <= 0) if tagged else (marker < 0):
                    return None
            return self.read_struct(spec.fields, inner)
        return self._scalar(spec, spec.element, context, flexible, element=False)

    def _null(self, spec: Field, context: Versions, start: int) -> None:
        if spec.nullable.member(self._version, context):
            return None
        raise self._r.fail(
            "null where the field is not nullable",
            f"non-nullable field {spec.key} was serialized as null",
            start,
        )

    def _scalar(self, spec: Field, kind: str, context: Versions, flexible: bool, *, element: bool) -> Any:
        r = self._r
        if kind in _FIXED:
            value = r.fixed(kind)
            return float(value) if kind == "float64" else (bool(value) if kind == "bool" else int(value))
        if kind == "uuid":
            return uuid.UUID(bytes=r.take(16))
        start = r.position
        length = self._length(spec, flexible, kind)
        name = f"{spec.key} element" if element else spec.key
        if length < 0:
            if not element and spec.nullable.member(self._version, context):
                return None
            raise r.fail(
                "null where the field is not nullable", f"non-nullable field {name} was serialized as null", start
            )
        if kind == "string":
            if length > _MAX_STRING_LENGTH:
                raise r.fail(
                    f"string length {length} above {_MAX_STRING_LENGTH}",
                    f"string field {name} had invalid length {length}",
                    start,
                )
            # Java's new String(bytes, UTF_8) replaces malformed input, as errors="replace" does.
            return r.byte_array(length, start).decode("utf-8", errors="replace")
        if spec.zero_copy or kind == "records":
            if length > r.remaining():
                # ByteBuffer.limit() past the capacity of the slice.
                raise r.fail(
                    f"needs {length} bytes, only {r.remaining()} left",
                    f"newLimit > capacity: ({length} > {r.remaining()})",
                    start,
                )
            return r.take(length)
        return r.byte_array(length, start)


def read_message(
    schema: MessageSchema, version: int, data: bytes | memoryview, position: int = 0
) -> tuple[dict[str, Any], int]:
    """Read one ``schema`` message of ``version`` from ``data[position:]``; return its value and the position
    after it (Kafka's readers leave trailing bytes to the caller). O(len(data)).

    Raises :class:`MessageFormatError` for bytes that do not decode.
    """
    reader = _Reader(data, position, schema.name)
    value = _MessageReader(schema, version, reader).read_struct(schema.fields, schema.valid)
    return value, reader.position


def read_unsigned_varint(data: bytes | memoryview, position: int, what: str) -> tuple[int, int]:
    """Kafka's ``ByteUtils.readUnsignedVarint`` at ``position`` (at most 5 bytes, the result a Java int, so it
    may be negative); return the value and the position after it. Raises :class:`MessageFormatError` naming
    ``what``. O(1)."""
    reader = _Reader(data, position, what)
    return reader.unsigned_varint(), reader.position


def write_unsigned_varint(value: int) -> bytes:
    """Kafka's ``ByteUtils.writeUnsignedVarint`` of a Java int (negative values take 5 bytes). O(1)."""
    return encode_unsigned_varint(value)


# -- writing ---------------------------------------------------------------------------------------------------


class _MessageWriter:
    def __init__(self, schema: MessageSchema, version: int) -> None:
        self._schema = schema
        self._version = version

    def struct(self, out: bytearray, fields: Sequence[Field], context: Versions, value: Mapping[str, Any]) -> None:
        version = self._version
        flexible = self._schema.flexible.member(version, context)
        tagged: list[tuple[int, bytes]] = []
        for spec in fields:
            if not spec.versions.member(version, context):
                continue
            item = value[spec.key] if spec.key in value else default_value(spec)
            if spec.tag is not None and spec.tagged.member(version, context):
                if not _is_default(spec, item):
                    encoded = bytearray()
                    self._value(encoded, spec, context, True, True, item)
                    tagged.append((spec.tag, bytes(encoded)))
                continue
            self._value(out, spec, context, flexible, False, item)
        if flexible:
            out += encode_unsigned_varint(len(tagged))
            for tag, payload in sorted(tagged):
                out += encode_unsigned_varint(tag)
                out += encode_unsigned_varint(len(payload))
                out += payload
        elif tagged:
            raise ValueError(f"{self._schema.name}: tagged fields in non-flexible version {version}")

    def _length(self, out: bytearray, length: int, flexible: bool, kind: str) -> None:
        if flexible:
            out += encode_unsigned_varint(length + 1)
        else:
            out += _FIXED["int16" if kind == "string" else "int32"].pack(length)

    def _check_null(self, spec: Field, context: Versions) -> None:
        if not spec.nullable.member(self._version, context):
            raise ValueError(f"{self._schema.name}.{spec.key} is not nullable in version {self._version}")

    def _value(
        self, out: bytearray, spec: Field, context: Versions, flexible: bool, tagged: bool, value: Any
    ) -> None:
        if spec.is_array:
            if value is None:
                self._check_null(spec, context)
                self._length(out, -1, flexible, "array")
                return
            self._length(out, len(value), flexible, "array")
            inner = context.intersect(spec.versions)
            for item in value:
                if spec.is_struct:
                    self.struct(out, spec.fields, inner, item)
                else:
                    self._scalar(out, spec, spec.element, context, flexible, item, element=True)
            return
        if spec.is_struct:
            if spec.nullable.member(self._version, context):
                if value is None:
                    out += b"\x00" if tagged else b"\xff"
                    return
                out += b"\x01"
            elif value is None:
                self._check_null(spec, context)
            self.struct(out, spec.fields, context.intersect(spec.versions), value)
            return
        self._scalar(out, spec, spec.element, context, flexible, value, element=False)

    def _scalar(
        self, out: bytearray, spec: Field, kind: str, context: Versions, flexible: bool, value: Any, *, element: bool
    ) -> None:
        if kind in _FIXED:
            out += _FIXED[kind].pack(value)
            return
        if kind == "uuid":
            out += value.bytes
            return
        if value is None:
            if element:
                raise ValueError(f"{self._schema.name}.{spec.key}: array elements are never null")
            self._check_null(spec, context)
            self._length(out, -1, flexible, kind)
            return
        raw = value.encode("utf-8") if kind == "string" else bytes(value)
        if kind == "string" and len(raw) > _MAX_STRING_LENGTH:
            raise ValueError(f"{self._schema.name}.{spec.key}: {len(raw)} bytes is too long for a string")
        self._length(out, len(raw), flexible, kind)
        out += raw


def write_message(schema: MessageSchema, version: int, value: Mapping[str, Any]) -> bytes:
    """Serialize ``value`` (missing fields take their defaults) as ``schema`` version ``version``, as Kafka's
    generated ``write`` does (tagged fields only when not default, in tag order). O(size).

    Raises ``ValueError`` or ``struct.error`` for a value the version cannot hold (null where not nullable,
    out-of-range numbers).
    """
    out = bytearray()
    _MessageWriter(schema, version).struct(out, schema.fields, schema.valid, value)
    return bytes(out)


# -- JSON ------------------------------------------------------------------------------------------------------


def message_json(schema: MessageSchema, version: int, value: Mapping[str, Any]) -> dict[str, Any]:
    """What Kafka's generated ``<Name>JsonConverter.write(message, version)`` builds: the fields present in
    ``version`` in schema order, tagged ones only when not default, uuids in Kafka's base64 text, bytes in
    standard base64, float64 as :class:`JavaDouble`, records as ``""``. O(size)."""
    return _struct_json(schema.fields, version, schema.valid, value)


def _struct_json(fields: Sequence[Field], version: int, context: Versions, value: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in fields:
        if not spec.versions.member(version, context):
            continue
        item = value[spec.key] if spec.key in value else default_value(spec)
        if spec.tag is not None and spec.tagged.member(version, context) and _is_default(spec, item):
            continue
        out[spec.key] = _value_json(spec, version, context, item, spec.is_array)
    return out


def _value_json(spec: Field, version: int, context: Versions, value: Any, array: bool) -> Any:
    if value is None:
        return None
    if array:
        return [_value_json(spec, version, context, item, False) for item in value]
    if spec.is_struct:
        return _struct_json(spec.fields, version, context.intersect(spec.versions), value)
    kind = spec.element
    if kind == "uuid":
        return uuid_to_kafka(value)
    if kind == "float64":
        return JavaDouble(value)
    if kind == "records":
        # JsonConverter.write(..., _serializeRecords=true) writes an empty binary node for records.
        return ""
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    return value


def java_double(value: float) -> str:
    """Java's ``Double.toString``: shortest round-trip digits, plain between 1e-3 and 1e7, else ``d.dddE±n``.
    O(1)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    point = len(digits) + exponent  # digits before the decimal point
    prefix = "-" if sign else ""
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{text}"
        whole = text[:point].ljust(point, "0")
        return f"{prefix}{whole}.{text[point:] or '0'}"
    return f"{prefix}{text[0]}.{text[1:] or '0'}E{point - 1}"


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _json_string(text: str) -> str:
    # Jackson escapes only quote, backslash and control characters (uppercase hex), never non-ASCII.
    parts = []
    for char in text:
        if char in _ESCAPES:
            parts.append(_ESCAPES[char])
        elif char < " ":
            parts.append(f"\\u{ord(char):04X}")
        else:
            parts.append(char)
    return '"' + "".join(parts) + '"'


def json_text(node: Any) -> str:
    """``node`` (dicts, lists, str, int, bool, None, :class:`JavaDouble`) printed as Jackson's
    ``JsonNode.toString()``: compact, keys in order, non-ASCII as is, NaN and infinities quoted. O(size)."""
    if node is None:
        return "null"
    if node is True:
        return "true"
    if node is False:
        return "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, str):
        return _json_string(node)
    if isinstance(node, JavaDouble):
        text = java_double(node.value)
        return f'"{text}"' if not math.isfinite(node.value) else text
    if isinstance(node, Mapping):
        return "{" + ",".join(f"{_json_string(key)}:{json_text(item)}" for key, item in node.items()) + "}"
    if isinstance(node, Sequence):
        return "[" + ",".join(json_text(item) for item in node) + "]"
    raise TypeError(f"no JSON form for {type(node).__name__}")
