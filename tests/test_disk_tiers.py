"""RocketMQ's three disk tiers and manual deletion (issue 14, item 3; ``DefaultMessageStore.CleanCommitLogService``).

Tiers (``logmgr.disk.max.used.ratio`` < ``logmgr.disk.usage.clean.ratio`` < ``logmgr.disk.usage.warn.ratio``,
RocketMQ's diskMaxUsedSpaceRatio / diskSpaceCleanForciblyRatio / diskSpaceWarningLevelRatio): above the first,
expired segments go even outside ``logmgr.delete.when``; above the second, the oldest go regardless of age (never
past the high watermark); above the third, the dir is full and refuses appends. Usage comes from the file
system's real used space, checked by the ``logmgr-disk-check`` job every ``logmgr.disk.check.interval.ms``; a
segment pending deletion still counts until unlinked. ``execute_delete_files_manually(n)`` opens the delete
window for the next n cleanup runs, retention still deciding.

Driven with an injected usage probe (``Disk``: fixed other bytes plus the dir's real ``.log*`` files) and, as root,
on a real 4 MiB tmpfs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli import cleanup_cmd
from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig
from logmgr.errors import ConfigError, LogDirFullError
from logmgr.log_manager import JOB_DISK_CHECK, MANUAL_DELETE_RUNS, LogManager, measure_disk_usage
from logmgr.retention import disk_usage_state
from logmgr.scheduler import ManualScheduler
from segments.naming import TopicPartition
from segments.records import SimpleRecord
from tests import test_log_manager
from tests.small_disk_helpers import mounted_tmpfs
from tests.test_log_manager import (
    BASE_PROPS,
    DELETE_DELAY,
    HOUR,
    MINUTE,
    T0,
    Disk,
    Factory,
    clock_of,
    fill,
    sched,
)

make = test_log_manager.make  # the LogManager tests' fixture: managers on a ManualScheduler, shut down after
TP = TopicPartition("t", 0)
TIERS = {
    "logmgr.disk.max.used.ratio": "0.5",
    "logmgr.disk.usage.clean.ratio": "0.8",
    "logmgr.disk.usage.warn.ratio": "0.9",
}
TIERS_OFF = {key: "1.0" for key in TIERS}


def closed_window() -> dict[str, str]:
    """A ``logmgr.delete.when`` that excludes T0's local hour (and the next two)."""
    return {"logmgr.delete.when": f"{(datetime.fromtimestamp(T0 // 1000).hour + 3) % 24:02d}"}


# -- the tier function and its settings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "state"), [(0, "ok"), (50, "ok"), (51, "expired"), (80, "expired"), (81, "clean"), (91, "full")]
)
def test_disk_usage_state_has_rocketmqs_three_tiers(used: int, state: str) -> None:
    assert disk_usage_state(used, 100, 0.8, 0.9, 0.5) == state


def test_a_switched_off_tier_is_skipped() -> None:
    assert disk_usage_state(95, 100, 1.0, 1.0, 0.5) == "expired"
    assert disk_usage_state(95, 100, 0.8, 1.0, 1.0) == "clean"
    # Off means off even when a probe reports more than the whole file system.
    assert disk_usage_state(150, 100, 1.0, 1.0, 1.0) == "ok"


def test_the_tiers_default_to_rocketmqs_seed_values_and_one_switches_a_tier_off() -> None:
    broker = BrokerConfig()
    assert (broker.disk_max_used_ratio, broker.disk_usage_clean_ratio, broker.disk_usage_warn_ratio) == (
        0.75,
        0.85,
        0.90,
    )
    assert broker.disk_tiers_enabled
    # A tier at 1.0 takes no part in the ordering: the first tier can be switched off below the others.
    middle_off = BrokerConfig.from_properties({"logmgr.disk.usage.clean.ratio": "1.0"})
    assert middle_off.disk_usage_clean_ratio == 1.0 and middle_off.disk_usage_warn_ratio == 0.9
    all_off = BrokerConfig.from_properties({f"logmgr.disk.{k}.ratio": "1" for k in ("max.used", "usage.clean", "usage.warn")})
    assert not all_off.disk_tiers_enabled
    # Setting a tier below a default one above it is refused, keyed by the setting given and naming the default.
    with pytest.raises(ConfigError, match=r"^logmgr\.disk\.usage\.clean\.ratio: .*less than logmgr\.disk\.max\.used\.ratio \(0\.75, its default\)"):
        BrokerConfig.from_properties({"logmgr.disk.usage.clean.ratio": "0.5"})


