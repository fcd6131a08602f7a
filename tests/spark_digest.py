"""One digest of a DataFrame of ``kafka-log`` rows, shared by the cluster test and its child process."""

from __future__ import annotations

import hashlib
from typing import Any


def row_digest(frame: Any) -> tuple[int, str]:
    """``(rows, sha256)`` over the sorted ``(topic, partition, offset, key, value)`` of every row. O(rows) on the
    driver: for test-sized data only."""
    rows = sorted(
        (
            r["topic"],
            r["partition"],
            r["offset"],
            None if r["key"] is None else bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]),
        )
        for r in frame.select("topic", "partition", "offset", "key", "value").collect()
    )
    digest = hashlib.sha256()
    for topic, partition, offset, key, value in rows:
        for field in (topic.encode(), str(partition).encode(), str(offset).encode(), key, value):
            digest.update(b"\xff" if field is None else len(field).to_bytes(4, "big") + field)
    return len(rows), digest.hexdigest()
