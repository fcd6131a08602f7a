"""``logmgr``: an operator's toolbox for Kafka data directories.

Exit codes: 0 success, 1 problems found or operation failed, 2 usage error, 3 log dir locked by another process,
130 interrupted (Ctrl-C), 141 stdout closed by its reader. Errors are one line on stderr; ``--debug`` shows the
traceback instead (never for an interrupt or a closed stdout, which are not errors of logmgr).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from cli.append_cmd import append
from cli.checkpoints_cmd import checkpoints
from cli.cleanup_cmd import cleanup
from cli.common import Failure, LogmgrGroup, ProgressBar, one_line_errors
from cli.compact_cmd import compact
from cli.config_options import ConfigOptions, topic_decode_limits
from cli.configs_cmd import configs
from cli.dump_cmd import dump
from cli.export_cmd import export
from cli.flush_cmd import flush
from cli.info_cmd import info
from cli.move_log_cmd import move_log
from cli.read_cmd import decode_limit_options, read
from cli.recover_cmd import recover
from cli.reindex_cmd import reindex
from cli.serve_cmd import serve
from logmgr.verify import NO_KAFKA_DATA_ERRORS, verify_paths


@click.group(cls=LogmgrGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.version_option(package_name="logmgr")
def main(debug: bool) -> None:
    """Inspect, verify and repair Apache Kafka data directories offline.

    \b
    Example:
        logmgr verify /var/lib/kafka/data
    """


def _files_under(paths: tuple[Path, ...]) -> list[Path]:
    """Every regular file below ``paths`` (symlinks not followed): the progress bar's total for ``verify``."""
    files: list[Path] = []
    for path in paths:
        if path.is_file():
            files.append(path)
            continue
        for root, _dirs, names in os.walk(path):
            files.extend(Path(root) / name for name in names)
    return files


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with totals and problems.")
@decode_limit_options
@one_line_errors
def verify(
    paths: tuple[Path, ...],
    as_json: bool,
    max_record_bytes: int | None,
    max_batch_bytes: int | None,
    config_options: ConfigOptions,
) -> None:
    """Verify log dirs, partition dirs or single files: every batch CRC and record, every index, snapshot and
    checkpoint. Exits 0 when clean, 1 when problems are found or a path holds no Kafka data (a text file, an
    empty dir). An index without its .log is a warning (Kafka deletes it on load), not a problem. A record or
    batch above the larger of its topic's max.message.bytes (from the KRaft metadata, --config, --topic-config
    or --topic-configs) and 64 MiB per record, 256 MiB per batch (or --max-record-bytes/--max-batch-bytes) is a
    problem.

    \b
    Examples:
        logmgr verify /var/lib/kafka/data
        logmgr verify /var/lib/kafka/data/orders-0/00000000000000000000.log --json
    """
    limits = topic_decode_limits(config_options, max_record_bytes=max_record_bytes, max_batch_bytes=max_batch_bytes)
    with ProgressBar("verifying", as_json=as_json) as bar:
        total = sum(1 for _ in _files_under(paths)) if bar.enabled else 0
        done = 0

        def progress(path: Path) -> None:
            nonlocal done
            done += 1
            bar.update(done, max(total, done), path.name)

        report = verify_paths(paths, progress=progress, limits=limits.for_segment)
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    elif len(empty := [p for p in report.problems if p.error in NO_KAFKA_DATA_ERRORS]) == len(paths):
        # No path holds Kafka data, so there is nothing to report on: an error, not "OK: 0 files".
        raise Failure("; ".join(str(problem) for problem in empty))
    else:
        for problem in report.problems:
            click.echo(str(problem))
        for warning in report.warnings:
            click.echo(f"warning: {warning}")
        status = "OK" if report.ok else f"{len(report.problems)} problem(s)"
        warned = f", {len(report.warnings)} warning(s)" if report.warnings else ""
        click.echo(
            f"{status}: {report.files} files, {report.segments} segments, {report.batches} batches, "
            f"{report.records} records, {report.bytes} bytes{warned}"
        )
    if not report.ok:
        sys.exit(1)


main.add_command(dump)
main.add_command(info)
main.add_command(checkpoints)
main.add_command(append)
main.add_command(read)
main.add_command(flush)
main.add_command(cleanup)
main.add_command(compact)
main.add_command(recover)
main.add_command(serve)
main.add_command(export)
main.add_command(configs)
main.add_command(reindex)
main.add_command(move_log)


if __name__ == "__main__":
    # ``python -m cli.main``: the same process as the installed ``logmgr`` script.
    main(prog_name="logmgr")
