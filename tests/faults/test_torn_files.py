"""Torn and corrupted files (issue 6): every file of a log dir is cut or bit-flipped at random positions, then
loaded again by a :class:`~logmgr.log_manager.LogManager` (and, for partition-level files, by plain
:func:`~logmgr.log_loader.load_log`).

One reference log dir is built once: two partitions of several segments each, batches in every codec, an
idempotent producer, a transactional producer with committed and aborted transactions (and one left open), three
leader epochs (three broker sessions), a log start offset above the first segment, producer snapshots and every
checkpoint, all written by a clean shutdown. Each case copies it, damages one file at a random position (truncate,
flip one bit, or xor one byte with a random mask), loads it and checks the outcome against an oracle computed
independently from the damaged bytes.

The damage model is Kafka's crash model. Kafka trusts everything below the recovery point (it was fsynced) and
everything after a clean shutdown, and recovers the rest. So a damaged ``.log``, ``.index``, ``.timeindex`` or
``.txnindex`` is loaded after an unclean shutdown whose recovery-point checkpoint lies at or below the damage (the
damaged bytes were not yet flushed); a damaged ``.snapshot`` likewise, or after a clean shutdown when it is the
newest snapshot (the only one a clean load reads); checkpoint and marker files are damaged under either shutdown
kind. Damage Kafka trusts (below the recovery point) is pinned separately by
:func:`test_damage_below_the_recovery_point_is_trusted_as_kafka_does`.

What every case asserts:

* ``.log``: the segment keeps exactly its longest valid prefix. The oracle walks the damaged bytes with Kafka's
  file rule and the segments package's own CRC check (``ensure_valid``), and also ends the prefix at the first
  batch whose offsets do not continue the segment (not above the previous batch, below the segment base, or at or
  past the next segment's base): Kafka's format leaves ``baseOffset`` and ``partitionLeaderEpoch`` outside the CRC,
  so a flip there is only visible through the offsets. A truncation deletes every later segment (Kafka's rule).
  Every batch before the damage is served byte-identical; a flip outside the CRC that still leaves increasing
  offsets cannot be told from valid data by any reader: its records are counted as ``undetectable``, not as
  corrupt.
* indexes: after the load every offset and time index equals a fresh recovery of its ``.log`` (recovered
  segments), offset lookups find every batch, ``.txnindex`` entries equal the oracle's replay of the surviving
  batches (a lost marker merges two transactions), and ``verify`` finds nothing.
* snapshots: a damaged snapshot the load reads is deleted with a warning naming it, the producer state is rebuilt
  by replay: the last stable offset is where the replay leaves a transaction open, and a retry of the idempotent
  producer's last batch is answered as a duplicate with its original offsets.
* checkpoints: an unreadable recovery-point checkpoint is logged and every segment is recovered; an unreadable
  log-start-offset checkpoint is logged and the log starts at its first segment; a readable but changed one is
  honoured as Kafka honours it (a log start above the log end deletes every segment). The clean-shutdown marker
  counts by its presence, whatever its content.
* refusals (typed errors, as Kafka refuses): an unparseable ``leader-epoch-checkpoint`` makes the load raise
  :class:`CorruptCheckpointError` naming the file (Kafka's ``CheckpointFileWithFailureHandler`` turns the
  IOException into a KafkaStorageException and takes the log dir offline). ``meta.properties``,
  ``partition.metadata``, ``replication-offset-checkpoint`` and ``cleaner-offset-checkpoint`` are not read by
  the LogManager (in Kafka the broker startup, the partition load and the ReplicaManager refuse a malformed one
  or take its dir offline; the cleaner logs it and starts from scratch); their readers raise
  :class:`CorruptCheckpointError` and ``verify`` reports the file, and nothing else.
* after every load: the log's invariants hold, appends continue, and after a clean shutdown ``verify_paths`` is
  clean (but for the files above).

Bugs found here are pinned by ``test_bug_*`` tests at the end.

``LOGMGR_SOAK=1`` runs twenty times more cases; ``LOGMGR_TORN_SEED`` changes the seed; ``LOGMGR_TORN_CASE=<n>``
runs only case ``n`` (the failure message names it). ``LOGMGR_FAULT_REPORT`` names a file to which a JSON line
with the figures is appended. Cases run in a RAM-backed directory when the machine has one (``/dev/shm``): each
load fsyncs a dozen files, and there are thousands of loads.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import struct
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE
from checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    parse_leader_epoch_checkpoint,
)
from checkpoints.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    parse_meta_properties,
    write_meta_properties,
)
from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    parse_offset_checkpoint,
)
from checkpoints.partition_metadata import PARTITION_METADATA_FILE, parse_partition_metadata
from logmgr import log_manager as log_manager_module
from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from logmgr.log_manager import LogManager
from logmgr.scheduler import ManualScheduler
from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.errors import CorruptCheckpointError, CorruptRecordError, StorageFormatError
from segments.file_records import batch_view
from segments.log_segment import LogSegment
from segments.naming import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    TopicPartition,
    offset_from_file_name,
)
from segments.records import ControlRecordType, DefaultRecordBatch, Header, SimpleRecord
from segments.transaction_index import AbortedTxn
from tests.conftest import calm_disk

SEED = int(os.environ.get("LOGMGR_TORN_SEED", "20240606"))
SOAK = os.environ.get("LOGMGR_SOAK") == "1"
CASES = 1000 * (20 if SOAK else 1)
ONLY_CASE = os.environ.get("LOGMGR_TORN_CASE")
"""Run only the case with this index (to reproduce a failure: same seed, same case)."""
REPORT = os.environ.get("LOGMGR_FAULT_REPORT")

TOPIC = "torn"
PARTITIONS = 2
T0 = 1_700_000_000_000
IDEMPOTENT_PID = 5000
"""Partition ``p``'s idempotent producer is ``IDEMPOTENT_PID + p``, its transactional one ``TXN_PID + p``."""
TXN_PID = 6000
SESSIONS = 3
APPENDS_PER_SESSION = 18
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_TXN_ENTRY = AbortedTxn.SIZE
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


def broker_properties(log_dir: Path) -> dict[str, str]:
    """Small segments and index intervals so a short log has several segments and index entries each."""
    return {
        "log.dirs": str(log_dir),
        "log.segment.bytes": "2000",
        "log.index.interval.bytes": "300",
        "log.index.size.max.bytes": "4096",
        "log.segment.delete.delay.ms": "0",
        "file.delete.delay.ms": "0",
    }


