"""An index opened on first use (Kafka's ``LazyIndex``).

A broker with many thousands of segments must not map every index at startup: most inactive segments are never
read. Python's ``mmap`` also keeps a duplicate descriptor per mapping, so eager opening would cost three file
descriptors per segment. A :class:`LazyIndex` holds only the path until :meth:`get` is called; renames and
deletion work on the path while the index is unopened.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from segments._native.append import LazyIndexState
from segments.abstract_index import AbstractIndex

IndexT = TypeVar("IndexT", bound=AbstractIndex[Any])


class LazyIndex(LazyIndexState, Generic[IndexT]):
    """An offset or time index that is opened by ``opener(path)`` the first time it is needed. Its state is kept in
    C fields (:class:`~segments._native.append.LazyIndexState`), which the compiled append reads."""

    _index: IndexT | None
    _path: Path
    _opener: Callable[[Path], IndexT]
    _resize_to: int | None
    _lock: threading.Lock

    def __init__(self, path: Path, opener: Callable[[Path], IndexT]) -> None:
        self._path = path
        self._opener = opener
        # _index: None until opened (a typed C field, set by _set_index).
        # The length to resize the index to once it is opened (resize_when_opened), None when there is none.
        self._resize_to = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, index: IndexT) -> LazyIndex[IndexT]:
        """Wrap an index that is already open. O(1)."""
        kind = type(index)
        lazy: LazyIndex[IndexT] = cls(
            index.path, lambda path: kind(path, index.base_offset, index.max_index_size, index.writable)
        )
        lazy._set_index(index)
        return lazy

    @property
    def path(self) -> Path:
        """The index file's current path, opened or not. O(1)."""
        index = self._index
        return index.path if index is not None else self._path

    @property
    def is_loaded(self) -> bool:
        """Whether the index has been opened. O(1)."""
        return self._index is not None

    @property
    def is_open(self) -> bool:
        """Whether the index is opened and mapped now (not closed or discarded since). O(1)."""
        index = self._index
        return index is not None and not index.closed

    def get(self) -> IndexT:
        """The index, opened now if needed (thread-safe). O(1) after the first call."""
        index = self._index
        if index is None:
            with self._lock:
                index = self._index
                if index is None:
                    index = self._opener(self._path)
                    if self._resize_to is not None:
                        try:
                            index.resize(self._resize_to)
                        except BaseException:
                            # Left unopened: the next use opens and resizes again (and meets the same error).
                            index.close()
                            raise
                        self._resize_to = None
                    self._set_index(index)
        return index

    def resize_when_opened(self, size: int) -> None:
        """Resize the index to ``size`` now if it is opened, else right after it is first opened: Kafka's
        ``resizeIndexes`` of the active segment after a load, whose index is mapped on first use (a clean load maps
        none). A failed resize (a disk too full for the growth) raises from that use, naming the file. O(1)."""
        with self._lock:
            if self._index is not None:
                self._index.resize(size)
            else:
                self._resize_to = size

    def rename_to(self, path: Path) -> None:
        """Rename the file (if it exists) and follow it. O(1)."""
        with self._lock:
            if self._index is not None:
                self._index.rename_to(path)
            elif self._path.exists():
                os.replace(self._path, path)
            self._path = path

    def close(self) -> None:
        """Close (trimming, when writable) an opened index; nothing to do otherwise. O(1)."""
        with self._lock:
            if self._index is not None:
                self._index.close()

    def unload(self) -> None:
        """Close an opened index (trimming it when writable) and return to the unopened state; the next
        :meth:`get` reopens it. Only for indexes no reader can be using (e.g. during a log load). O(1)."""
        with self._lock:
            if self._index is not None:
                self._path = self._index.path
                self._index.close()
                self._set_index(None)

    def discard(self) -> None:
        """Unmap an opened index without trimming and remove its file, if present. O(1)."""
        with self._lock:
            if self._index is not None:
                self._index.delete()
            else:
                self._path.unlink(missing_ok=True)
