"""logmgr: Apache Kafka's storage engine in Python, byte-compatible with Kafka on disk."""

__version__ = "0.1.0"
