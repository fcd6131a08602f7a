from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from segments.append_origin import AppendOrigin
from segments.errors import CorruptRecordError

RESERVE_LEAST_BYTES: int
SCAN_OK: int
SCAN_CORRUPT: int
SCAN_NOT_V2: int
SCAN_TOO_LARGE: int
SCAN_INCOMPLETE: int
SCAN_OFFSET_OVERFLOW: int
SCAN_INVALID: int

_S = TypeVar("_S", bound="SegmentAppendState")

class AppendScan:
    @property
    def data(self) -> bytes | memoryview: ...
    @property
    def failure(self) -> int: ...
    @property
    def failure_position(self) -> int: ...
    @property
    def failure_size(self) -> int: ...
    @property
    def error(self) -> CorruptRecordError | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def batches(self) -> int: ...
    @property
    def compressed_batches(self) -> int: ...
    @property
    def producer_batches(self) -> int: ...
    @property
    def legacy_batches(self) -> int: ...
    @property
    def records(self) -> int: ...
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def largest_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    @property
    def log_append_time_batches(self) -> int: ...
    def spans(self, *, compressed: bool = False, legacy: bool = False) -> list[tuple[int, int]]: ...
    def producer_spans(self) -> list[tuple[int, int, int]]: ...
    def buffers(self) -> list[bytes | memoryview]: ...
    def decoded_legacy(self, facts: Iterable[tuple[int, int]]) -> None: ...
    def epoch_starts(self) -> list[tuple[int, int]]: ...
    def assign_offsets(self, next_offset: int, leader_epoch: int, append_time: int | None = None) -> None: ...
    def check_follower(self, log_end_offset: int) -> tuple[int, int] | None: ...

def scan_append(records: bytes | memoryview, max_message_bytes: int, leader: bool, client: bool) -> AppendScan: ...

class LogAppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    segment_base_offset: int
    position: int
    valid_bytes: int
    batches: int
    records: int
    duplicate: bool
    def __init__(
        self,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        segment_base_offset: int,
        position: int,
        valid_bytes: int,
        batches: int,
        records: int,
        duplicate: bool = False,
    ) -> None: ...

class EpochCacheState:
    _entries: Any
    _lock: Any
    _file: Any
    def assign(self, epoch: int, start_offset: int) -> bool: ...

class LogSegmentsState:
    _segments: Any
    _lock: Any
    _floor_snapshot: Any
    @property
    def _last(self) -> Any: ...
    def _set_last(self, segment: SegmentAppendState | None) -> None: ...

class ProducerStateManagerState:
    map_end_offset: int
    _dir: Any
    _dir_name: Any
    producer_id_expiration_ms: Any
    _clock: Any
    _producers: Any
    _ongoing: Any
    _unreplicated: Any
    _snapshots: Any
    _set_aside: Any
    _last_snap_offset: Any

class WriterLock:
    @property
    def queued(self) -> int: ...
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, kind: object, error: object, trace: object) -> None: ...
    def _is_owned(self) -> bool: ...

class LogDirState:
    offline: bool
    full: bool
    failure: str | None
    def __init__(self, offline: bool = False, full: bool = False, failure: str | None = None) -> None: ...
    def mark_offline(self, err: BaseException) -> bool: ...

class LogAppendState:
    config: Any
    _facts: Any
    _lock: Any
    _closed: bool
    _offline_error: Any
    clock: Any
    key_index: Any
    group_commit: Any
    _end: Any
    _recovery_point: Any
    dir: Any
    topic_partition: Any
    readers: Any
    deleter: Any
    _run_async: Any
    recovery: Any
    _truncation_sequence: Any
    _log_start_offset: Any
    _high_watermark: Any
    _high_watermark_provider: Any
    last_flush_ms: Any
    _rng: Any
    _limits: Any
    truncation_observer: Any
    @property
    def dir_state(self) -> Any: ...
    @property
    def segments(self) -> Any: ...
    @property
    def leader_epochs(self) -> Any: ...
    @property
    def producer_state(self) -> Any: ...
    def _set_parts(
        self, segments: LogSegmentsState, leader_epochs: EpochCacheState, producer_state: ProducerStateManagerState
    ) -> None: ...
    def _set_dir_state(self, dir_state: LogDirState) -> None: ...
    def append_as_leader(
        self, records: bytes, *, leader_epoch: int = 0, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> LogAppendInfo: ...
    def append_as_follower(self, records: bytes) -> LogAppendInfo: ...

class LazyIndexState:
    @property
    def _index(self) -> Any: ...
    def _set_index(self, index: Any) -> None: ...
    _path: Any
    _opener: Any
    _resize_to: Any
    _lock: Any

class FileAppendState:
    _fd: Any
    _size: Any
    _writable: Any
    _path: Any
    _path_name: Any
    _reserved_end: int
    _reserve_at: int
    def append(self, *buffers: bytes | memoryview) -> int: ...

class SegmentAppendState:
    base_offset: int
    index_interval_bytes: int
    roll_jitter_ms: int
    created_ms: int
    _bytes_since_last_index_entry: int
    _max_timestamp: int | None
    _offset_of_max_timestamp: int
    rolling_based_timestamp: int | None
    @property
    def _log(self) -> Any: ...
    @property
    def _offset_index(self) -> Any: ...
    @property
    def _time_index(self) -> Any: ...
    def _setup(
        self,
        directory: Any,
        base_offset: int,
        file_suffix: str,
        size: int | None,
        writable: bool,
        max_index_size: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        clock: Callable[[], float],
        created_ms: int | None = None,
        txn_index_listed: bool = True,
    ) -> None: ...
    @classmethod
    def _listed(
        cls: type[_S],
        directory: Any,
        base_offsets: list[int],
        sizes: list[int | None],
        txn_indexes_listed: list[bool],
        roll_jitters_ms: list[int],
        writable: bool,
        max_index_size: int,
        index_interval_bytes: int,
        clock: Callable[[], float],
        created_ms: int,
    ) -> list[_S]: ...
    def _set_log(self, log: FileAppendState) -> None: ...
    def _set_index_holders(self, offset_index: LazyIndexState | None, time_index: LazyIndexState | None) -> None: ...
    _txn_index: Any
    _listed_size: Any
    _txn_index_unlisted: Any
    _resize_indexes_to: Any
    _suffix: Any
    _closed: Any
    _directory: Any
    _writable: Any
    _max_index_size: Any
    _clock: Any
    def roll_due(
        self, incoming_bytes: int, max_timestamp: int, last_offset: int, now_ms: int, segment_bytes: int, roll_ms: int
    ) -> bool: ...
    def append_scan(self, scan: AppendScan, largest_timestamp: int, shallow_offset_of_max_timestamp: int) -> int: ...
    def append_batches(
        self,
        buffers: Iterable[bytes | memoryview],
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
    ) -> int: ...
