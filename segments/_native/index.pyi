import mmap

from typing_extensions import Buffer

FIELD_INT32: int
FIELD_INT64: int

def search(
    buffer: Buffer,
    entries: int,
    entry_size: int,
    field_offset: int,
    field: int,
    base: int,
    target: int,
    largest_lower_bound: bool,
    warm_entries: int,
) -> int: ...

class IndexEntries:
    _mm: mmap.mmap | None
    _entries: int
    _max_entries: int
    base_offset: int
    writable: bool
    _closed: bool
    def _hold_map(self, mapped: mmap.mmap | None) -> None: ...
    def _forget_last(self) -> None: ...
    def _last_fields(self) -> tuple[int, int, int]: ...
    def _append_offset_entry(self, offset: int, position: int) -> None: ...
    def _maybe_append_time_entry(self, timestamp: int, offset: int, skip_full_check: bool) -> None: ...
    def is_full(self) -> bool: ...