def test_tier_ratios_must_not_decrease() -> None:
    broker = BrokerConfig.from_properties(TIERS)
    assert (broker.disk_max_used_ratio, broker.disk_usage_clean_ratio, broker.disk_usage_warn_ratio) == (
        0.5,
        0.8,
        0.9,
    )
    assert broker.disk_check_interval_ms == 10_000
    with pytest.raises(ConfigError, match=r"^logmgr\.disk\.max\.used\.ratio: .*greater than"):
        BrokerConfig.from_properties({**TIERS, "logmgr.disk.max.used.ratio": "0.85"})
    with pytest.raises(ConfigError, match=r"^logmgr\.disk\.max\.used\.ratio: .*greater than.*warn"):
        BrokerConfig.from_properties(
            {"logmgr.disk.max.used.ratio": "0.95", "logmgr.disk.usage.clean.ratio": "1", "logmgr.disk.usage.warn.ratio": "0.9"}
        )
    with pytest.raises(ConfigError, match=r"^logmgr\.disk\.check\.interval\.ms"):
        BrokerConfig.from_properties({"logmgr.disk.check.interval.ms": "0"})


# -- tiers with an injected usage probe ------------------------------------------------------------------------


def test_first_tier_deletes_expired_segments_outside_the_delete_window(make: Factory) -> None:
    disk = Disk(total=10_000)
    m = make(props={**TIERS, **closed_window(), "log.retention.ms": str(MINUTE)}, disk_usage=disk)
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20, ts=T0 - HOUR)
    # Below the first tier the window holds: nothing expired goes.
    assert m.cleanup_logs().deletions == {}
    disk.other = 5_000
    report = m.cleanup_logs()
    assert {d.reason for d in report.deletions[TP]} == {"retention.ms"}
    # Each deletion names the tier that let the time rule run outside the window.
    assert all("allowed by the disk tier logmgr.disk.max.used.ratio 50.0%" in d.detail for d in report.deletions[TP])
    assert log.segments.base_offsets() == [20]
    assert m.status()["dirs"][0]["diskTier"] == "expired"


def test_first_tier_keeps_unexpired_segments(make: Factory) -> None:
    disk = Disk(total=10_000, other=5_500)
    m = make(props={**TIERS, **closed_window(), "log.retention.ms": str(HOUR)}, disk_usage=disk)
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20)
    assert m.cleanup_logs().deletions == {}
    assert log.segments.base_offsets() == [0, 5, 10, 15]


def test_second_tier_deletes_the_oldest_regardless_of_age_never_past_the_high_watermark(make: Factory) -> None:
    disk = Disk(total=2_000, other=0)
    m = make(props={**TIERS, "log.retention.ms": str(HOUR)}, disk_usage=disk)
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20)  # 1620 B of 2000: 81 %, above the clean tier
    log.high_watermark = 7
    report = m.cleanup_logs()
    # Only segment 0 lies wholly below the high watermark; the second tier wants more but may not pass it.
    assert [(d.base_offset, d.reason) for d in report.deletions[TP]] == [(0, "disk-usage")]
    assert log.log_start_offset == 5


