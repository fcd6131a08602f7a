"""How the writing commands show a plan and run it: the printed plan (text or JSON) and the real run under the log
dir's lock, one line per action as it completes."""

from __future__ import annotations

import dataclasses
import json

import click

from cli.common import ProgressBar, refuse_links
from logmgr.dir_lock import LogDirLock
from logmgr.offline.plan import Action, LogDirPlan, apply_plan


def echo_plan(plan: LogDirPlan, *, as_json: bool, dry_run: bool, summary: str) -> None:
    """Print a plan: JSON (``dryRun`` plus :meth:`LogDirPlan.to_json`), or its lines with warnings on stderr and a
    last line ``summary``. O(actions)."""
    if as_json:
        click.echo(json.dumps({"dryRun": dry_run, **plan.to_json()}))
        return
    for warning in plan.warnings:
        click.echo(f"warning: {warning}", err=True)
    quiet = dataclasses.replace(plan, warnings=())
    for line in quiet.describe():
        click.echo(line)
    click.echo(summary)


def run_plan(plan: LogDirPlan, *, as_json: bool, label: str) -> list[Action]:
    """Apply ``plan`` under the log dir's lock (exit 3 when held), printing each action as it completes (text) or
    nothing (JSON: the caller prints the report). Returns the actions done. O(plan)."""
    refuse_links(plan.log_dir)
    done: list[Action] = []
    with LogDirLock(plan.log_dir), ProgressBar(label, as_json=as_json) as bar:
        total = sum(1 for _ in plan.actions())

        def report(action: Action) -> None:
            done.append(action)
            bar.update(len(done), total, action.kind)
            if not as_json:
                bar.close()
                click.echo(f"done: {action.describe()}")

        apply_plan(plan, on_action=report)
    return done