def _manager(log_dir: Path, clock: ManualClock) -> LogManager:
    return LogManager(
        BrokerConfig.from_properties(broker_properties(log_dir)), clock=clock, scheduler=ManualScheduler(clock), disk_usage=calm_disk
    )


def _log_config(log_dir: Path) -> LogConfig:
    return BrokerConfig.from_properties(broker_properties(log_dir)).effective_log_config(TOPIC)


# -- the reference log dir ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RefBatch:
    """One batch as the test's own header walk sees it (no segments code involved)."""

    position: int
    data: bytes
    base_offset: int
    last_offset: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: int
    transactional: bool
    control: bool

    @classmethod
    def parse(cls, position: int, data: bytes) -> RefBatch:
        fields = _HEADER.unpack_from(data)
        base, _, _, _, _, attributes, last_delta, _, max_ts, pid, epoch, base_seq, count = fields
        return cls(
            position, data, base, base + last_delta, max_ts, pid, epoch, base_seq, count,
            bool(attributes & _TRANSACTIONAL), bool(attributes & _CONTROL),
        )


@dataclass(slots=True)
class RefSegment:
    base: int
    data: bytes
    batches: list[RefBatch]
    aborted: list[AbortedTxn]

    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.base


@dataclass(slots=True)
class RefPartition:
    segments: list[RefSegment]
    snapshots: list[int]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset()

    def segment_of(self, base: int) -> RefSegment:
        return next(s for s in self.segments if s.base == base)


@dataclass(slots=True)
class Reference:
    """The clean log dir (``root``, marker included), what it holds, and the time its writer stopped."""

    root: Path
    clock_ms: int
    partitions: dict[TopicPartition, RefPartition]
    recovery_points: dict[TopicPartition, int]
    log_start_offsets: dict[TopicPartition, int]
    files: dict[str, list[str]]
    """Non-empty damageable files by kind, as paths relative to ``root``."""


def _split_batches(data: bytes) -> list[RefBatch]:
    """The reference's batches by their length fields (the reference is known to be whole)."""
    batches = []
    position = 0
    while position < len(data):
        _, size = _PREFIX.unpack_from(data, position)
        end = position + 12 + size
        batches.append(RefBatch.parse(position, data[position:end]))
        position = end
    return batches


def _aborted_entries(data: bytes) -> list[AbortedTxn]:
    return [AbortedTxn.from_bytes(data[i : i + _TXN_ENTRY]) for i in range(0, len(data) - _TXN_ENTRY + 1, _TXN_ENTRY)]


def _records(rng: random.Random, first_offset: int) -> list[SimpleRecord]:
    return [
        SimpleRecord(
            b"value %d " % (first_offset + k) * rng.randint(1, 6) + rng.randbytes(rng.randint(0, 24)),
            None if k == 2 else b"key-%d" % (first_offset + k),
            headers=(Header("h", b"%d" % k), Header("null", None)) if k % 3 == 0 else (),
        )
        for k in range(rng.randint(1, 5))
    ]


def _build(root: Path) -> int:
    """Write the reference with three broker sessions (leader epochs 0-2); returns the clock's final time."""
    clock = ManualClock(T0)
    rng = random.Random(7)
    codecs = list(CompressionType)
    sequences: Counter[int] = Counter()
    open_txn = [False] * PARTITIONS
    txn_first = [0] * PARTITIONS
    for session in range(SESSIONS):
        manager = _manager(root, clock)
        manager.startup()
        for partition in range(PARTITIONS):
            log = manager.get_or_create_log(TOPIC, partition)
            idempotent, transactional = IDEMPOTENT_PID + partition, TXN_PID + partition
            for _ in range(APPENDS_PER_SESSION):
                clock.advance(rng.randint(1, 50))
                records = _records(rng, log.log_end_offset)
                codec = rng.choice(codecs)
                kind = rng.random()
                if kind < 0.3:
                    log.append_records(
                        records, compression=codec, producer_id=idempotent, producer_epoch=0,
                        base_sequence=sequences[idempotent], leader_epoch=session,
                    )
                    sequences[idempotent] += len(records)
                elif kind < 0.55:
                    if not open_txn[partition]:
                        txn_first[partition] = log.log_end_offset
                    log.append_records(
                        records, compression=codec, producer_id=transactional, producer_epoch=0,
                        base_sequence=sequences[transactional], is_transactional=True, leader_epoch=session,
                    )
                    sequences[transactional] += len(records)
                    open_txn[partition] = True
                elif kind < 0.65 and open_txn[partition]:
                    marker = ControlRecordType.ABORT if rng.random() < 0.5 else ControlRecordType.COMMIT
                    log.append_end_txn_marker(transactional, 0, marker, 3, leader_epoch=session)
                    open_txn[partition] = False
                else:
                    log.append_records(records, compression=codec, leader_epoch=session)
            if session == 1 and partition == 1:
                # No transaction may start below the first segment left: the oracle walks only those segments (and a
                # truncation below its marker would reopen it, with its first offset below the log start).
                if open_txn[partition]:
                    log.append_end_txn_marker(transactional, 0, ControlRecordType.COMMIT, 3, leader_epoch=session)
                    open_txn[partition] = False
                log.delete_records_before(min(log.log_end_offset - 30, txn_first[partition]))
                manager.cleanup_logs()
                manager.delete_logs()
        manager.shutdown()
    if not any(open_txn):
        raise AssertionError("the reference should end with an open transaction")
    return clock.time_ms()