def test_the_disk_check_job_runs_on_its_own_interval_and_acts_on_the_tier(make: Factory) -> None:
    disk = Disk(total=10_000, other=9_500)
    m = make(props={**TIERS, "logmgr.disk.check.interval.ms": "200"}, disk_usage=disk)
    m.startup()
    log = m.get_or_create_log("t", 0)
    assert JOB_DISK_CHECK in m.scheduler.jobs()
    # The retention job first runs at log.initial.task.delay.ms (1000); the disk check runs by then too, and
    # again every 200 ms in between retention runs (every 5000 ms).
    sched(m).advance(1_000)
    runs = m.scheduler.job_stats(JOB_DISK_CHECK).runs
    with pytest.raises(LogDirFullError):
        fill(log, 1)
    disk.other = 0
    sched(m).advance(200)
    assert m.scheduler.job_stats(JOB_DISK_CHECK).runs == runs + 1
    fill(log, 1)
    assert m.status()["dirs"][0]["full"] is False


def test_the_disk_check_cleans_only_the_dirs_above_a_tier(make: Factory, tmp_path: Path) -> None:
    def probe(path: Path) -> tuple[int, int]:
        return (6_000 if path.name == "d1" else 0), 10_000

    m = make(
        [tmp_path / "d1", tmp_path / "d2"],
        {**TIERS, **closed_window(), "log.retention.ms": str(MINUTE)},
        disk_usage=probe,
    )
    m.startup()
    pressed, calm = m.get_or_create_log("a", 0), m.get_or_create_log("b", 0)
    assert (pressed.dir.parent.name, calm.dir.parent.name) == ("d1", "d2")
    fill(pressed, 20, ts=T0 - HOUR)
    fill(calm, 20, ts=T0 - HOUR)
    states = m.check_disk_usage()
    assert sorted(states.values()) == ["expired", "ok"]
    assert pressed.segments.base_offsets() == [20]
    assert calm.segments.base_offsets() == [0, 5, 10, 15]


def test_the_default_tiers_run_and_every_tier_at_one_switches_the_check_off(make: Factory, tmp_path: Path) -> None:
    # RocketMQ's defaults with no setting: the job is scheduled and the dir at 91 % is full.
    on = make([tmp_path / "on"], disk_usage=Disk(total=10_000, other=9_100))
    on.startup()
    assert JOB_DISK_CHECK in on.scheduler.jobs()
    assert on.check_disk_usage() == {on.log_dirs()[0].path: "full"}
    probe = Disk(total=10_000, other=9_900)
    off = make([tmp_path / "off"], TIERS_OFF, disk_usage=probe)
    off.startup()
    assert JOB_DISK_CHECK not in off.scheduler.jobs()
    assert off.check_disk_usage() == {off.log_dirs()[0].path: "ok"}
    fill(off.get_or_create_log("t", 0), 20, ts=T0 - 30 * 24 * HOUR)
    off.cleanup_logs()
    assert probe.calls == 0


def test_pending_deletions_do_not_count_as_freed_until_unlinked(make: Factory) -> None:
    disk = Disk(total=2_000, other=200)
    m = make(props={**TIERS, "log.retention.ms": str(HOUR)}, disk_usage=disk)
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20)  # 1620 + 200 of 2000: 91 %, full
    states = m.check_disk_usage()
    assert set(states.values()) == {"full"}
    # The check cleaned at once: the oldest segments are renamed .deleted, still on disk, so still full.
    assert log.log_start_offset > 0
    assert m.deleter.pending_bytes() > 0
    assert set(m.check_disk_usage().values()) == {"full"}
    with pytest.raises(LogDirFullError):
        fill(log, 1)
    clock_of(m).advance(DELETE_DELAY)
    m.delete_logs()
    assert m.deleter.pending_bytes() == 0
    assert set(m.check_disk_usage().values()) != {"full"}
    fill(log, 1)


# -- manual deletion (executeDeleteFilesManually) --------------------------------------------------------------


