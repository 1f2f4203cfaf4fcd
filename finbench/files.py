"""Where the package's files go, and writing one so that a reader sees the old one or the new one.

Shared by every layer that writes (corpus files, tables, figures): a unique
temporary name per writer in the target's folder, then an atomic rename, with
the permissions the umask gives a new file (644 under the usual 022).

Every folder the package or a notebook resolves by default (the episode cache,
tables, figures, data, build) is under the repository root (`root`), never the
working directory: a Jupyter kernel starts in `notebooks/`.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT_VARIABLE = "FINBENCH_ROOT"
"""An environment variable naming another root (e.g. to write a run's outputs elsewhere)."""


def root() -> Path:
    """The repository root: `$FINBENCH_ROOT` if set, else the folder that holds the package."""
    named = os.environ.get(ROOT_VARIABLE, "").strip()
    return Path(named).expanduser().resolve() if named else Path(__file__).resolve().parents[1]


def at_root(path: str | os.PathLike) -> Path:
    """`path` if it is absolute, else the same path under `root()` (not the working directory).

    Example:
        >>> at_root("tables") == root() / "tables", at_root("/tmp/x") == Path("/tmp/x")
        (True, True)
    """
    path = Path(path).expanduser()
    return path if path.is_absolute() else root() / path


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it; set straight back
    os.umask(mask)
    return mask


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
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it owner-only; a written file is the umask's
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