def _write_foreign_checkpoints(root: Path, ends: dict[TopicPartition, int]) -> None:
    """Files logmgr does not write itself: high watermarks, cleaner offsets, meta.properties."""
    OffsetCheckpointFile(root / REPLICATION_OFFSET_CHECKPOINT_FILE).write(ends)
    OffsetCheckpointFile(root / CLEANER_OFFSET_CHECKPOINT_FILE).write({tp: end // 2 for tp, end in ends.items()})
    meta = MetaProperties.create(
        version=1,
        node_id=1,
        cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
        directory_id=None,
        now=datetime(2024, 6, 6, 12, 0, tzinfo=UTC),
    )
    write_meta_properties(root / META_PROPERTIES_FILE, meta)


def _describe(root: Path, clock_ms: int) -> Reference:
    partitions: dict[TopicPartition, RefPartition] = {}
    files: dict[str, list[str]] = {}
    for partition in range(PARTITIONS):
        tp = TopicPartition(TOPIC, partition)
        pdir = root / str(tp)
        segments = []
        for path in sorted(pdir.glob(f"*{LOG_SUFFIX}")):
            base = offset_from_file_name(path.name)
            data = path.read_bytes()
            txn = path.with_name(path.name[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX)
            aborted = _aborted_entries(txn.read_bytes()) if txn.exists() else []
            segments.append(RefSegment(base, data, _split_batches(data), aborted))
        snapshots = sorted(offset_from_file_name(p.name) for p in pdir.glob(f"*{SNAPSHOT_SUFFIX}"))
        partitions[tp] = RefPartition(segments, snapshots)
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.stat().st_size == 0:
            continue
        files.setdefault(_kind_of(path.name), []).append(str(path.relative_to(root)))
    return Reference(
        root,
        clock_ms,
        partitions,
        OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT_FILE).read(),
        OffsetCheckpointFile(root / LOG_START_OFFSET_CHECKPOINT_FILE).read(),
        files,
    )


def _kind_of(name: str) -> str:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX):
        if name.endswith(suffix):
            return suffix
    return name


SEGMENT_KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
PARTITION_KINDS = (*SEGMENT_KINDS, SNAPSHOT_SUFFIX, LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE)
UNREAD_KINDS = (
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CLEANER_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
)
"""Files the LogManager neither reads nor rewrites (see the module docstring)."""
KIND_WEIGHTS = {
    LOG_SUFFIX: 8,
    INDEX_SUFFIX: 2,
    TIME_INDEX_SUFFIX: 2,
    TXN_INDEX_SUFFIX: 2,
    SNAPSHOT_SUFFIX: 3,
    RECOVERY_POINT_CHECKPOINT_FILE: 2,
    LOG_START_OFFSET_CHECKPOINT_FILE: 2,
    REPLICATION_OFFSET_CHECKPOINT_FILE: 1,
    CLEANER_OFFSET_CHECKPOINT_FILE: 1,
    LEADER_EPOCH_CHECKPOINT_FILE: 2,
    PARTITION_METADATA_FILE: 1,
    META_PROPERTIES_FILE: 1,
    CLEAN_SHUTDOWN_FILE: 1,
}


@pytest.fixture(scope="module")
def work_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="logmgr-torn-", dir=shm))
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("torn")


@pytest.fixture(scope="module")
def reference(work_root: Path) -> Reference:
    root = work_root / "reference"
    clock_ms = _build(root)
    # After a clean shutdown every recovery point is its log end.
    _write_foreign_checkpoints(root, OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT_FILE).read())
    (root / ".lock").unlink()
    reference = _describe(root, clock_ms)
    for tp, partition in reference.partitions.items():
        assert partition.log_end_offset == reference.recovery_points[tp]
        # The oracle's transaction replay reproduces the broker's .txnindex files.
        copies = [RefSegment(s.base, s.data, s.batches, []) for s in partition.segments]
        replay_transactions(copies)
        assert [s.aborted for s in copies] == [s.aborted for s in partition.segments]
        assert any(s.aborted for s in partition.segments)
    assert verify_paths([root]).ok
    return reference


# -- cases ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Damage:
    file: str
    """Path relative to the log dir."""
    position: int
    mask: int | None
    """``None``: the file is cut at ``position``; else the byte there is xor-ed with ``mask``."""

    def apply(self, root: Path) -> None:
        path = root / self.file
        if self.mask is None:
            os.truncate(path, self.position)
            return
        with open(path, "r+b") as f:
            f.seek(self.position)
            byte = f.read(1)[0]
            f.seek(self.position)
            f.write(bytes([byte ^ self.mask]))

    def __str__(self) -> str:
        what = "cut" if self.mask is None else f"xor 0x{self.mask:02x}"
        return f"{self.file} {what} at {self.position}"


@dataclass(frozen=True, slots=True)
class Case:
    index: int
    kind: str
    damage: Damage
    clean: bool
    recovery_point: int | None
    """For unclean cases of partition-level files: the damaged partition's recovery-point checkpoint entry."""

    @property
    def tp(self) -> TopicPartition | None:
        """The damaged partition; ``None`` for a file at the root of the log dir."""
        return _tp_of(self.damage.file) if "/" in self.damage.file else None

    def __str__(self) -> str:
        shutdown = "clean" if self.clean else f"unclean, recovery point {self.recovery_point}"
        return f"case {self.index} (seed {SEED}): {self.damage} ({shutdown})"


def _recovery_point_for(rng: random.Random, upper: int, segment_base: int) -> int:
    """A recovery point at or below ``upper``: the damaged bytes were not flushed yet."""
    pick = rng.random()
    if pick < 0.25:
        return upper
    if pick < 0.5:
        return min(segment_base, upper)
    return rng.randint(0, upper)


def _damage(rng: random.Random, file: str, size: int) -> Damage:
    position = rng.randrange(size)
    if rng.random() < 0.35:
        return Damage(file, position, None)
    mask = 1 << rng.randrange(8) if rng.random() < 0.75 else rng.randint(1, 255)
    return Damage(file, position, mask)


def generate_cases(reference: Reference, rng: random.Random, count: int) -> Iterator[Case]:
    kinds = [kind for kind in KIND_WEIGHTS if reference.files.get(kind)]
    weights = [KIND_WEIGHTS[kind] for kind in kinds]
    for index in range(count):
        kind = rng.choices(kinds, weights)[0]
        file = rng.choice(reference.files[kind])
        damage = _damage(rng, file, (reference.root / file).stat().st_size)
        clean, recovery_point = rng.random() < 0.5, None
        if kind == CLEAN_SHUTDOWN_FILE:
            clean = True
        elif kind in SEGMENT_KINDS or kind == SNAPSHOT_SUFFIX:
            partition = reference.partitions[_tp_of(file)]
            offset = offset_from_file_name(Path(file).name)
            if kind == SNAPSHOT_SUFFIX:
                newest = offset == partition.snapshots[-1]
                clean = newest and rng.random() < 0.5
                recovery_point = None if clean else _recovery_point_for(rng, offset, offset)
            else:
                clean = False
                segment = partition.segment_of(offset)
                recovery_point = _recovery_point_for(rng, _unflushed_from(partition, segment, kind, damage), offset)
        yield Case(index, kind, damage, clean, recovery_point)


def _tp_of(file: str) -> TopicPartition:
    return TopicPartition(TOPIC, int(file.split("/")[0].rsplit("-", 1)[1]))


def _unflushed_from(partition: RefPartition, segment: RefSegment, kind: str, damage: Damage) -> int:
    """The highest recovery point that still leaves the damaged bytes unflushed: the first offset of the batch
    holding the damaged ``.log`` byte; for an index, any offset of its segment."""
    if kind == LOG_SUFFIX:
        return next(b.base_offset for b in segment.batches if damage.position < b.position + len(b.data))
    following = [s.base for s in partition.segments if s.base > segment.base]
    return following[0] - 1 if following else partition.log_end_offset


