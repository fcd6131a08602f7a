"""Coverage-guided soak of every parser of the format layer and of the configuration, with atheris (libFuzzer).

The parsers and their allowed errors are those of ``tests/faults/test_hostile_input.py``: :func:`dispatch` lets
the first input byte pick the target (record batches, legacy messages, record regions, the native record kernels
(streamed reader, slicer, framer and Arrow column decoder, which must agree), the native append scan, ``.log``
walks, the compiled header-only searches, segment recovery and record-timestamp search, the four codecs, the
three indexes, every checkpoint and metadata file, producer snapshots, partition dir and file names,
``server.properties`` and topic config files). Anything but a documented typed error, a hang past ``-timeout``
seconds or memory past ``-rss_limit_mb`` is a crash; libFuzzer writes the input to ``crash-<sha1>`` in the current
directory. Not collected by pytest (the file name does not start with ``test_``); atheris is not a dependency of
the project.

Run from the repository root::

    .venv/bin/pip install atheris
    .venv/bin/python tests/faults/fuzz_atheris.py -atheris_runs=200000 -timeout=2 -rss_limit_mb=1024

Without a corpus argument the run starts from a fresh temporary corpus seeded with valid inputs of every target
(the builders the mutation tests use), so the fuzzer begins past the CRCs and magic numbers. Add a directory
argument to keep (and grow) a corpus between runs (it is seeded the same way when empty), ``-max_total_time=120``
to bound the run by time, ``-max_len=8192`` for larger inputs. Replay a crash with ``.venv/bin/python
tests/faults/fuzz_atheris.py crash-<sha1>``. Scratch files (and the temporary corpus) live in a
``logmgr-atheris-*`` directory under the temporary dir, left in place when libFuzzer exits.
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

SEEDS_PER_TARGET = 8


def seed_corpus(corpus: Path) -> None:
    """Write ``SEEDS_PER_TARGET`` valid inputs of every target into ``corpus``, each prefixed with the byte
    :func:`dispatch` maps to its target. O(targets)."""
    from tests.faults.test_hostile_input import TARGETS

    rng = random.Random(0)
    corpus.mkdir(parents=True, exist_ok=True)
    for index, target in enumerate(TARGETS):
        for n in range(SEEDS_PER_TARGET):
            (corpus / f"seed-{target.name}-{n}").write_bytes(bytes([index]) + target.valid(rng))


def main(argv: list[str]) -> None:
    """Instrument the parsers, seed the corpus, then hand ``argv`` to libFuzzer. Runs until libFuzzer stops."""
    # Not a dependency of the project: installed by hand for soak runs, and it ships no type stubs.
    import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with atheris.instrument_imports(include=["segments", "checkpoints", "logmgr", "tests"]):
        from tests.faults.test_hostile_input import dispatch

    scratch = Path(tempfile.mkdtemp(prefix="logmgr-atheris-"))
    positional = [arg for arg in argv[1:] if not arg.startswith("-")]
    if not positional:
        argv = [*argv, str(scratch / "corpus")]
        seed_corpus(scratch / "corpus")
    elif Path(positional[0]).is_dir() and not any(Path(positional[0]).iterdir()):
        seed_corpus(Path(positional[0]))

    def one_input(data: bytes) -> None:
        dispatch(data, scratch)

    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
