"""Kafka's text form of a UUID (``Uuid.toString``): URL-safe base64 of the 16 big-endian bytes, no padding.

Used for topic ids (``partition.metadata``) and directory ids (``meta.properties``), e.g.
``AAAAAAAAAAAAAAAAAAAAAQ`` for the metadata topic.
"""

from __future__ import annotations

import base64
import re
import uuid

ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)

# Uuid.fromString decodes with Java's URL-safe decoder: only these 64 symbols, padding optional but complete
# when present. 22 symbols is the only length that yields 16 bytes; like Java, unused low bits of the last
# symbol are not checked.
_KAFKA_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")


def uuid_to_kafka(value: uuid.UUID) -> str:
    """The 22-character form Kafka writes for ``value``. O(1)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    """Decode Kafka's base64 UUID text, accepting what ``Uuid.fromString`` accepts. O(1).

    Raises ``ValueError`` for anything else (wrong length, a character outside the URL-safe alphabet).
    """
    if _KAFKA_UUID.fullmatch(text) is None:
        raise ValueError(f"not a base64 UUID: {text[:30]!r}")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))