# -- the oracle -------------------------------------------------------------------------------------------------


def valid_prefix(data: bytes, base: int, upper: int | None) -> list[RefBatch]:
    """The batches a recovery must keep: Kafka's file rule (a batch needs more than 17 bytes left and its whole
    declared size), the segments package's CRC check, and offsets that continue the segment: above the previous
    batch, not below ``base``, within 32-bit relative offsets and below ``upper`` (the next segment's base)."""
    kept: list[RefBatch] = []
    position = 0
    previous_last: int | None = None
    while len(data) - position > 17:
        _, size = _PREFIX.unpack_from(data, position)
        end = position + 12 + size
        if size < 14 or end > len(data):
            break
        raw = data[position:end]
        try:
            view = batch_view(raw)
            view.ensure_valid()
        except CorruptRecordError:
            break
        first, last = view.base_offset, view.last_offset
        if (
            first < base
            or (previous_last is not None and first <= previous_last)
            or last - base > INT32_MAX
            or (upper is not None and last >= upper)
        ):
            break
        kept.append(RefBatch.parse(position, raw))
        previous_last = last
        position = end
    return kept


@dataclass(slots=True)
class PartitionExpectation:
    log_start_offset: int
    log_end_offset: int
    segments: list[RefSegment]
    """The segments that must exist after the load, with the batches each must hold."""
    recovered_segments: int
    truncated_bytes: int
    recovered_from: int | None
    """Base offset of the first recovered segment (``None``: nothing recovered)."""
    all_deleted: bool = False
    last_stable_offset: int | None = None
    """Where the earliest open transaction starts, else the log end (``None``: the log start, all deleted)."""

    def batches(self) -> list[RefBatch]:
        return [b for s in self.segments for b in s.batches]


@dataclass(slots=True)
class Expectation:
    refusal: type[StorageFormatError] | None
    partitions: dict[TopicPartition, PartitionExpectation]
    errors_logged: list[str] = field(default_factory=list)
    """Paths the manager must log as unreadable."""
    snapshot_warning: bool = False
    undetectable_records: int = 0
    unread_file_corrupt: bool = False


def kafka_epoch_entries(entries: list[EpochEntry]) -> list[EpochEntry] | None:
    """What Kafka's ``LeaderEpochFileCache`` holds after reading ``entries`` (``None``: it refuses them): each is
    assigned in turn; an entry with a negative epoch or offset throws; one whose epoch differs from the latest's,
    or that starts below it, first removes the newest entries with an epoch or start offset at or above its own."""
    held: list[EpochEntry] = []
    for entry in entries:
        if entry.epoch < 0 or entry.start_offset < 0:
            return None
        if held and held[-1].epoch == entry.epoch and entry.start_offset >= held[-1].start_offset:
            continue
        while held and (held[-1].epoch >= entry.epoch or held[-1].start_offset >= entry.start_offset):
            held.pop()
        held.append(entry)
    return held


def _read_offset_checkpoint(path: Path) -> dict[TopicPartition, int] | None:
    try:
        return parse_offset_checkpoint(path.read_bytes(), path)
    except CorruptCheckpointError:
        return None


def _txn_index_fails_sanity(data: bytes, base: int) -> bool:
    """Kafka's ``TransactionIndex.sanityCheck``, computed from the bytes: a complete entry whose version's first
    byte is positive or whose last offset is below the segment base."""
    for start in range(0, len(data) - _TXN_ENTRY + 1, _TXN_ENTRY):
        version_byte = struct.unpack_from(">b", data, start)[0]
        last_offset = struct.unpack_from(">q", data, start + 18)[0]
        if version_byte > 0 or last_offset < base:
            return True
    return False


def _floor_index(bases: list[int], offset: int) -> int:
    """Index of the segment holding ``offset`` (the first segment when it lies below every base)."""
    below = [i for i, base in enumerate(bases) if base <= offset]
    return below[-1] if below else 0


def expect(reference: Reference, case: Case, root: Path) -> Expectation:
    """What the load of the damaged dir ``root`` must produce, from the damaged bytes and Kafka's rules."""
    expectation = Expectation(None, {})
    if case.kind == LEADER_EPOCH_CHECKPOINT_FILE:
        try:
            entries = parse_leader_epoch_checkpoint((root / case.damage.file).read_bytes())
        except CorruptCheckpointError:
            expectation.refusal = CorruptCheckpointError
        else:
            if kafka_epoch_entries(entries) is None:
                expectation.refusal = CorruptCheckpointError
    if case.kind in UNREAD_KINDS:
        data = (root / case.damage.file).read_bytes()
        parser = {
            META_PROPERTIES_FILE: parse_meta_properties,
            PARTITION_METADATA_FILE: parse_partition_metadata,
        }.get(case.kind, parse_offset_checkpoint)
        try:
            parser(data)
        except CorruptCheckpointError:
            expectation.unread_file_corrupt = True
    recovery_points = _read_offset_checkpoint(root / RECOVERY_POINT_CHECKPOINT_FILE)
    if recovery_points is None:
        expectation.errors_logged.append(str(root / RECOVERY_POINT_CHECKPOINT_FILE))
        recovery_points = {}
    log_starts = _read_offset_checkpoint(root / LOG_START_OFFSET_CHECKPOINT_FILE)
    if log_starts is None:
        expectation.errors_logged.append(str(root / LOG_START_OFFSET_CHECKPOINT_FILE))
        log_starts = {}
    for tp, partition in reference.partitions.items():
        damaged = case.tp == tp
        expectation.partitions[tp] = _expect_partition(
            case if damaged else None, root, partition, recovery_points.get(tp, 0), log_starts.get(tp, 0), expectation
        )
    return expectation


