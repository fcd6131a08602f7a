from collections.abc import Callable, Iterable, Iterator, Sequence

from typing_extensions import Buffer

class Header:
    key: str
    value: bytes | None
    def __init__(self, key: str, value: bytes | None) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    __hash__: None  # type: ignore[assignment]

class SimpleRecord:
    value: bytes | None
    key: bytes | None
    timestamp: int
    headers: tuple[Header, ...]
    def __init__(
        self, value: bytes | None, key: bytes | None = None, timestamp: int = -1, headers: tuple[Header, ...] = ()
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    __hash__: None  # type: ignore[assignment]

class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    sequence: int
    size_in_bytes: int
    stored_timestamp: int
    checksum: int | None
    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...],
        sequence: int,
        size_in_bytes: int,
        stored_timestamp: int,
        checksum: int | None = None,
    ) -> None: ...
    def to_simple(self) -> SimpleRecord: ...
    def __eq__(self, other: object) -> bool: ...
    __hash__: None  # type: ignore[assignment]

class RecordReader(Iterator[Record]):
    def __init__(
        self,
        pieces: Iterable[Buffer],
        count: int,
        base_offset: int,
        base_timestamp: int,
        base_sequence: int,
        log_append_time: int | None,
        max_record_bytes: int,
    ) -> None: ...
    def __next__(self) -> Record: ...

class RecordSlicer(Iterator[tuple[bytes, int]]):
    def __init__(
        self,
        pieces: Iterable[Buffer],
        count: int,
        max_record_bytes: int,
        max_slice_records: int,
        max_slice_bytes: int,
    ) -> None: ...
    def __next__(self) -> tuple[bytes, int]: ...

def frame_region(region: Buffer, count: int, max_record_bytes: int) -> None: ...
def append_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> None: ...
def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> bytes: ...
def encode_batch(
    items: Sequence[SimpleRecord],
    offset_deltas: Sequence[int] | None,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    base_timestamp: int,
    log_append_time: int | None,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    compressor: Callable[[bytes], bytes] | None,
) -> bytes: ...
def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]: ...
def decode_varlong(buf: Buffer, pos: int) -> tuple[int, int]: ...
def encode_varint(value: int) -> bytes: ...
def encode_varlong(value: int) -> bytes: ...
def varint_size(value: int) -> int: ...
def varlong_size(value: int) -> int: ...

class RecordColumns:
    @property
    def rows(self) -> int: ...
    @property
    def offsets(self) -> bytearray: ...
    @property
    def timestamps(self) -> bytearray: ...
    @property
    def timestamp_types(self) -> bytearray: ...
    @property
    def key_offsets(self) -> bytearray: ...
    @property
    def key_data(self) -> bytearray: ...
    @property
    def key_validity(self) -> bytearray: ...
    @property
    def key_nulls(self) -> int: ...
    @property
    def value_offsets(self) -> bytearray: ...
    @property
    def value_data(self) -> bytearray: ...
    @property
    def value_validity(self) -> bytearray: ...
    @property
    def value_nulls(self) -> int: ...
    @property
    def headers(self) -> int: ...
    @property
    def header_offsets(self) -> bytearray: ...
    @property
    def header_key_offsets(self) -> bytearray: ...
    @property
    def header_key_data(self) -> bytearray: ...
    @property
    def header_value_offsets(self) -> bytearray: ...
    @property
    def header_value_data(self) -> bytearray: ...
    @property
    def header_value_validity(self) -> bytearray: ...
    @property
    def header_value_nulls(self) -> int: ...

def decode_columns(
    regions: Sequence[Buffer],
    counts: Sequence[int],
    base_offsets: Sequence[int],
    base_timestamps: Sequence[int],
    log_append_times: Sequence[int | None],
    headers: bool,
) -> RecordColumns | int: ...
