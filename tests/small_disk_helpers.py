"""Real small disks for tests: a tmpfs of a given size mounted for one test, and a forked child to run code that
may fill it (or pass a lowered RLIMIT_FSIZE) without the pytest process paying for what happens there."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHILD_TIMEOUT_S = 60.0


def mounted_tmpfs(tmp_path: Path, size: int | str) -> Iterator[Path]:
    """Mount a fresh tmpfs of ``size`` (bytes, or tmpfs's own notation such as ``2m``) at ``tmp_path/fs``, yield
    it and unmount it afterwards (lazily if busy). Skips the test with the reason where mounting is not allowed
    (root only). Meant as the body of a fixture: ``yield from mounted_tmpfs(tmp_path, ...)``."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


def run_in_child(body: Callable[[], dict[str, Any]], *, ignore_sigxfsz: bool = False) -> dict[str, Any]:
    """Run ``body`` in a forked child and return the facts it returns. ``ignore_sigxfsz``: the child ignores
    SIGXFSZ, so writes past a lowered RLIMIT_FSIZE fail with EFBIG instead of killing it. A child killed by a
    signal (SIGBUS from a sparse mapped page on a full disk), raising, or silent for ``CHILD_TIMEOUT_S`` fails the
    test with what happened. The child exits without any cleanup, so a body that does not shut its manager down
    leaves the dirs as a crash would."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)

    def main() -> None:
        if ignore_sigxfsz:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        try:
            outcome: dict[str, Any] = {"facts": body()}
        except BaseException:
            outcome = {"error": traceback.format_exc()}
        sender.send(outcome)

    child = context.Process(target=main, daemon=True)
    child.start()
    sender.close()
    try:
        if not receiver.poll(CHILD_TIMEOUT_S):
            pytest.fail(f"the child did not answer within {CHILD_TIMEOUT_S} s")
        outcome = receiver.recv()
    except EOFError:
        child.join(CHILD_TIMEOUT_S)
        code = child.exitcode
        name = signal.Signals(-code).name if code is not None and code < 0 else f"exit code {code}"
        pytest.fail(f"the child died without an answer: {name}")
    finally:
        child.join(CHILD_TIMEOUT_S)
        if child.is_alive():
            child.kill()
            child.join()
    if "error" in outcome:
        pytest.fail(f"the child failed:\n{outcome['error']}")
    facts: dict[str, Any] = outcome["facts"]
    return facts
