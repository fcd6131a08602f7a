"""Path safety: hostile topic and partition names, and symbolic links inside a log dir that point out of it.

Names: topics with ``/``, ``..``, NUL, more than 249 characters, look-alike Unicode (fullwidth dots, one-dot
leaders, zero-width spaces, fullwidth letters) are refused by :func:`validate_topic`, by
:func:`parse_topic_partition`, by ``LogManager.get_or_create_log`` and by every command that takes a TOPIC-P
(``append``, ``read``, ``checkpoints set``, ``flush --partition``), which then leave the whole tree as it was.

Links: a fresh log dir gets one kind of link pointing outside it (a partition dir, a ``.log``, an index, a
checkpoint, a ``.tmp`` an atomic write would open, the ``.lock``, a leader-epoch checkpoint, a producer
snapshot); each writing command then runs on it and the outside dir must be byte for byte what it was (same files,
same content, same modes, nothing created). The commands refuse such a dir with exit 1 and a message naming the
link. A symlinked partition dir is not a partition of the dir for ``read`` either (``info``, the LogManager and
the Spark source skip it), while a ``.log`` link inside a real partition dir is read as Kafka reads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from logmgr.config import BrokerConfig
from logmgr.errors import LogmgrError
from logmgr.log_manager import LogManager
from segments.errors import InvalidPartitionDirError, InvalidTopicError, StorageFormatError
from segments.naming import (
    MAX_TOPIC_LENGTH,
    PartitionDirName,
    TopicPartition,
    parse_topic_partition,
    validate_topic,
    validate_topic_partition,
)
from segments.records import SimpleRecord
from tests.conftest import FAILURE_DEADLINE_S, REPO, child_env
from tests.faults.test_hostile_input import FaultReport

REPORT = FaultReport(__file__)
FIRST = "00000000000000000000"
NO_JOBS = str(10**15)


@pytest.fixture(scope="module", autouse=True)
def _fault_report() -> Iterator[None]:
    yield
    REPORT.write()


# --- names ------------------------------------------------------------------------------------------------------

HOSTILE_TOPICS = [
    "",
    ".",
    "..",
    "../x",
    "x/..",
    "a/b",
    "/abs",
    "t\x00x",
    "x" * (MAX_TOPIC_LENGTH + 1),
    "x" * 300,
    "t x",
    "t\tx",
    "t\nx",
    "t\\x",
    "é",
    "t\u2024x",  # ONE DOT LEADER, renders as "."
    "\u2025",  # TWO DOT LEADER, renders as ".."
    "t\uff0ex",  # FULLWIDTH FULL STOP
    "\uff0e\uff0e",
    "t\u200bx",  # ZERO WIDTH SPACE
    "t\u2215x",  # DIVISION SLASH, renders as "/"
    "\uff21\uff22",  # FULLWIDTH A B
    "t\udc80x",  # an undecodable file-name byte
]


@pytest.mark.parametrize("topic", HOSTILE_TOPICS, ids=range(len(HOSTILE_TOPICS)))
def test_hostile_topics_are_refused_by_every_name_check(topic: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic(topic)
    with pytest.raises(InvalidTopicError):
        validate_topic_partition(TopicPartition(topic, 0))
    if topic and "-" not in topic:
        with pytest.raises((InvalidTopicError, InvalidPartitionDirError)):
            parse_topic_partition(f"{topic}-0")
    REPORT.add("name")


@pytest.mark.parametrize("partition", [-1, -(2**31), 2**31, 2**63])
def test_partitions_outside_java_int_are_refused(partition: int) -> None:
    with pytest.raises(InvalidPartitionDirError):
        validate_topic_partition(TopicPartition("t", partition))
    REPORT.add("name")


@pytest.mark.parametrize("name", ["../../etc/passwd-0", "a/b-0", "t\x00-0", "../t-0.abc-delete", "t-0/../../x-1"])
def test_partition_dir_names_that_are_paths_are_refused(name: str) -> None:
    with pytest.raises(InvalidPartitionDirError):
        PartitionDirName.parse(name)
    with pytest.raises(StorageFormatError):
        parse_topic_partition(name)
    REPORT.add("name")


def test_accepted_names_stay_one_entry_of_the_log_dir(tmp_path: Path) -> None:
    # Kafka's legal characters only; "..." and "-" runs are legal topic text and name one plain entry.
    for text in ("...-0", "t--1", "a.b_c-D-7", "x" * MAX_TOPIC_LENGTH + "-0", "__consumer_offsets-49"):
        tp = parse_topic_partition(text)
        path = tmp_path / str(tp)
        assert path.parent == tmp_path and path.name == str(tp) and ".." not in path.parts
    REPORT.add("name")


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``root`` (links not followed): content hash (or link target, or "dir") and mode."""
    found: dict[str, tuple[str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = path.lstat()
            if path.is_symlink():
                kind = "link:" + os.readlink(path)
            elif path.is_dir():
                kind = "dir"
            else:
                kind = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = (kind, info.st_mode)
    return found


def _invoke(args: list[str], stdin: str = "") -> Result:
    result = CliRunner().invoke(main, args, input=stdin)
    # Refusals are one-line errors with a documented exit code, never a traceback.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def _broker(*dirs: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {"log.dirs": ",".join(str(d) for d in dirs), "log.initial.task.delay.ms": NO_JOBS}
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log dir with partition ``t-0`` (records, indexes, a producer snapshot, checkpoints), shut down cleanly."""
    logdir = tmp_path_factory.mktemp("template") / "logdir"
    logdir.mkdir()
    records = "".join(json.dumps({"key": f"k{i}", "value": f"v{i}", "timestamp": 1000 + i}) + "\n" for i in range(20))
    result = _invoke(["append", str(logdir), "t-0", "--create", "--batch-records", "4"], records)
    assert result.exit_code == 0, result.output
    with LogManager(_broker(logdir)) as manager:
        log = manager.get_log(TopicPartition("t", 0))
        assert log is not None
        log.roll()
    assert (logdir / "t-0" / f"{FIRST}.log").is_file()
    return logdir


@pytest.mark.parametrize("topic", HOSTILE_TOPICS, ids=range(len(HOSTILE_TOPICS)))
def test_log_manager_refuses_hostile_topics_and_creates_nothing(template: Path, tmp_path: Path, topic: str) -> None:
    logdir = tmp_path / "logdir"
    shutil.copytree(template, logdir)
    with LogManager(_broker(logdir)) as manager:
        before = _tree(tmp_path)
        with pytest.raises(InvalidTopicError):
            manager.get_or_create_log(topic, 0)
        assert _tree(tmp_path) == before
    REPORT.add("log-manager")


def test_log_manager_refuses_a_partition_outside_java_int(template: Path, tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    shutil.copytree(template, logdir)
    with LogManager(_broker(logdir)) as manager, pytest.raises(InvalidPartitionDirError):
        manager.get_or_create_log("t", -1)
    assert not (logdir / "t--1").exists()


HOSTILE_TP_ARGS = [f"{topic}-0" for topic in HOSTILE_TOPICS if topic] + [
    "../../outside-0",
    "t-0/../../../outside-1",
    "/abs/path-0",
    "t--1x",
    "t-",
]


@pytest.mark.parametrize(
    "command",
    ["append", "append-create", "read", "checkpoints-set", "flush-partition"],
)
def test_commands_taking_a_topic_partition_refuse_hostile_names(template: Path, tmp_path: Path, command: str) -> None:
    logdir = tmp_path / "logdir"
    shutil.copytree(template, logdir)
    checkpoint = logdir / "recovery-point-offset-checkpoint"
    for text in HOSTILE_TP_ARGS:
        before = _tree(tmp_path)
        args = {
            "append": ["append", str(logdir), text],
            "append-create": ["append", str(logdir), text, "--create"],
            "read": ["read", str(logdir), text],
            "checkpoints-set": ["checkpoints", "set", str(checkpoint), text, "5", "--force"],
            "flush-partition": ["flush", str(logdir), "--partition", text],
        }[command]
        result = _invoke(args, '{"value": "x"}\n')
        assert result.exit_code in (1, 2), (text, result.output)
        assert _tree(tmp_path) == before, text
        REPORT.add("cli-name")


# --- symbolic links pointing out of the log dir ------------------------------------------------------------------


@pytest.fixture
def dirs(template: Path, tmp_path: Path) -> tuple[Path, Path]:
    """``(logdir, outside)``: a copy of the template and, beside it, files and a partition dir a link can reach."""
    logdir = tmp_path / "logdir"
    shutil.copytree(template, logdir)
    outside = tmp_path / "outside"
    shutil.copytree(template / "t-0", outside / "victim-0")
    for name in (f"{FIRST}.log", f"{FIRST}.index", "leader-epoch-checkpoint"):
        shutil.copy(template / "t-0" / name, outside / f"victim-{name}")
    shutil.copy(template / "recovery-point-offset-checkpoint", outside / "victim-checkpoint")
    snapshot = next((template / "t-0").glob("*.snapshot"))
    shutil.copy(snapshot, outside / "victim.snapshot")
    return logdir, outside


def _replace_with_link(path: Path, target: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to(target)


LINKS: dict[str, Callable[[Path, Path], None]] = {
    "partition-dir": lambda logdir, outside: (logdir / "evil-0").symlink_to(outside / "victim-0"),
    "log-file": lambda logdir, outside: _replace_with_link(logdir / "t-0" / f"{FIRST}.log", outside / f"victim-{FIRST}.log"),
    "index-file": lambda logdir, outside: _replace_with_link(
        logdir / "t-0" / f"{FIRST}.index", outside / f"victim-{FIRST}.index"
    ),
    "checkpoint-file": lambda logdir, outside: _replace_with_link(
        logdir / "recovery-point-offset-checkpoint", outside / "victim-checkpoint"
    ),
    "dangling-tmp": lambda logdir, outside: (logdir / "recovery-point-offset-checkpoint.tmp").symlink_to(
        outside / "created-through-tmp"
    ),
    "dangling-lock": lambda logdir, outside: _replace_with_link(logdir / ".lock", outside / "created-through-lock"),
    "leader-epoch-checkpoint": lambda logdir, outside: _replace_with_link(
        logdir / "t-0" / "leader-epoch-checkpoint", outside / "victim-leader-epoch-checkpoint"
    ),
    "snapshot": lambda logdir, outside: _replace_with_link(
        next((logdir / "t-0").glob("*.snapshot")), outside / "victim.snapshot"
    ),
}

WRITING_COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "append": lambda logdir: ["append", str(logdir), "t-0"],
    "append-to-linked-dir": lambda logdir: ["append", str(logdir), "evil-0", "--create"],
    "flush": lambda logdir: ["flush", str(logdir)],
    "flush-partition": lambda logdir: ["flush", str(logdir), "--partition", "t-0"],
    "cleanup": lambda logdir: ["cleanup", str(logdir), "--retention-bytes", "0"],
    "recover": lambda logdir: ["recover", str(logdir)],
    "recover-dry-run": lambda logdir: ["recover", str(logdir), "--dry-run"],
    "reindex": lambda logdir: ["reindex", str(logdir / "t-0")],
    "reindex-linked-dir": lambda logdir: ["reindex", str(logdir / "evil-0")],
    "checkpoints-set": lambda logdir: ["checkpoints", "set", str(logdir / "recovery-point-offset-checkpoint"),
                                       "t-0", "3"],
}


@pytest.mark.parametrize("link", list(LINKS))
def test_writing_commands_never_write_through_a_link(dirs: tuple[Path, Path], link: str) -> None:
    logdir, outside = dirs
    LINKS[link](logdir, outside)
    before = _tree(outside)
    refused = []
    for name, args in WRITING_COMMANDS.items():
        if name.endswith("linked-dir") and not (logdir / "evil-0").is_symlink():
            continue
        result = _invoke(args(logdir), '{"value": "x"}\n')
        assert _tree(outside) == before, f"{name} wrote outside the log dir through the {link} link"
        assert result.exit_code in (0, 1), (name, result.output)
        if result.exit_code == 1:
            refused.append(name)
            assert "symbolic link" in result.output or "no such partition" in result.output, (name, result.output)
        REPORT.add("cli-link")
    # Every command that would write into the dir refuses it while the link is there.
    assert refused, link


def test_serve_refuses_a_dir_holding_a_link_out(dirs: tuple[Path, Path]) -> None:
    logdir, outside = dirs
    LINKS["log-file"](logdir, outside)
    before = _tree(outside)
    child = subprocess.Popen(
        [sys.executable, "-c", "from cli.main import main; main()", "serve", str(logdir)],
        cwd=REPO,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = child.communicate(timeout=FAILURE_DEADLINE_S)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=FAILURE_DEADLINE_S)
        pytest.fail("serve started on a dir holding a link out of it")
    assert child.returncode == 1, stderr
    assert "symbolic link" in stderr
    assert _tree(outside) == before
    REPORT.add("cli-link")


def test_a_link_pointing_inside_the_dir_is_refused_too(dirs: tuple[Path, Path]) -> None:
    # Kafka never creates links in a log dir: the commands do not try to tell a harmless one from a harmful one.
    logdir, _ = dirs
    (logdir / "t-0" / "extra.log").symlink_to(logdir / "t-0" / f"{FIRST}.log")
    result = _invoke(["flush", str(logdir)])
    assert result.exit_code == 1 and "symbolic link" in result.output
    REPORT.add("cli-link")


def test_read_does_not_follow_a_linked_partition_dir(dirs: tuple[Path, Path]) -> None:
    logdir, outside = dirs
    LINKS["partition-dir"](logdir, outside)
    result = _invoke(["read", str(logdir), "evil-0"])
    assert result.exit_code == 1
    assert "symbolic link" in result.output
    info = _invoke(["info", str(logdir), "--json"])
    assert info.exit_code == 0 and "evil" not in info.output
    REPORT.add("cli-link")


def test_read_refuses_a_log_file_link(dirs: tuple[Path, Path]) -> None:
    """Segment files are opened with O_NOFOLLOW: a linked ``.log`` is an error (exit 1, one line), not data."""
    logdir, outside = dirs
    LINKS["log-file"](logdir, outside)
    result = _invoke(["read", str(logdir), "t-0"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    REPORT.add("cli-link")


def test_log_manager_does_not_create_a_log_through_a_linked_partition_dir(dirs: tuple[Path, Path]) -> None:
    logdir, outside = dirs
    LINKS["partition-dir"](logdir, outside)
    before = _tree(outside)
    with LogManager(_broker(logdir)) as manager:
        assert manager.get_log(TopicPartition("evil", 0)) is None
        with contextlib.suppress(StorageFormatError, OSError, ValueError):
            manager.get_or_create_log("evil", 0).append_records([SimpleRecord(b"x")])
    assert _tree(outside) == before


def test_a_partition_dir_name_longer_than_255_bytes_fails_cleanly(dirs: tuple[Path, Path]) -> None:
    # A legal topic (249 characters) and partition (10 digits) make a 260-byte name: no file system takes it. Not a
    # regression: the code before these tests already refused it cleanly.
    logdir, _ = dirs
    before = _tree(logdir)
    text = "x" * MAX_TOPIC_LENGTH + "-2147483647"
    result = _invoke(["append", str(logdir), text, "--create"], '{"value": "x"}\n')
    assert result.exit_code == 1 and "File name too long" in result.output
    assert _invoke(["read", str(logdir), text]).exit_code == 1
    after = _tree(logdir)
    assert {k: v for k, v in after.items() if k != ".lock"} == {k: v for k, v in before.items() if k != ".lock"}
    REPORT.add("name")


# --- regressions (one per bug found by these tests) -------------------------------------------------------------


def test_lock_file_link_is_not_followed(tmp_path: Path) -> None:
    # LogDirLock opened ".lock" with O_CREAT through a dangling link: it created the file the link named.
    from logmgr.dir_lock import LogDirLock, is_locked_by_another_process

    logdir, target = tmp_path / "logdir", tmp_path / "elsewhere" / "created"
    logdir.mkdir()
    target.parent.mkdir()
    (logdir / ".lock").symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"):
        LogDirLock(logdir)
    with pytest.raises(OSError, match="symbolic link"):
        is_locked_by_another_process(logdir)
    assert not target.exists()


def test_append_to_a_linked_partition_dir_is_refused(dirs: tuple[Path, Path]) -> None:
    # append found "evil-0" a directory (through the link) and appended to the log it points to.
    logdir, outside = dirs
    LINKS["partition-dir"](logdir, outside)
    before = _tree(outside)
    result = _invoke(["append", str(logdir), "evil-0"], '{"value": "x"}\n')
    assert result.exit_code == 1 and "symbolic link" in result.output
    assert _tree(outside) == before


def test_append_does_not_write_a_checkpoint_through_a_tmp_link(dirs: tuple[Path, Path]) -> None:
    # The recovery-point checkpoint is written to "<name>.tmp" then renamed: the open followed a link at the
    # ".tmp" name and created the file it named (checkpoints/atomic.py opens without O_NOFOLLOW, as Kafka does).
    logdir, outside = dirs
    LINKS["dangling-tmp"](logdir, outside)
    result = _invoke(["append", str(logdir), "t-0"], '{"value": "x"}\n')
    assert result.exit_code == 1 and "symbolic link" in result.output
    assert not (outside / "created-through-tmp").exists()


def test_read_of_a_path_shaped_topic_partition_is_refused(dirs: tuple[Path, Path]) -> None:
    # "read LOGDIR ../outside/victim-0" parsed as topic "../outside/victim" and printed the records out there.
    logdir, _ = dirs
    result = _invoke(["read", str(logdir), "../outside/victim-0"])
    assert result.exit_code == 1 and "not a valid TOPIC-P" in result.output
    assert '"value"' not in result.output


def test_checkpoints_set_refuses_a_topic_kafka_would_refuse(dirs: tuple[Path, Path]) -> None:
    # checkpoints set wrote any text before the last "-" as a topic, e.g. "../x", "." or "é".
    logdir, _ = dirs
    checkpoint = logdir / "recovery-point-offset-checkpoint"
    before = checkpoint.read_bytes()
    for text in ("../x-0", ".-0", "é-0"):
        assert _invoke(["checkpoints", "set", str(checkpoint), text, "1", "--force"]).exit_code == 1
    assert checkpoint.read_bytes() == before


def test_log_manager_recovery_does_not_truncate_a_linked_log_file(dirs: tuple[Path, Path]) -> None:
    logdir, outside = dirs
    victim = outside / f"victim-{FIRST}.log"
    with victim.open("ab") as out:
        out.write(b"\x00" * 100)  # a torn tail recovery would cut
    LINKS["log-file"](logdir, outside)
    (logdir / ".kafka_cleanshutdown").unlink()
    (logdir / "recovery-point-offset-checkpoint").unlink()
    before = _tree(outside)
    with contextlib.suppress(StorageFormatError, OSError, LogmgrError), LogManager(_broker(logdir)):
        pass
    assert _tree(outside) == before


def test_log_manager_checkpoint_write_does_not_follow_a_tmp_link(dirs: tuple[Path, Path]) -> None:
    # The link is planted once the manager runs: one there at startup is removed by the startup sweep of
    # temporaries, which would pass this test even if the checkpoint write followed links.
    logdir, outside = dirs
    with contextlib.suppress(OSError), LogManager(_broker(logdir)) as manager:
        LINKS["dangling-tmp"](logdir, outside)
        manager.checkpoint_recovery_points()
    assert not (outside / "created-through-tmp").exists()
