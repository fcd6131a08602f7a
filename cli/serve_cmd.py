"""``logmgr serve``: a LogManager with all its scheduled jobs in the foreground, optionally with a status port."""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

import click

from cli.common import Failure, one_line_errors, refuse_links
from cli.config_options import ConfigOptions, build_resolver, topic_config_options
from logmgr.log_manager import CleanupReport, LogManager
from logmgr.offline.cleanup import unknown_config_warning
from logmgr.scheduler import ApsScheduler
from logmgr.segment_deleter import DeletionRun

logger = logging.getLogger("logmgr.serve")

_STOP_POLL_S = 0.5


class JobTotals:
    """What the jobs have done since start, for logs and metrics; updated from job threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.scheduled_bytes = 0
        self.deleted_bytes = 0
        self.deleted_segments = 0

    def record(self, result: object) -> None:
        """Add one job run's result. O(1)."""
        with self._lock:
            if isinstance(result, CleanupReport):
                self.scheduled_bytes += result.bytes_freed
            elif isinstance(result, DeletionRun):
                self.deleted_bytes += result.deleted_bytes
                self.deleted_segments += result.deleted_segments


def describe_result(result: object) -> str:
    """One log line's worth of what a job returned. O(partitions touched)."""
    if isinstance(result, CleanupReport):
        segments = sum(len(ds) for ds in (*result.deletions.values(), *result.future_deletions.values()))
        rolled = f", rolled {len(result.rolled)} partition(s)" if result.rolled else ""
        return f"{segments} segment(s), {result.bytes_freed} B marked for deletion{rolled}"
    if isinstance(result, DeletionRun):
        return f"{result.deleted_segments} segment(s), {result.deleted_bytes} B of files deleted"
    return "done"


class LoggingScheduler(ApsScheduler):
    """APScheduler-backed scheduler that logs every periodic job run and feeds :class:`JobTotals`."""

    def __init__(self, totals: JobTotals) -> None:
        super().__init__()
        self.totals = totals

    def schedule(self, name: str, func: Callable[[], object], *, delay_ms: int, period_ms: int) -> None:
        """As :meth:`ApsScheduler.schedule`, with the run logged. O(log jobs)."""

        def logged() -> object:
            started = time.monotonic()
            result = func()
            self.totals.record(result)
            logger.info(
                "job %s: %s (%.0f ms)", name, describe_result(result), (time.monotonic() - started) * 1000
            )
            return result

        super().schedule(name, logged, delay_ms=delay_ms, period_ms=period_ms)


def _metric_name(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def prometheus_text(status: dict[str, Any], totals: JobTotals) -> str:
    """Prometheus exposition text of :meth:`LogManager.status` plus job totals. O(dirs + jobs)."""
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

    dirs = status["dirs"]
    jobs = status["jobs"]
    label = '{{dir="{}"}}'
    family(
        "logmgr_partitions",
        "gauge",
        "Partitions loaded per log dir.",
        [(label.format(d["path"]), d["partitions"]) for d in dirs],
    )
    family(
        "logmgr_segments",
        "gauge",
        "Segments per log dir.",
        [(label.format(d["path"]), d["segments"]) for d in dirs],
    )
    family(
        "logmgr_bytes",
        "gauge",
        "Bytes of segments per log dir.",
        [(label.format(d["path"]), d["bytes"]) for d in dirs],
    )
    family(
        "logmgr_dir_offline",
        "gauge",
        "1 when the log dir is offline.",
        [(label.format(d["path"]), int(d["offline"])) for d in dirs],
    )
    # Kafka's LogCleaner gauges (kafka.log:type=LogCleaner / LogCleanerManager), named as Prometheus metrics.
    for name, value in status.get("cleaner", {}).items():
        family(f"logmgr_cleaner_{name.replace('-', '_')}", "gauge", f"Kafka's LogCleaner {name}.", [("", value)])
    job_label = '{{job="{}"}}'
    family(
        "logmgr_job_runs_total",
        "counter",
        "Completed runs per job.",
        [(job_label.format(_metric_name(n)), j["runs"]) for n, j in sorted(jobs.items())],
    )
    family(
        "logmgr_job_failures_total",
        "counter",
        "Failed runs per job.",
        [(job_label.format(_metric_name(n)), j["failures"]) for n, j in sorted(jobs.items())],
    )
    family(
        "logmgr_job_last_start_ms",
        "gauge",
        "Start time (epoch ms) of each job's latest run.",
        [
            (job_label.format(_metric_name(n)), j["lastStartMs"])
            for n, j in sorted(jobs.items())
            if j["lastStartMs"] is not None
        ],
    )
    family(
        "logmgr_pending_deletion_bytes",
        "gauge",
        "Bytes of .deleted segments waiting for physical deletion.",
        [("", status["pendingDeletionBytes"])],
    )
    family(
        "logmgr_deleted_bytes_total",
        "counter",
        "Bytes of segment files physically deleted.",
        [("", totals.deleted_bytes)],
    )
    family(
        "logmgr_deleted_segments_total",
        "counter",
        "Segments physically deleted.",
        [("", totals.deleted_segments)],
    )
    return "\n".join(lines) + "\n"


def start_status_server(manager: LogManager, totals: JobTotals, port: int) -> ThreadingHTTPServer:
    """Serve ``GET /status`` (JSON) and ``GET /metrics`` (Prometheus) on 127.0.0.1:``port`` (0: any free port)
    from a daemon thread. O(1)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/status":
                body = json.dumps({**manager.status(), "deletedBytes": totals.deleted_bytes}).encode()
                kind = "application/json"
            elif self.path == "/metrics":
                body = prometheus_text(manager.status(), totals).encode()
                kind = "text/plain; version=0.0.4"
            else:
                self.send_error(404, "try /status or /metrics")
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug(format, *args)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="status-http", daemon=True).start()
    return server


@click.command()
@click.argument("logdirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@topic_config_options
@click.option(
    "--status-port",
    type=click.IntRange(min=0, max=65535),
    help="Serve GET /status (JSON) and GET /metrics (Prometheus) on 127.0.0.1 at this port (0: any free port).",
)
@click.option("--create", is_flag=True, help="Create the log dirs that do not exist (as a broker does).")
@one_line_errors
def serve(logdirs: tuple[Path, ...], config_options: ConfigOptions, status_port: int | None, create: bool) -> None:
    """Run a LogManager over LOGDIR... with every scheduled job (retention, flusher, checkpoints, segment
    deletion, producer expiration) in the foreground, logging each job run on stderr. SIGINT or SIGTERM stops
    it cleanly: jobs finish, logs are flushed, checkpoints and the clean-shutdown marker are written; the exit
    code is then 0 after SIGTERM, 130 after SIGINT (as every command interrupted by Ctrl-C). Takes each dir's
    .lock (exit 3 when a broker holds one). A missing LOGDIR is refused (exit 1) unless --create is given, so a
    typo never starts an empty broker dir. Topic configs come from the dirs' KRaft metadata, --config
    (server.properties: also job intervals, retention and flush settings; log.dirs is ignored) and
    --topic-config/--topic-configs (see `logmgr configs`); each topic whose config nothing names and whose
    segments the retention job would delete is named in a warning at start.

    \b
    Example:
        logmgr serve /var/lib/kafka/data --config /etc/kafka/server.properties --status-port 9404
    """
    missing = [str(logdir) for logdir in logdirs if not logdir.exists()]
    if missing and not create:
        raise Failure(f"no such log dir: {', '.join(missing)} (use --create to create it)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for logdir in logdirs:
        if logdir.is_dir():
            refuse_links(logdir)
    totals = JobTotals()
    resolver = build_resolver([d for d in logdirs if d.is_dir()], config_options)
    for warning in resolver.metadata_warnings():
        logger.warning("%s", warning)
    for topic in resolver.topics():
        effective = resolver.resolve(topic)
        config = effective.config
        if not effective.known and config.delete and (config.retention_ms >= 0 or config.retention_bytes >= 0):
            # The retention job would delete under Kafka's defaults: a compacted topic's data (_schemas) with it.
            logger.warning("%s", unknown_config_warning(effective, "the retention job deletes its old segments"))
    manager = LogManager(
        dataclasses.replace(resolver.broker(), log_dirs=tuple(str(d) for d in logdirs)),
        topic_overrides=resolver.topic_overrides(),
        scheduler=LoggingScheduler(totals),
    )
    stop = threading.Event()
    stopped_by: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopped_by.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    server: ThreadingHTTPServer | None = None
    try:
        manager.startup()
        try:
            if status_port is not None:
                server = start_status_server(manager, totals, status_port)
                logger.info("status on http://127.0.0.1:%d/status and /metrics", server.server_address[1])
            logger.info("serving %d partition(s) in %d dir(s)", len(manager.all_logs()), len(logdirs))
            while not stop.wait(_STOP_POLL_S):
                pass
            logger.info("stopping")
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
            manager.shutdown()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    logger.info("stopped cleanly")
    if stopped_by[:1] == [signal.SIGINT]:
        # Stopped cleanly, yet by Ctrl-C: the shared handler (LogmgrGroup) reports it as every command does.
        raise KeyboardInterrupt
