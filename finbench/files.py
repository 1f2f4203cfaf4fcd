"""Writing a file so that a reader sees the old one or the new one, never half of either.

Shared by every layer that writes (corpus files, tables, figures): a unique
temporary name per writer in the target's folder, then an atomic rename.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `path`; on a clean exit it replaces `path` at once, else it is removed.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
        >>> with atomic_path(target) as tmp:
        ...     _ = tmp.write_text("whole")
        >>> target.read_text()
        'whole'
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write `data` (text as UTF-8) to `path` atomically (see `atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path)
