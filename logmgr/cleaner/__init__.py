"""Log compaction (Kafka's LogCleaner): the offset map, one pass over one log, the choice of logs and their
checkpoints, the LogManager's job, and the offline planner of ``logmgr compact``."""