def test_manual_deletion_opens_the_window_for_the_next_n_runs_only(make: Factory) -> None:
    m = make(props={**closed_window(), "log.retention.ms": str(MINUTE)})
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 10, ts=T0 - HOUR)
    fill(log, 5)
    fill(log, 5, ts=T0 + 10 * MINUTE)
    assert m.cleanup_logs().deletions == {}
    m.execute_delete_files_manually(2)
    assert m.manual_delete_runs == 2
    first = m.cleanup_logs()
    # Retention still decides: only the expired segments go, not the fresh ones.
    assert [(d.base_offset, d.reason) for d in first.deletions[TP]] == [(0, "retention.ms"), (5, "retention.ms")]
    assert log.segments.base_offsets() == [10, 15]
    clock_of(m).advance(2 * MINUTE)
    second = m.cleanup_logs()
    assert [d.base_offset for d in second.deletions[TP]] == [10]
    assert m.manual_delete_runs == 0
    clock_of(m).advance(20 * MINUTE)
    # The third run is back under the window: segment 15 has expired too, but stays.
    assert m.cleanup_logs().deletions == {}


def test_manual_deletion_is_separate_from_deleting_the_n_oldest(make: Factory) -> None:
    m = make(props={**closed_window(), "log.retention.ms": str(HOUR)})
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20)
    m.execute_delete_files_manually()
    assert m.manual_delete_runs == MANUAL_DELETE_RUNS
    # Nothing is expired: the open window deletes nothing, unlike request_manual_cleanup.
    assert m.cleanup_logs().deletions == {}
    m.request_manual_cleanup(1)
    assert [d.reason for d in m.cleanup_logs().deletions[TP]] == ["manual"]
    assert m.manual_delete_runs == MANUAL_DELETE_RUNS - 2
    with pytest.raises(ValueError, match="runs"):
        m.execute_delete_files_manually(-1)


# -- a real small file system ----------------------------------------------------------------------------------

