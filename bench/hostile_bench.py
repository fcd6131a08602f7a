"""Hostile batches at full size through every reader: peak RSS and wall time of each command (issue 11).

Each hostile log dir holds one partition ``hostile-0`` whose only segment holds one batch with a valid CRC:

* ``huge-value``: one record whose value is ``--value-mib`` MiB of zeros (240 by default: 8 KB on disk with zstd);
* ``empty-records``: ``--records`` empty records (7 bytes each decompressed; 10 million by default, ~7 KB
  with zstd);
* ``legacy-many`` (gzip, snappy, lz4): a magic-1 wrapper of ``--legacy-messages`` messages with null values;
* ``legacy-nested`` (gzip, snappy, lz4): magic-1 wrappers nested 30 deep.

Every codec Kafka defines makes one dir of each magic-2 kind (none, gzip, snappy, lz4, zstd). Each command runs
in its own process (``os.wait4`` gives that process's peak RSS; Linux carries the parent's RSS into a forked
child, so the dirs are written by a separate process and this one stays small), with its output sent to
``/dev/null`` and a ``--timeout`` (default 60 s):

* ``verify``, ``dump --deep-iteration --print-data-log``, ``read``, ``recover`` (on a copy): the CLI;
* ``startup``: ``LogManager.startup()`` + ``shutdown()`` after an unclean shutdown (every segment recovered);
* ``spark``: the Spark source's executor side (``plan_scan`` + ``read_slice`` of every slice, Arrow batches
  counted), without a JVM.

A command passes when it ends within the timeout under ``--max-rss-mib`` (1024) with exit 0 (the data was
streamed) or 1 (refused with a one-line error naming file and position: the huge values are above the 64 MiB
record limit). Nothing is asserted on time; the table is the figure the reliability doc quotes.

Run: ``.venv/bin/python bench/hostile_bench.py [--quick] [--only huge-value,empty-records] [--codecs zstd]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from segments.compression import CompressionType
from tests.conftest import child_env
from tests.faults.hostile_batches import (
    LEGACY_CODECS,
    empty_records_batch,
    huge_value_batch,
    legacy_empty_messages,
    legacy_nested,
    write_partition,
)

MIB = 1024 * 1024
CLI = [sys.executable, "-c", "from cli.main import main; main()"]

_STARTUP = """
import sys
from logmgr.config import BrokerConfig
from logmgr.log_manager import LogManager
manager = LogManager(BrokerConfig(log_dirs=(sys.argv[1],), log_initial_task_delay_ms=3_600_000))
manager.startup()
manager.shutdown()
"""

_SPARK = """
import sys
from logmgr.spark.options import parse_options
from logmgr.spark.scan import plan_scan, read_slice
options = parse_options({"path": sys.argv[1]})
rows = sum(t.num_rows for piece in plan_scan(options).slices for t in read_slice(piece, options.columns))
print(rows)
"""


@dataclass
class Run:
    """One command over one hostile dir."""

    kind: str
    codec: str
    command: str
    seconds: float
    rss_mib: float
    exit_code: int | None  # None: killed at the timeout

    @property
    def passed(self) -> bool:
        return self.exit_code in (0, 1) and self.seconds <= ARGS.timeout and self.rss_mib <= ARGS.max_rss_mib


def run(argv: list[str], timeout: float) -> tuple[float, float, int | None]:
    """Wall seconds, peak RSS (MiB) and exit code of ``argv`` (None when killed at ``timeout``)."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen(argv, stdout=sink, stderr=sink, env=child_env(), start_new_session=True)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(child.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(child.pid, 0)
                child.returncode = -9
                return time.perf_counter() - start, usage.ru_maxrss / 1024, None
            time.sleep(0.05)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, child.returncode


