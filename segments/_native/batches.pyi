from collections.abc import Callable, Iterator
from os import PathLike

from typing_extensions import Buffer

from segments.records import DecodeLimits, Record, RecordBatch

def register(default_type: type[RecordBatchHeader], legacy_type: Callable[[memoryview], RecordBatch]) -> None: ...

class RecordBatchHeader:
    _base_offset: int
    _length: int
    _partition_leader_epoch: int
    _magic: int
    _crc: int
    _attributes: int
    _last_offset_delta: int
    _base_timestamp: int
    _max_timestamp: int
    _producer_id: int
    _producer_epoch: int
    _base_sequence: int
    _records_count: int
    def __init__(self, buffer: Buffer) -> None: ...
    @property
    def _buffer(self) -> bytes | bytearray | memoryview: ...
    @property
    def magic(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def checksum(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def first_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def delete_horizon_ms(self) -> int | None: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def records_count(self) -> int: ...
    def count_records(self) -> int: ...
    def compute_checksum(self) -> int: ...
    def ensure_valid(self) -> None: ...

class FileBatch:
    @property
    def position(self) -> int: ...
    @property
    def batch(self) -> RecordBatch: ...
    @property
    def path(self) -> str | None: ...
    def __init__(self, position: int, batch: RecordBatch, path: str | None = None) -> None: ...
    def iter_records(self, limits: DecodeLimits | None = None, *, check_crc: bool = True) -> Iterator[Record]: ...
    def ensure_valid(self) -> None: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def end_position(self) -> int: ...

class BatchWalk(Iterator[FileBatch]):
    def __init__(
        self,
        read: Callable[[int, int], bytes | memoryview] | None,
        start: int,
        limit: int,
        *,
        path: str | None = None,
        max_batch_size: int | None = None,
        buffer: Buffer | None = None,
    ) -> None: ...
    def __iter__(self) -> BatchWalk: ...
    def __next__(self) -> FileBatch: ...

def locate_batch(
    fd: int, start: int, limit: int, target: int, by_timestamp: bool = False, path: str | None = None
) -> tuple[int, int, int] | None: ...
def next_offset_from(fd: int, start: int, limit: int, base_offset: int, path: str | None = None) -> int: ...
def tail_next_offset(
    index_path: str | PathLike[str], log_path: str | PathLike[str], index_size: int, log_size: int,
    base_offset: int, max_tail: int,
) -> int | None: ...
class TimestampAndOffset:
    @property
    def timestamp(self) -> int: ...
    @property
    def offset(self) -> int: ...
    def __init__(self, timestamp: int, offset: int) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class FetchSlice:
    @property
    def offset(self) -> int: ...
    @property
    def segment_base_offset(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def first_entry_incomplete(self) -> bool: ...
    @property
    def records(self) -> bytes: ...
    @property
    def path(self) -> str | None: ...
    def __init__(
        self,
        offset: int,
        segment_base_offset: int,
        position: int,
        size: int,
        first_entry_incomplete: bool = False,
        records: bytes = b"",
        path: str | None = None,
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

def fetch_slice(
    fd: int,
    file_size: int,
    path: str | None,
    index_map: Buffer | None,
    index_entries: int,
    index_path: str | PathLike[str] | None,
    base_offset: int,
    warm_entries: int,
    start_offset: int,
    max_position: int | None,
    max_size: int,
    min_one_message: bool,
) -> FetchSlice | None: ...
def indexed_position(
    index_map: Buffer | None,
    entries: int,
    index_path: str | PathLike[str] | None,
    base_offset: int,
    warm_entries: int,
    offset: int,
) -> int: ...
def find_timestamp(
    fd: int,
    file_size: int,
    path: str | PathLike[str] | None,
    time_map: Buffer | None,
    time_entries: int,
    time_index_path: str | PathLike[str] | None,
    offset_map: Buffer | None,
    offset_entries: int,
    offset_index_path: str | PathLike[str] | None,
    base_offset: int,
    time_warm: int,
    offset_warm: int,
    timestamp: int,
    starting_offset: int,
    max_record_bytes: int,
    decode: Callable[[int, bytes, int, int, str | PathLike[str] | None], TimestampAndOffset | None],
) -> TimestampAndOffset | None: ...
def find_record_by_timestamp(
    region: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    target: int,
    starting_offset: int,
    max_record_bytes: int,
) -> tuple[int, int] | None: ...

class RecoveryScan(Iterator[FileBatch]):
    batches: int
    max_timestamp: int
    offset_of_max_timestamp: int
    last_index_entry: int
    rejected_entry: tuple[int, int, int, int] | None
    def __init__(
        self,
        source: int | Callable[[int, int], bytes | memoryview],
        limit: int,
        base_offset: int,
        next_segment_base: int | None,
        index_interval_bytes: int,
        offset_index_capacity: int,
        time_index_capacity: int,
        check_continues: Callable[[int, int, int, int | None, int], None],
        path: str | None = None,
        leader_epoch: int | None = None,
    ) -> None: ...
    @property
    def valid_bytes(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def offset_entries(self) -> bytes: ...
    @property
    def time_entries(self) -> bytes: ...
    def write_indexes(self, offset_index_path: str | PathLike[str], time_index_path: str | PathLike[str]) -> None: ...
    def __iter__(self) -> RecoveryScan: ...
    def __next__(self) -> FileBatch: ...