def _expect_partition(
    case: Case | None,
    root: Path,
    partition: RefPartition,
    recovery_point: int,
    log_start: int,
    expectation: Expectation,
) -> PartitionExpectation:
    segments = [RefSegment(s.base, s.data, list(s.batches), list(s.aborted)) for s in partition.segments]
    bases = [s.base for s in segments]
    clean = case.clean if case is not None else _clean_root(root)
    recovered = truncated = 0
    recovered_from = None
    if case is not None and case.kind == TXN_INDEX_SUFFIX:
        base = offset_from_file_name(Path(case.damage.file).name)
        if _txn_index_fails_sanity((root / case.damage.file).read_bytes(), base):
            recovered += 1
    if case is not None and case.kind == LOG_SUFFIX:
        base = offset_from_file_name(Path(case.damage.file).name)
        index = bases.index(base)
        # Its batches are whatever the recovery below keeps: the case's recovery point makes sure it runs.
        segments[index] = RefSegment(base, (root / case.damage.file).read_bytes(), [], segments[index].aborted)
    if not clean:
        first = _floor_index(bases, recovery_point)
        recovered_from = bases[first]
        assert case is None or case.kind != LOG_SUFFIX or bases[first] <= offset_from_file_name(Path(case.damage.file).name)
        kept = segments[:first]
        for i in range(first, len(segments)):
            segment = segments[i]
            upper = bases[i + 1] if i + 1 < len(bases) else None
            prefix = valid_prefix(segment.data, segment.base, upper)
            end = prefix[-1].position + len(prefix[-1].data) if prefix else 0
            recovered += 1
            kept.append(RefSegment(segment.base, segment.data[:end], prefix, []))
            if end < len(segment.data):
                truncated = len(segment.data) - end
                break
        segments = kept
        if case is not None and case.kind == LOG_SUFFIX:
            _count_undetectable(partition, case, segments, expectation)
    log_end = segments[-1].next_offset()
    if log_end < log_start:
        return PartitionExpectation(log_start, log_start, [RefSegment(log_start, b"", [], [])], recovered, truncated, recovered_from, True)
    open_transactions = replay_transactions(segments)
    return PartitionExpectation(
        max(log_start, segments[0].base), log_end, segments, recovered, truncated, recovered_from,
        last_stable_offset=min([*open_transactions.values(), log_end]),
    )


def replay_transactions(segments: list[RefSegment]) -> dict[int, int]:
    """Kafka's transaction rules over the batches that survive (sets each segment's ``aborted``; returns the open
    transactions by producer): a transactional batch opens its producer's transaction unless one is open; a marker
    closes it, and an ABORT of an open one is indexed in the marker's segment with the first offset of another
    producer's open transaction as last stable offset (else the marker's offset + 1). A lost marker therefore
    merges two transactions, and a lost first batch moves a transaction's start."""
    open_first: dict[int, int] = {}
    for segment in segments:
        segment.aborted = []
        for batch in segment.batches:
            if batch.control:
                first = open_first.pop(batch.producer_id, None)
                marker = DefaultRecordBatch(batch.data).records()[0].key
                if first is not None and ControlRecordType.parse(marker) is ControlRecordType.ABORT:
                    stable = min(open_first.values(), default=batch.last_offset + 1)
                    segment.aborted.append(AbortedTxn(batch.producer_id, first, batch.last_offset, stable))
            elif batch.transactional:
                open_first.setdefault(batch.producer_id, batch.base_offset)
    return open_first


def _clean_root(root: Path) -> bool:
    return (root / CLEAN_SHUTDOWN_FILE).exists()


def _count_undetectable(partition: RefPartition, case: Case, segments: list[RefSegment], expectation: Expectation) -> None:
    """Oracle self-check: every batch before the damaged byte survives unchanged, and a surviving batch that
    differs from the reference differs only outside the CRC (``baseOffset``, ``partitionLeaderEpoch``)."""
    base = offset_from_file_name(Path(case.damage.file).name)
    original = partition.segment_of(base)
    survivor = next((s for s in segments if s.base == base), None)
    kept = {b.position: b for b in survivor.batches} if survivor is not None else {}
    for batch in original.batches:
        if batch.position + len(batch.data) <= case.damage.position:
            assert kept.get(batch.position) == batch, f"oracle lost batch at {batch.position} before the damage"
        elif batch.position in kept and kept[batch.position].data != batch.data:
            changed = [i for i, (a, b) in enumerate(zip(batch.data, kept[batch.position].data, strict=True)) if a != b]
            assert all(i < 8 or 12 <= i < 16 for i in changed), f"oracle kept a batch changed at bytes {changed}"
            expectation.undetectable_records += batch.records


# -- checks -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Figures:
    cases: int = 0
    loads: int = 0
    records_checked: int = 0
    lost: int = 0
    corrupt_served: int = 0
    undetectable: int = 0
    refusals: int = 0
    truncated_bytes: int = 0
    recovered_segments: int = 0
    snapshots_discarded: int = 0
    checkpoints_ignored: int = 0
    duplicates_detected: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)

    def summary(self, elapsed: float) -> str:
        kinds = ", ".join(f"{kind.lstrip('.')} {n}" for kind, n in sorted(self.by_kind.items()))
        return (
            f"torn files (seed {SEED}, {elapsed:.1f} s): cases {self.cases}, loads {self.loads}, records checked "
            f"{self.records_checked}, lost {self.lost}, corrupt served {self.corrupt_served}, undetectable "
            f"(outside the CRC) {self.undetectable}, refusals {self.refusals}, recovered segments "
            f"{self.recovered_segments}, truncated bytes {self.truncated_bytes}, snapshots discarded "
            f"{self.snapshots_discarded}, checkpoints ignored {self.checkpoints_ignored}, duplicates detected "
            f"{self.duplicates_detected} [{kinds}]"
        )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _warnings() -> Iterator[list[str]]:
    handler = _Collect()
    logger = logging.getLogger("logmgr")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def _served(log: Log) -> list[bytes]:
    """Every batch a replica fetch from the log start to the log end returns."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetch = log.read(offset, 1 << 20, isolation=Isolation.LOG_END)
        data = fetch.records
        if not data:
            break
        position = 0
        while position < len(data):
            base, size = _PREFIX.unpack_from(data, position)
            end = position + 12 + size
            out.append(data[position:end])
            last_delta = struct.unpack_from(">i", data, position + 23)[0]
            offset = base + last_delta + 1
            position = end
    return out


def check_served(log: Log, expected: PartitionExpectation, figures: Figures) -> None:
    """What a fetch serves must be exactly the expected batches (from the one holding the log start)."""
    want = [b for b in expected.batches() if b.last_offset >= expected.log_start_offset]
    got = _served(log)
    for index, batch in enumerate(want):
        if index >= len(got):
            figures.lost += sum(b.records for b in want[index:])
            raise AssertionError(f"{log.topic_partition}: batches from offset {batch.base_offset} are not served")
        if got[index] != batch.data:
            figures.corrupt_served += RefBatch.parse(0, got[index]).records
            raise AssertionError(f"{log.topic_partition}: batch {index} (offset {batch.base_offset}) served changed")
        figures.records_checked += batch.records
    if len(got) > len(want):
        figures.corrupt_served += sum(RefBatch.parse(0, b).records for b in got[len(want) :])
        raise AssertionError(f"{log.topic_partition}: {len(got) - len(want)} unexpected batches served")


def check_load(log: Log, expected: PartitionExpectation, figures: Figures) -> None:
    log._check()
    stats = log.recovery
    assert (log.log_start_offset, log.log_end_offset) == (expected.log_start_offset, expected.log_end_offset), (
        f"{log.topic_partition}: offsets {log.log_start_offset}-{log.log_end_offset}, expected "
        f"{expected.log_start_offset}-{expected.log_end_offset}; {stats.actions}"
    )
    assert log.segments.base_offsets() == [s.base for s in expected.segments], stats.actions
    assert stats.recovered_segments == expected.recovered_segments, (expected.recovered_segments, stats.actions)
    assert stats.truncated_bytes == expected.truncated_bytes, (expected.truncated_bytes, stats.actions)
    if expected.truncated_bytes:
        assert any(f"{expected.truncated_bytes} bytes truncated" in a for a in stats.actions), stats.actions
    if expected.all_deleted:
        assert any("every segment ends below the log start offset" in a for a in stats.actions), stats.actions
    for segment, want in zip(log.segments.values(), expected.segments, strict=True):
        assert segment.size == len(want.data), (segment, len(want.data), stats.actions)
        assert segment.txn_index.all_aborted_txns() == want.aborted, segment
    check_served(log, expected, figures)
    figures.recovered_segments += stats.recovered_segments
    figures.truncated_bytes += stats.truncated_bytes
    figures.loads += 1


def check_producer_state(log: Log, expected: PartitionExpectation, figures: Figures) -> None:
    """The open transaction bounds the last stable offset, and the idempotent producer's last batch is known."""
    want = expected.log_start_offset if expected.last_stable_offset is None else expected.last_stable_offset
    assert log.last_stable_offset == want, log.producer_state
    pid = IDEMPOTENT_PID + log.topic_partition.partition
    last = next((b for b in reversed(expected.batches()) if b.producer_id == pid), None)
    if last is None:
        return
    batch = DefaultRecordBatch(last.data)
    retry = log.append_records(
        [r.to_simple() for r in batch.records()],
        compression=batch.compression,
        producer_id=pid,
        producer_epoch=last.producer_epoch,
        base_sequence=last.base_sequence,
    )
    assert retry.duplicate and retry.first_offset == last.base_offset, (retry, last.base_offset)
    figures.duplicates_detected += 1