FS_BYTES = 4 * 1024 * 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A fresh 4 MiB tmpfs at ``tmp_path/fs`` (root only: skipped with a reason otherwise)."""
    yield from mounted_tmpfs(tmp_path, FS_BYTES)


def test_tiers_on_a_real_small_file_system(small_fs: Path) -> None:
    clock = ManualClock(T0)
    broker = BrokerConfig.from_properties(
        {
            **BASE_PROPS,
            **TIERS,
            "log.dirs": str(small_fs / "d1"),
            "log.segment.bytes": str(128 * 1024),
            "log.index.size.max.bytes": "4096",
            "log.retention.ms": str(HOUR),
        }
    )
    manager = LogManager(broker, clock=clock, scheduler=ManualScheduler(clock))
    manager.startup()
    try:
        log = manager.get_or_create_log("t", 0)
        value = b"x" * 8192
        for _ in range(128):  # about 1 MiB in 8 segments
            log.append_records([SimpleRecord(value, b"k", T0)])
        assert set(manager.check_disk_usage().values()) == {"ok"}
        # Fill the file system to 95 % with a file that is no log: the dir is full, whatever made it so.
        stat = os.statvfs(small_fs)
        total, used = stat.f_blocks * stat.f_frsize, (stat.f_blocks - stat.f_bfree) * stat.f_frsize
        (small_fs / "filler").write_bytes(b"\0" * int(0.95 * total - used))
        assert set(manager.check_disk_usage().values()) == {"full"}
        # The check cleaned at once (second tier), but renamed segments still occupy the disk until unlinked.
        assert log.log_start_offset > 0 and manager.deleter.pending_bytes() > 0
        with pytest.raises(LogDirFullError):
            log.append_records([SimpleRecord(value, b"k", T0)])
        clock.advance(DELETE_DELAY)
        manager.delete_logs()
        assert set(manager.check_disk_usage().values()) <= {"clean", "expired", "ok"}
        log.append_records([SimpleRecord(value, b"k", T0)])
    finally:
        manager.shutdown()


def test_measured_usage_is_rocketmqs_used_over_used_plus_available(small_fs: Path) -> None:
    # RocketMQ's getDiskPartitionSpaceUsedPercent: (total - free) / ((total - free) + usable), as df's Use%.
    (small_fs / "filler").write_bytes(b"\0" * (FS_BYTES // 3))
    stat = os.statvfs(small_fs)
    used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    assert measure_disk_usage(small_fs) == (used, used + stat.f_bavail * stat.f_frsize)


# -- logmgr cleanup (offline) --------------------------------------------------------------------------------------


def _dir_with_expired_segments(make: Factory, tmp_path: Path) -> Path:
    logdir = tmp_path / "d1"
    m = make([logdir], {"log.retention.ms": str(MINUTE)})
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20, ts=T0 - HOUR)
    log.high_watermark = log.log_end_offset
    m.shutdown()
    return logdir


def _cleanup_plan(logdir: Path, monkeypatch: pytest.MonkeyPatch, used: int, *flags: str) -> dict[str, Any]:
    monkeypatch.setattr(cleanup_cmd, "measure_disk_usage", lambda path: (used, 1000))
    result = CliRunner().invoke(cleanup_cmd.cleanup, [str(logdir), "--dry-run", "--json", *flags])
    assert result.exit_code == 0, result.output
    plan: dict[str, Any] = json.loads(result.output)
    return plan


def _deletions(plan: dict[str, Any]) -> list[str]:
    return [a["reason"] for p in plan["partitions"] for a in p["actions"] if a["action"] == "delete"]


def test_offline_cleanup_applies_the_default_tiers_and_names_them(
    make: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = _dir_with_expired_segments(make, tmp_path)
    config = tmp_path / "server.properties"
    # The offline cleanup reads the real clock (the managers above run on T0's): the window excludes the real hour.
    window = f"{(datetime.now().hour + 12) % 24:02d}"
    config.write_text(f"log.retention.ms={HOUR // 2}\nlogmgr.delete.when={window}\n")
    # Below every tier the closed window keeps the expired segments.
    calm = _cleanup_plan(logdir, monkeypatch, 700, "--config", str(config))
    assert _deletions(calm) == []
    assert any("below every disk tier" in note for note in calm["notes"])
    # First tier (RocketMQ's default 75 %): expired segments go, each naming the tier.
    first = _cleanup_plan(logdir, monkeypatch, 760, "--config", str(config))
    reasons = _deletions(first)
    assert len(reasons) == 4 and all(
        r.startswith("retention.ms: ") and "allowed by the disk tier logmgr.disk.max.used.ratio 75.0%" in r
        for r in reasons
    )
    assert any("above logmgr.disk.max.used.ratio 75%" in note for note in first["notes"])
    # Second tier (85 %): the oldest go first whatever their age, naming the tier, until usage is below it.
    second = _cleanup_plan(logdir, monkeypatch, 860, "--config", str(config), "--retention-ms", "-1")
    (reason,) = _deletions(second)
    assert reason.startswith("disk-usage: second disk tier: usage 86.0% (860/1000 B) > logmgr.disk.usage.clean.ratio 85.0%")
    # Third tier (90 %): what a broker would do is noted.
    third = _cleanup_plan(logdir, monkeypatch, 950, "--config", str(config), "--retention-ms", "-1")
    assert any("above logmgr.disk.usage.warn.ratio 90%: a broker marks the dir full" in n for n in third["notes"])
    assert len(_deletions(third)) == 1  # one 405 B segment takes 95 % down to 54.5 %
    # Every tier at 1.0: usage is not even measured.
    off = tmp_path / "off.properties"
    off.write_text(config.read_text() + "".join(f"{key}=1.0\n" for key in TIERS))
    monkeypatch.setattr(cleanup_cmd, "measure_disk_usage", None)
    result = CliRunner().invoke(cleanup_cmd.cleanup, [str(logdir), "--dry-run", "--json", "--config", str(off)])
    assert result.exit_code == 0, result.output
    assert _deletions(json.loads(result.output)) == []
