"""Typed errors of the engine (``Log``, ``LogManager``, producer state, scheduled jobs).

Errors about bytes on disk that break Kafka's formats stay in :mod:`segments.errors`; the classes here describe
what the engine refuses or cannot do. Every class derives from :class:`LogmgrError` so an embedding service can
catch the engine's errors with one ``except``. Helpers add new classes at the END of this file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logmgr.producer_state import BatchMetadata


class LogmgrError(Exception):
    """Base of every error the engine raises on its own behalf."""


class ConfigError(LogmgrError, ValueError):
    """A configuration value is missing, of the wrong type or out of range; the message names the key."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


class OutOfOrderSequenceError(LogmgrError):
    """An idempotent producer's batch does not continue its last sequence (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class DuplicateSequenceError(LogmgrError):
    """An idempotent producer resent a batch that is already in the log (Kafka's DUPLICATE_SEQUENCE_NUMBER)."""

    def __init__(self, message: str, duplicate: BatchMetadata | None = None) -> None:
        # The cached original lets the caller answer the retry with the offsets the batch got the first time.
        self.duplicate = duplicate
        super().__init__(message)


class InvalidProducerEpochError(LogmgrError):
    """A batch or marker carries a producer epoch older than the current one (Kafka's INVALID_PRODUCER_EPOCH)."""


class InvalidTxnStateError(LogmgrError):
    """A batch or marker contradicts the producer's transaction state (Kafka's INVALID_TXN_STATE)."""


class LogDirLockedError(LogmgrError):
    """Another process holds the ``.lock`` of a log dir (e.g. a running Kafka broker)."""


class LogDirOfflineError(LogmgrError):
    """A log dir was taken offline after an I/O failure; its logs refuse reads and writes."""


class RecordBatchTooLargeError(LogmgrError):
    """A batch is larger than ``max.message.bytes`` or than a segment can hold (Kafka's RECORD_TOO_LARGE)."""


class KafkaStorageError(LogmgrError):
    """An I/O error while reading or writing a log's files (Kafka's KAFKA_STORAGE_ERROR)."""


class TransactionCoordinatorFencedError(LogmgrError):
    """An end-transaction marker carries a coordinator epoch older than one already seen for its producer (Kafka's
    TRANSACTION_COORDINATOR_FENCED)."""


class InvalidRecordError(LogmgrError):
    """An append holds something Kafka would refuse: a corrupt or legacy batch, a wrong record count, offsets
    below the log end (Kafka's INVALID_RECORD / CORRUPT_MESSAGE)."""


class OffsetOutOfRangeError(LogmgrError):
    """A read or DeleteRecords offset outside ``[log start offset, log end offset]`` (Kafka's
    OFFSET_OUT_OF_RANGE)."""


class LogDirFullError(LogmgrError):
    """A log dir is above ``logmgr.disk.usage.warn.ratio``: appends are refused until cleanup frees space."""


class PlanStaleError(LogmgrError):
    """A planned action found its file other than the plan saw it (another process changed the log dir between
    planning and applying): nothing more of the plan is applied."""


class PlanError(LogmgrError):
    """Planning an offline operation found something it must not act on (a corrupt file, a dir that needs
    recovery first); nothing was written."""


class GroupCommitTimeoutError(LogmgrError):
    """A group-committed append was written but its fsync did not complete within
    ``logmgr.group.commit.timeout.ms`` (RocketMQ's FLUSH_DISK_TIMEOUT): the records are in the log, not yet
    known to be durable."""


class InvalidTimestampError(LogmgrError):
    """A leader append holds a record whose timestamp Kafka's LogValidator refuses (INVALID_TIMESTAMP): a CreateTime
    timestamp outside ``message.timestamp.before.max.ms``/``after.max.ms`` of the broker's clock, or a batch the
    producer marked LogAppendTime. The whole append is refused. ``record_errors`` holds Kafka's RecordErrors of the
    failing batch: ``(index of the record in its batch, message)``."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors
