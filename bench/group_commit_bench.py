"""Durable appends per second with 1, 2 and 8 appending threads, with and without group commit (issue 14, item 2).

Every append is one ``Log.append_records`` of one 100-byte record to a log with ``flush.messages=1``, so each
returns only once its record is fsynced. Without group commit each append fsyncs under the log's writer lock
(Kafka's behaviour at ``flush.messages=1``); with it (``logmgr.group.commit.enable``, RocketMQ's
``GroupCommitService``) appenders queue and one flusher thread fsyncs once for every append queued so far. The
table shows appends/s and fsyncs per append (the service's count; 1.0 without group commit). ``--appends``
appends in total per pass (default 2000, 400 with ``--quick``), split evenly between the threads; best of
``--repeats``; the time includes opening the fresh log, a few ms. The directory is ``--data-dir``'s ``group-commit-run`` (fsync cost depends on that disk).

Run: ``.venv/bin/python bench/group_commit_bench.py [--appends N | --quick] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import functools
import threading
from dataclasses import dataclass
from pathlib import Path

from _common import bench_main, best_of, fresh_dir, repeats, table

from logmgr.config import LogConfig
from logmgr.group_commit import GroupCommitService
from logmgr.log import Log
from logmgr.log_loader import load_log
from segments.records import SimpleRecord

DEFAULT_APPENDS = 2000
QUICK_APPENDS = 400
THREADS = (1, 2, 8)
VALUE = b"v" * 100


def add_args(parser: argparse.ArgumentParser) -> None:
    """The benchmark's own options. O(1)."""
    parser.add_argument(
        "--appends",
        type=int,
        default=None,
        help=f"appends per pass (default {DEFAULT_APPENDS}, {QUICK_APPENDS} with --quick)",
    )


@dataclass(frozen=True, slots=True)
class Row:
    threads: int
    group_commit: bool
    appends_per_s: float
    fsyncs_per_append: float


def one_pass(scratch: Path, threads: int, appends: int, group_commit: bool) -> float:
    """Append ``appends`` records from ``threads`` threads to a fresh log; return fsyncs per append."""
    log: Log = load_log(fresh_dir(scratch) / "bench-0", LogConfig.from_properties({"flush.messages": "1"}))
    service = GroupCommitService(timeout_ms=60_000) if group_commit else None
    if service is not None:
        service.start()
        log.group_commit = service
    per_thread = appends // threads

    def body() -> None:
        for _ in range(per_thread):
            log.append_records([SimpleRecord(VALUE, b"key")])

    workers = [threading.Thread(target=body) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if service is not None:
        service.stop()
    done = per_thread * threads
    if log.log_end_offset != done or log.recovery_point != done:
        raise SystemExit(f"pass lost appends: LEO {log.log_end_offset}, recovery point {log.recovery_point}")
    log.close()
    return 1.0 if service is None else service.flushes / done


def run(args: argparse.Namespace) -> list[Row]:
    """Measure and print the table. O(runs * appends)."""
    appends = args.appends or (QUICK_APPENDS if args.quick else DEFAULT_APPENDS)
    if appends < max(THREADS):
        raise SystemExit(f"--appends must be at least {max(THREADS)}")
    scratch = args.data_dir / "group-commit-run"
    rows = []
    for threads in THREADS:
        for group_commit in (False, True):
            measured = functools.partial(one_pass, scratch, threads, appends, group_commit)
            seconds, fsyncs = best_of(measured, repeats(args, 3))
            done = appends // threads * threads
            rows.append(Row(threads, group_commit, done / seconds, fsyncs))
    fresh_dir(scratch).rmdir()
    print(f"{appends} durable one-record appends per pass (flush.messages=1), best of {repeats(args, 3)}\n")
    print(
        table(
            ["threads", "group commit", "appends/s", "fsyncs/append"],
            [
                [str(r.threads), "on" if r.group_commit else "off", f"{r.appends_per_s:,.0f}", f"{r.fsyncs_per_append:.3f}"]
                for r in rows
            ],
        )
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point. O(runs * appends)."""
    bench_main(__doc__, run, argv, sized=False, add_args=add_args)


if __name__ == "__main__":
    main()