def check_indexes(log: Log, expected: PartitionExpectation, scratch: Path) -> None:
    """Every batch is found by an offset lookup; the indexes of recovered segments equal a fresh recovery."""
    config = log.config
    for segment, want in zip(log.segments.values(), expected.segments, strict=True):
        for batch in want.batches:
            found = segment.translate_offset(batch.last_offset)
            assert found is not None and found.position == batch.position, (segment, batch.last_offset, found)
        if expected.recovered_from is None or segment.base_offset < expected.recovered_from:
            continue
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        shutil.copyfile(segment.log.path, scratch / segment.log.path.name)
        fresh = LogSegment.open(
            scratch, segment.base_offset, index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
        )
        try:
            fresh.recover()
            assert list(segment.offset_index) == list(fresh.offset_index), segment
            assert list(segment.time_index) == list(fresh.time_index), segment
        finally:
            fresh.close()


def check_appends(log: Log) -> None:
    end = log.log_end_offset
    info = log.append_records([SimpleRecord(b"after %d" % end, b"k")], compression=CompressionType.LZ4)
    assert (info.first_offset, info.last_offset) == (end, end)
    batches = log.read(end, 1 << 16, isolation=Isolation.LOG_END).batches()
    assert [(r.offset, r.value) for b in batches for r in b.records()] == [(end, b"after %d" % end)]


def check_verify(root: Path, case: Case, expectation: Expectation) -> None:
    report = verify_paths([root])
    damaged = str(root / case.damage.file)
    if expectation.unread_file_corrupt or expectation.refusal is not None:
        assert report.problems and {p.file for p in report.problems} == {damaged}, report.problems
    else:
        assert report.ok, "\n".join(map(str, report.problems))


# -- one case ---------------------------------------------------------------------------------------------------


def _prepare(reference: Reference, case: Case, root: Path) -> None:
    shutil.copytree(reference.root, root, copy_function=shutil.copyfile)
    if not case.clean:
        (root / CLEAN_SHUTDOWN_FILE).unlink()
    if case.recovery_point is not None and not case.clean:
        points = dict(reference.recovery_points)
        points[_tp_of(case.damage.file)] = case.recovery_point
        OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT_FILE).write(points)
    case.damage.apply(root)


@contextmanager
def _recording_loads() -> Iterator[list[Log]]:
    """Every log the manager's loader returns (a failed startup must close them all)."""
    loaded: list[Log] = []

    def recording(*args: Any, **kwargs: Any) -> Log:
        log = load_log(*args, **kwargs)
        loaded.append(log)
        return log

    with mock.patch.object(log_manager_module, "load_log", recording):
        yield loaded


def run_manager(reference: Reference, case: Case, root: Path, expectation: Expectation, figures: Figures) -> None:
    clock = ManualClock(reference.clock_ms)
    manager = _manager(root, clock)
    with _warnings() as warnings:
        if expectation.refusal is not None:
            with _recording_loads() as loaded, pytest.raises(expectation.refusal) as refused:
                manager.startup()
            assert refused.value.path == str(root / case.damage.file), refused.value
            assert all(log._closed for log in loaded), [log for log in loaded if not log._closed]
            figures.refusals += 1
            check_verify(root, case, expectation)
            return
        manager.startup()
    try:
        for path in expectation.errors_logged:
            assert any(f"ignoring unreadable {path}" in w for w in warnings), warnings
        figures.checkpoints_ignored += len(expectation.errors_logged)
        _check_snapshot_warning(case, expectation, warnings, root, figures)
        for tp, expected in expectation.partitions.items():
            log = manager.get_log(tp)
            assert log is not None, tp
            check_load(log, expected, figures)
            if tp == case.tp:
                check_indexes(log, expected, root.parent / "scratch")
                check_producer_state(log, expected, figures)
            check_appends(log)
    finally:
        manager.shutdown()
    check_verify(root, case, expectation)


