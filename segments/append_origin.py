"""Where an append comes from (Kafka's ``AppendOrigin``): the append's validation (``segments._native.append``,
Kafka's ``LogValidator``) and the producer state (``logmgr.producer_state``) both decide by it."""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    """Where an append comes from; decides how much the append and :class:`ProducerAppendInfo` validate."""

    REPLICATION = "replication"
    """Copied from a leader or replayed from the log (recovery): already validated, nothing is refused."""
    COORDINATOR = "coordinator"
    """Written by the group or transaction coordinator: epochs are checked, sequences are not."""
    CLIENT = "client"
    """Sent by a producer: epochs, sequences, duplicates and transaction state are all checked."""
