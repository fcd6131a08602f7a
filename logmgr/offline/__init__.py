"""Offline tools on a Kafka log dir: read-only views (:mod:`.scan`) and plan-then-apply changes (:mod:`.plan`)."""
