"""``logmgr reindex``: rebuild a partition's indexes from its ``.log`` files. In place it is a plan (one index
rebuild per segment, with ``--key-index`` one key index (re)build per segment and the deletion of orphan key
indexes; ``--dry-run`` prints it) applied under the log dir's lock, reporting per file what changed; ``--out``
reads the source only and writes only into the out dir."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from cli.common import Failure, ProgressBar, one_line_errors, refuse_links
from cli.plan_output import echo_plan
from logmgr.dir_lock import LogDirLock
from logmgr.offline.plan import Action, DeleteFiles, RebuildIndexes, RebuildKeyIndex, apply_plan
from logmgr.reindex import ReindexReport, find_logs, plan_reindex
from logmgr.reindex import reindex as reindex_paths
from segments.key_index import HEADER_SIZE, KEY_INDEX_SUFFIX, KeyIndexHeader
from segments.naming import filename_prefix_from_offset

_ENTRY_SIZES = {".index": 8, ".timeindex": 12, ".txnindex": 34}
_REPORTED = (*_ENTRY_SIZES, KEY_INDEX_SUFFIX)


@click.command()
@click.argument("target", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the rebuilt indexes into this directory instead of replacing them in place.",
)
@click.option("--index-interval-bytes", type=click.IntRange(min=0), default=4096, show_default=True)
@click.option("--dry-run", is_flag=True, help="In place: print the plan and change nothing.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="In place: one JSON object (the plan, the actions applied, per file what changed); --out: one per segment.",
)
@click.option(
    "--key-index",
    is_flag=True,
    help="In place: also (re)build the key index (.keyindex) of each segment, saying per file why (none yet, "
    "partial, stale, unreadable, up to date), and delete the key indexes of segments no longer in the log.",
)
@one_line_errors
def reindex(
    target: Path, out: Path | None, index_interval_bytes: int, dry_run: bool, as_json: bool, key_index: bool
) -> None:
    """Rebuild .index, .timeindex and .txnindex files from the .log files of a partition dir (or one .log file),
    trimmed as Kafka leaves them after a clean shutdown. In place (each segment atomically, under the log dir's
    .lock: exit 3 while a broker holds it) unless --out is given: a plan, printed by --dry-run, then executed
    exactly, reporting per file what changed. The .log files are never changed; exits 1 if a .log has invalid
    bytes (indexes then cover its valid prefix).

    \b
    Examples:
        logmgr reindex /var/lib/kafka/data/orders-0 --dry-run
        logmgr reindex /var/lib/kafka/data/orders-0 --out /tmp/orders-0-indexes
        logmgr reindex /var/lib/kafka/data/orders-0 --key-index --dry-run
    """
    if key_index and out is not None:
        raise click.UsageError("--key-index rebuilds key indexes in place: no --out")
    if out is not None:
        if dry_run:
            raise click.UsageError(
                "--dry-run plans an in-place reindex; --out writes nothing into TARGET anyway"
            )
        report = _reindex_out(target, out, index_interval_bytes, as_json)
        if not report.ok:
            sys.exit(1)
        return
    find_logs(target)  # a TARGET that is neither a partition dir nor a .log fails here, before any lock file
    partition_dir = target if target.is_dir() else target.parent
    if partition_dir.is_symlink():
        # The lock taken would be the link's dir's, not the one of the dir written into.
        raise Failure(f"{partition_dir} is a symbolic link: reindex the directory it points to")
    plan = plan_reindex(target, index_interval_bytes=index_interval_bytes, key_index=key_index)
    counts = plan.counts()
    summary = f"{counts.get(RebuildIndexes.kind, 0)} segment(s) to reindex"
    if key_index:
        summary += (
            f", {counts.get(RebuildKeyIndex.kind, 0)} key index(es) to (re)build, "
            f"{counts.get(DeleteFiles.kind, 0)} orphan key index(es) to delete"
        )
    if dry_run:
        echo_plan(plan, as_json=as_json, dry_run=True, summary=f"dry run: {summary}; nothing was changed")
    else:
        refuse_links(partition_dir.parent, [partition_dir])
        if not as_json:
            echo_plan(plan, as_json=False, dry_run=False, summary=f"plan: {summary}")
        with LogDirLock(partition_dir.parent):
            before = {p.name: p.read_bytes() for p in partition_dir.iterdir() if p.suffix in _REPORTED}
            changes: list[dict[str, Any]] = []

            def done(action: Action) -> None:
                found = _changes(partition_dir, _files_of(action), before)
                changes.extend(found)
                if not as_json:
                    for change in found:
                        click.echo(_describe(change))

            applied = apply_plan(plan, on_action=done).done
        if as_json:
            result = {
                "dryRun": False,
                **plan.to_json(),
                "applied": [a.to_json() for a in applied],
                "files": changes,
            }
            click.echo(json.dumps(result))
    if plan.warnings:
        sys.exit(1)


def _files_of(action: Action) -> list[str]:
    """The names of the index files ``action`` may have changed. O(1)."""
    if isinstance(action, RebuildIndexes):
        return [filename_prefix_from_offset(action.base_offset) + suffix for suffix in _ENTRY_SIZES]
    if isinstance(action, RebuildKeyIndex):
        return [filename_prefix_from_offset(action.base_offset) + KEY_INDEX_SUFFIX]
    if isinstance(action, DeleteFiles):
        return [name for name, _ in action.files]
    return []


def _entries(name: str, content: bytes) -> int:
    if name.endswith(KEY_INDEX_SUFFIX):
        return KeyIndexHeader.unpack(content[:HEADER_SIZE]).entry_count
    return len(content) // _ENTRY_SIZES[Path(name).suffix]


def _changes(partition_dir: Path, names: list[str], before: dict[str, bytes]) -> list[dict[str, Any]]:
    """Per file: bytes before and after, entries after, whether it changed. O(files)."""
    changes = []
    for name in names:
        path = partition_dir / name
        old = before.get(name)
        new = path.read_bytes() if path.exists() else None
        if old is None and new is None:
            continue
        changes.append(
            {
                "file": str(path),
                "bytesBefore": None if old is None else len(old),
                "bytesAfter": None if new is None else len(new),
                "entriesAfter": None if new is None else _entries(name, new),
                "changed": old != new,
            }
        )
    return changes


def _describe(change: dict[str, Any]) -> str:
    before, after, entries = change["bytesBefore"], change["bytesAfter"], change["entriesAfter"]
    if not change["changed"]:
        return f"{change['file']}: unchanged ({after} B, {entries} entries)"
    if after is None:
        why = "; no aborted transaction in the segment" if change["file"].endswith(".txnindex") else ""
        return f"{change['file']}: removed ({before} B{why})"
    was = "absent" if before is None else f"{before} B"
    return f"{change['file']}: {was} -> {after} B ({entries} entries)"


def _reindex_out(target: Path, out: Path, index_interval_bytes: int, as_json: bool) -> ReindexReport:
    """``--out``: the source is only read; per segment, what was written into ``out``."""
    total = len(find_logs(target))
    with ProgressBar("reindexing", as_json=as_json) as bar:
        done = 0

        def progress(path: Path) -> None:
            nonlocal done
            done += 1
            bar.update(done, total, path.name)

        report = reindex_paths(target, out=out, index_interval_bytes=index_interval_bytes, progress=progress)
    for segment in report.segments:
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "log": str(segment.log),
                        "baseOffset": segment.base_offset,
                        "batches": segment.batches,
                        "offsetIndexEntries": segment.offset_entries,
                        "timeIndexEntries": segment.time_entries,
                        "abortedTransactions": segment.aborted_txns,
                        "validBytes": segment.valid_bytes,
                        "invalidTailBytes": segment.invalid_tail_bytes,
                        "error": None if segment.error is None else str(segment.error),
                        "written": [str(p) for p in segment.written],
                    }
                )
            )
        else:
            click.echo(
                f"{segment.log}: {segment.batches} batches, {segment.offset_entries} offset entries, "
                f"{segment.time_entries} time entries, {segment.aborted_txns} aborted transactions"
            )
            if segment.error is not None:
                click.echo(f"  {segment.error}", err=True)
            elif segment.invalid_tail_bytes:
                click.echo(
                    f"  {segment.log}: position {segment.valid_bytes}: {segment.invalid_tail_bytes} invalid bytes "
                    "at the end (recovery would truncate them)",
                    err=True,
                )
    return report