def _snapshot_read(reference: Reference, case: Case, log_start: int) -> bool:
    """Whether the load reads (and so discards) the damaged snapshot: Kafka's ``truncateAndReload`` loads the
    newest snapshot at or below the offset it rebuilds to, after deleting those above it and those at or below the
    log start offset; the first rebuild is to the log end after a clean shutdown (stray snapshots removed first),
    else to the base of the first recovered segment (none when that is 0, where the empty state already ends)."""
    partition = reference.partitions[_tp_of(case.damage.file)]
    offset = offset_from_file_name(Path(case.damage.file).name)
    bases = [s.base for s in partition.segments]
    if case.clean:
        target = partition.log_end_offset
        candidates = [o for o in partition.snapshots if o in bases or o == max(partition.snapshots)]
    else:
        assert case.recovery_point is not None
        target = bases[_floor_index(bases, case.recovery_point)]
        candidates = partition.snapshots
        if target == 0:
            return False
    floor = max(log_start, bases[0]) if case.clean else log_start
    readable = [o for o in candidates if floor < o <= target]
    return bool(readable) and max(readable) == offset


def _check_snapshot_warning(case: Case, expectation: Expectation, warnings: list[str], root: Path, figures: Figures) -> None:
    damaged = str(root / case.damage.file)
    named = [w for w in warnings if "corrupt producer snapshot" in w]
    if expectation.snapshot_warning:
        assert len(named) == 1 and damaged in named[0], warnings
        figures.snapshots_discarded += 1
    else:
        assert not named, warnings


def run_plain(reference: Reference, case: Case, pdir: Path, expectation: Expectation, figures: Figures) -> None:
    """The same damaged partition dir loaded by ``load_log`` with the checkpoint values the manager would pass."""
    tp = _tp_of(case.damage.file)
    recovery_point = reference.recovery_points[tp] if case.recovery_point is None else case.recovery_point
    load = lambda: load_log(  # noqa: E731 - called once or inside pytest.raises
        pdir,
        _log_config(pdir.parent),
        recovery_point=recovery_point,
        log_start_offset=reference.log_start_offsets.get(tp, 0),
        had_clean_shutdown=case.clean,
        clock=ManualClock(reference.clock_ms),
    )
    if expectation.refusal is not None:
        with pytest.raises(expectation.refusal):
            load()
        return
    log = load()
    try:
        check_load(log, expectation.partitions[tp], figures)
    finally:
        log.close()


def run_case(reference: Reference, case: Case, work: Path, figures: Figures) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    root = work / "data"
    _prepare(reference, case, root)
    expectation = expect(reference, case, root)
    if case.kind == SNAPSHOT_SUFFIX:
        log_start = reference.log_start_offsets.get(_tp_of(case.damage.file), 0)
        expectation.snapshot_warning = _snapshot_read(reference, case, log_start)
    figures.undetectable += expectation.undetectable_records
    if case.kind in PARTITION_KINDS:
        plain = work / "plain" / case.damage.file.split("/")[0]
        shutil.copytree(root / plain.name, plain, copy_function=shutil.copyfile)
        run_plain(reference, case, plain, expectation, figures)
    run_manager(reference, case, root, expectation, figures)
    figures.cases += 1
    figures.by_kind[case.kind] += 1


# -- the test -------------------------------------------------------------------------------------------------


def test_torn_and_corrupted_files_load_as_kafka_would(reference: Reference, work_root: Path) -> None:
    rng = random.Random(SEED)
    figures = Figures()
    started = time.monotonic()
    for case in generate_cases(reference, rng, CASES):
        if ONLY_CASE is not None and case.index != int(ONLY_CASE):
            continue
        try:
            run_case(reference, case, work_root / "case", figures)
        except AssertionError as err:
            raise AssertionError(f"{case}: {err}\nfigures so far: {figures.summary(time.monotonic() - started)}") from err
    summary = figures.summary(time.monotonic() - started)
    print(f"\n{summary}")
    if REPORT:
        with open(REPORT, "a") as out:
            line = {
                "test": "torn_files",
                "cases": figures.cases,
                "records_checked": figures.records_checked,
                "lost": figures.lost,
                "corrupt_served": figures.corrupt_served,
                "seed": SEED,
            }
            out.write(json.dumps(line) + "\n")
    assert figures.lost == 0 and figures.corrupt_served == 0
    assert ONLY_CASE is not None or set(figures.by_kind) == set(KIND_WEIGHTS), figures.by_kind


# -- what Kafka trusts --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX])
def test_damage_below_the_recovery_point_is_trusted_as_kafka_does(
    reference: Reference, work_root: Path, suffix: str
) -> None:
    """Kafka recovers only from the recovery point's segment on (and checks no offset or time index at load, since
    KAFKA-7283): bytes below it were fsynced, so damage there (a bad disk, not a crash) is neither detected nor
    repaired by a load. ``verify`` finds it; ``reindex`` rebuilds an index."""
    tp = TopicPartition(TOPIC, 0)
    first = reference.partitions[tp].segments[0]
    file = f"{tp}/{first.base:020d}{suffix}"
    size = (reference.root / file).stat().st_size
    # Inside the second batch's CRC-covered bytes, or the second index entry.
    position = first.batches[1].position + 40 if suffix == LOG_SUFFIX else min(size - 1, 13)
    case = Case(-1, suffix, Damage(file, position, 0x10), False, None)
    work = work_root / "trusted"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    root = work / "data"
    _prepare(reference, case, root)
    damaged = (root / file).read_bytes()
    manager = _manager(root, ManualClock(reference.clock_ms))
    manager.startup()
    try:
        log = manager.get_log(tp)
        assert log is not None
        assert log.recovery.recovered_segments == 1, log.recovery.actions
        assert log.log_end_offset == reference.partitions[tp].log_end_offset
    finally:
        manager.shutdown()
    assert (root / file).read_bytes() == damaged
    report = verify_paths([root])
    # A damaged batch also hides the index entries past it from verify's walk: same segment, same finding.
    segment_files = {str(root / file).removesuffix(suffix) + s for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)}
    assert str(root / file) in {p.file for p in report.problems} <= segment_files, report.problems


# -- regression tests ---------------------------------------------------------------------------------------------


def _small_log(pdir: Path, *, index_interval_bytes: int, leader_epochs: int = 1) -> dict[int, list[RefBatch]]:
    """A closed log of three-segment, two-record batches; returns each segment's batches by base offset."""
    config = LogConfig(segment_bytes=700, index_interval_bytes=index_interval_bytes, segment_index_bytes=4096)
    log = load_log(pdir, config, clock=ManualClock(T0))
    for i in range(24):
        log.append_records(
            [SimpleRecord(b"value %d" % i, b"key"), SimpleRecord(b"other %d" % i)],
            leader_epoch=i * leader_epochs // 24,
        )
    log.close()
    return {offset_from_file_name(p.name): _split_batches(p.read_bytes()) for p in sorted(pdir.glob(f"*{LOG_SUFFIX}"))}