def commands(log_dir: Path, scratch: Path) -> dict[str, list[str]]:
    """The command lines run over ``log_dir``; ``recover`` works on a copy under ``scratch``."""
    segment = log_dir / "hostile-0" / "00000000000000000000.log"
    copy = scratch / "recover"
    return {
        "verify": [*CLI, "verify", str(log_dir)],
        "dump": [*CLI, "dump", "--deep-iteration", "--print-data-log", str(segment)],
        "read": [*CLI, "read", str(log_dir), "hostile-0"],
        "recover": ["sh", "-c", f'rm -rf "{copy}" && cp -r "{log_dir}" "{copy}" && "$@" recover "{copy}"', "sh", *CLI],
        "startup": [sys.executable, "-c", _STARTUP, str(log_dir)],
        "spark": [sys.executable, "-c", _SPARK, str(log_dir)],
    }


def hostile_dirs(root: Path, kinds: set[str], codecs: list[CompressionType]) -> list[tuple[str, str, Path]]:
    """Write every hostile dir asked for under ``root``. O(total decoded size) to build them."""
    made = []
    for codec in codecs:
        builders = {
            "huge-value": functools.partial(huge_value_batch, codec, ARGS.value_mib * MIB),
            "empty-records": functools.partial(empty_records_batch, codec, ARGS.records),
        }
        if codec in LEGACY_CODECS:
            builders["legacy-many"] = functools.partial(legacy_empty_messages, codec, ARGS.legacy_messages)
            builders["legacy-nested"] = functools.partial(legacy_nested, codec, 30)
        for kind, build in builders.items():
            if kind not in kinds:
                continue
            log_dir = root / f"{kind}-{codec.name}"
            write_partition(log_dir, [build()])
            made.append((kind, codec.name, log_dir))
    return made


def write_dirs(root: Path) -> None:
    """The ``--write-into`` mode: write the hostile dirs and list them, one ``kind codec dir`` a line."""
    kinds = set(ARGS.only.split(","))
    codecs = [CompressionType.from_name(name) for name in ARGS.codecs.split(",")]
    for kind, codec, log_dir in hostile_dirs(root, kinds, codecs):
        print(kind, codec, log_dir)


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="hostile-bench-", dir=ARGS.data_dir))
    runs: list[Run] = []
    try:
        writer = [sys.executable, __file__, *sys.argv[1:], "--write-into", str(root)]
        listed = subprocess.run(writer, check=True, capture_output=True, text=True, env=child_env())
        for line in listed.stdout.splitlines():
            kind, codec, where = line.split(" ", 2)
            log_dir = Path(where)
            size = (log_dir / "hostile-0" / "00000000000000000000.log").stat().st_size
            print(f"{kind} {codec}: {size} bytes on disk", flush=True)
            for name, argv in commands(log_dir, root).items():
                seconds, rss, code = run(argv, ARGS.timeout)
                runs.append(Run(kind, codec, name, seconds, rss, code))
                print(f"  {name:8} {seconds:7.1f} s {rss:8.0f} MiB exit {code}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print("| batch | codec | command | wall s | peak RSS MiB | exit |")
    print("|---|---|---|---:|---:|---:|")
    for r in runs:
        print(f"| {r.kind} | {r.codec} | {r.command} | {r.seconds:.1f} | {r.rss_mib:.0f} | {r.exit_code} |")
    failed = [r for r in runs if not r.passed]
    print(f"\n{len(runs) - len(failed)} of {len(runs)} runs within {ARGS.timeout:.0f} s and {ARGS.max_rss_mib} MiB")
    return 1 if failed else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--value-mib", type=int, default=240)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--legacy-messages", type=int, default=5_000_000)
    parser.add_argument("--only", default="huge-value,empty-records,legacy-many,legacy-nested")
    parser.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--max-rss-mib", type=int, default=1024)
    parser.add_argument("--data-dir", default=None, help="where the hostile dirs are written (default: $TMPDIR)")
    parser.add_argument("--write-into", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.value_mib, args.records, args.legacy_messages = 80, 500_000, 200_000
    return args


if __name__ == "__main__":
    ARGS = parse_args()
    if ARGS.write_into is not None:
        write_dirs(ARGS.write_into)
    else:
        sys.exit(main())
