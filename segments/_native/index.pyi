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
def store_entry(buffer: Buffer | None, slot: int, entry_size: int, first: int, second: int) -> None: ...