def _reload(pdir: Path, index_interval_bytes: int) -> Log:
    config = LogConfig(segment_bytes=700, index_interval_bytes=index_interval_bytes, segment_index_bytes=4096)
    return load_log(pdir, config, recovery_point=0, had_clean_shutdown=False, clock=ManualClock(T0))


def _set_base_offset(pdir: Path, base: int, batch: RefBatch, offset: int) -> None:
    with open(pdir / f"{base:020d}{LOG_SUFFIX}", "r+b") as f:
        f.seek(batch.position)
        f.write(struct.pack(">q", offset))


@pytest.mark.parametrize(
    ("index_interval_bytes", "how"),
    [(0, "backwards"), (1 << 20, "backwards"), (0, "past 32 bits"), (1 << 20, "below the base")],
)
def test_bug_damaged_base_offset_emptied_the_segment(tmp_path: Path, index_interval_bytes: int, how: str) -> None:
    """The base offset is outside the batch CRC. Recovery used to keep a batch whose damaged base offset went
    backwards (the log then held offsets out of order) or, when an index entry fell on it, fail the index append
    and empty the whole segment (and delete the later ones); an offset past the 32-bit range raised an overflow
    that emptied it too. The valid prefix before the damaged batch is now kept."""
    pdir = tmp_path / "topic-0"
    segments = _small_log(pdir, index_interval_bytes=index_interval_bytes)
    base, batches = next(iter(segments.items()))
    victim = batches[3]
    damaged = {
        "backwards": batches[1].base_offset,
        "past 32 bits": base + 2**40,
        "below the base": base - 1 if base else -1,
    }[how]
    _set_base_offset(pdir, base, victim, damaged)
    log = _reload(pdir, index_interval_bytes)
    try:
        assert log.segments.base_offsets() == [base]
        assert log.log_end_offset == victim.base_offset
        assert log.active_segment.size == victim.position
        assert any("do not continue the segment" in a or "does not fit" in a for a in log.recovery.actions)
    finally:
        log.close()
    assert verify_paths([pdir]).ok


def test_bug_batch_reaching_the_next_segment_was_kept(tmp_path: Path) -> None:
    """A damaged base offset that moves a segment's last batch to or past the next segment's base used to be kept:
    the two segments overlapped (``verify`` reports it) and the batch was shadowed by the next segment. Rolls
    start at the log end, so no valid segment reaches its successor: the batch now ends the valid prefix."""
    pdir = tmp_path / "topic-0"
    segments = _small_log(pdir, index_interval_bytes=1 << 20)
    (base, batches), (following, _) = list(segments.items())[:2]
    last = batches[-1]
    _set_base_offset(pdir, base, last, following)
    log = _reload(pdir, 1 << 20)
    try:
        assert log.segments.base_offsets() == [base]
        assert log.log_end_offset == last.base_offset
    finally:
        log.close()
    assert verify_paths([pdir]).ok


def test_bug_non_monotonic_leader_epoch_checkpoint_is_kept(tmp_path: Path) -> None:
    """A cut checkpoint can still parse with an epoch starting below its predecessor; Kafka's cache drops the
    entries it conflicts with when it assigns it."""
    pdir = tmp_path / "topic-0"
    _small_log(pdir, index_interval_bytes=0, leader_epochs=3)
    (pdir / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(b"0\n3\n0 0\n1 16\n2 1\n")
    log = load_log(pdir, _log_config(tmp_path), had_clean_shutdown=True, clock=ManualClock(T0))
    try:
        assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(2, 1)]
        log._check()
    finally:
        log.close()


def test_bug_negative_leader_epoch_checkpoint_is_accepted(tmp_path: Path) -> None:
    """Kafka's cache throws IllegalArgumentException for a negative epoch or start offset: the log does not load."""
    pdir = tmp_path / "topic-0"
    _small_log(pdir, index_interval_bytes=0)
    (pdir / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(b"0\n1\n-1 0\n")
    with pytest.raises(CorruptCheckpointError):
        load_log(pdir, _log_config(tmp_path), had_clean_shutdown=True, clock=ManualClock(T0)).close()


def test_bug_failed_startup_leaves_logs_loaded_meanwhile_open(tmp_path: Path) -> None:
    root = tmp_path / "data"
    clock = ManualClock(T0)
    manager = _manager(root, clock)
    manager.startup()
    for partition in range(PARTITIONS):
        log = manager.get_or_create_log(TOPIC, partition)
        log.append_records([SimpleRecord(b"v", b"k"), SimpleRecord(b"w")])
    manager.shutdown()
    (root / f"{TOPIC}-0" / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(b"0\n1\nnot an entry\n")
    manager = _manager(root, clock)
    with _recording_loads() as loaded, pytest.raises(CorruptCheckpointError):
        manager.startup()
    left_open = [log for log in loaded if not log._closed]
    for log in left_open:
        log.close()
    assert not left_open


def test_bug_verify_flags_the_empty_preallocated_index_of_a_crashed_active_segment(tmp_path: Path) -> None:
    """After a crash the active segment keeps its preallocated, zero-filled indexes. ``verify`` accepts the zero
    fill, but when no entry was written it still checks slot 0, ``(base offset, 0)``, against the first batch and
    reports a mismatch once that batch holds more than one record."""
    pdir = tmp_path / "topic-0"
    log = load_log(pdir, _log_config(tmp_path), clock=ManualClock(T0))
    log.append_records([SimpleRecord(b"v", b"k"), SimpleRecord(b"w")])
    log.flush()
    try:
        assert verify_paths([pdir]).ok
    finally:
        log.close()


def test_bug_last_stable_offset_below_the_log_start_offset(tmp_path: Path) -> None:
    """Kafka's ``maybeIncrementFirstUnstableOffset`` raises an open transaction's first offset to the log start
    offset when DeleteRecords moved it past (found by this file's oracle when a truncation reopened such a
    transaction)."""
    log = load_log(tmp_path / "topic-0", _log_config(tmp_path), clock=ManualClock(T0))
    try:
        log.append_records([SimpleRecord(b"a")])
        log.append_records([SimpleRecord(b"t")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_records([SimpleRecord(b"b")])
        log.delete_records_before(2)
        assert log.last_stable_offset == 2
    finally:
        log.close()
