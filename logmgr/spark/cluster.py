"""A Spark standalone cluster on this machine, started from PySpark's own distribution, for tests and benchmarks
that must prove the ``kafka-log`` source beyond one JVM.

:class:`StandaloneCluster` starts a master and ``workers`` workers as separate processes
(``spark-class org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker``), every one bound to
127.0.0.1 (RPC and web UI: Spark's ``WebUI`` binds to ``SPARK_LOCAL_IP``), logs and work dirs under a dir of
the caller's, and stops them all (their process groups) on exit. Executors run in the workers' JVMs and start
Python workers on this interpreter, so they decode with the same installed logmgr, compiled core included.

Needs Java (``java`` on ``PATH`` or ``JAVA_HOME``) and the ``spark`` extra; :func:`java_available` says whether
a cluster can start here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from logmgr.errors import LogmgrError

_REGISTERED = re.compile(r"Successfully registered with master")
# A worker that has not registered by then never will (a port taken, no memory, Java failing to start).
START_DEADLINE_S = 120.0


class ClusterError(LogmgrError):
    """A cluster process failed to start or died; the message quotes the end of its log."""


def java_available() -> bool:
    """Whether a JVM can be started (``JAVA_HOME/bin/java`` or ``java`` on ``PATH``). O(1)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return True
    return shutil.which("java") is not None


def spark_home() -> Path:
    """PySpark's distribution dir (holds ``bin/spark-class`` and ``jars/``). O(1)."""
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it; Spark binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers of ``cores_per_worker`` cores and ``memory_per_worker`` memory each.

    Use as a context manager; :attr:`master_url` is what ``SparkSession.builder.master`` (or
    ``logmgr export --master``) takes. Starting costs a few JVM starts (seconds); O(workers) processes.
    """

    base_dir: Path
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    master_url: str = ""
    _processes: list[_Process] = field(default_factory=list)

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["SPARK_LOG_DIR"] = str(self.base_dir / "logs")
        # Executors launch Python workers with the driver's interpreter; the processes here need it for nothing
        # else, but a worker started from another venv's shell must not pick a different Python.
        env["PYSPARK_PYTHON"] = sys.executable
        return env

    def _spawn(self, name: str, arguments: list[str]) -> _Process:
        log = self.base_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as sink:
            popen = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *arguments],
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._environment(),
                # Its own process group: spark-class execs java, and stop() must reach every child it made.
                start_new_session=True,
            )
        process = _Process(name, popen, log)
        self._processes.append(process)
        return process

    def start(self) -> None:
        """Start the master, then the workers, and wait until every worker has registered. O(JVM starts).

        Raises :class:`ClusterError` (with the failing process's log tail) if one exits or does not register
        within :data:`START_DEADLINE_S`; whatever was started is stopped first."""
        if not java_available():
            raise ClusterError("no Java runtime found (set JAVA_HOME or put java on PATH)")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            master_port = _free_port()
            master = self._spawn(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(master_port),
                    "--webui-port",
                    str(_free_port()),
                ],
            )
            self.master_url = f"spark://127.0.0.1:{master_port}"
            self._wait_for(master, re.compile(r"I have been elected leader|Starting Spark master"))
            for index in range(self.workers):
                work_dir = self.base_dir / f"worker-{index}"
                work_dir.mkdir(exist_ok=True)
                worker = self._spawn(
                    f"worker-{index}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(_free_port()),
                        "--webui-port",
                        str(_free_port()),
                        "--cores",
                        str(self.cores_per_worker),
                        "--memory",
                        self.memory_per_worker,
                        "--work-dir",
                        str(work_dir),
                        self.master_url,
                    ],
                )
                self._wait_for(worker, _REGISTERED)
        except BaseException:
            self.stop()
            raise

    def _wait_for(self, process: _Process, pattern: re.Pattern[str]) -> None:
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise ClusterError(
                    f"Spark {process.name} exited with code {process.popen.returncode}:\n{process.tail()}"
                )
            try:
                if pattern.search(process.log.read_text(errors="replace")):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise ClusterError(
            f"Spark {process.name} did not start within {START_DEADLINE_S:.0f} s:\n{process.tail()}"
        )

    def stop(self) -> None:
        """Stop every process (SIGTERM to its group, SIGKILL after 30 s), workers first. Idempotent. O(processes)."""
        for process in reversed(self._processes):
            if process.popen.poll() is None:
                try:
                    os.killpg(process.popen.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for process in reversed(self._processes):
            try:
                process.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.popen.pid, signal.SIGKILL)
                process.popen.wait()
        self._processes.clear()
