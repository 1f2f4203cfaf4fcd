"""The episode cache: one JSON file per (chunk of tasks, policy), checked on every load.

Why JSON and not a pickle: a pickle runs code when it is read, so a planted
file would run on the next `evaluate` and on every `make reproduce` after it.
A JSON file holds data only: column name -> list of values, floats written
with `repr` so they read back bit-for-bit.

A file is two lines: a JSON header, then the columns as JSON; the header's
SHA-256 is of the second line's bytes. A file is trusted only if everything it
says matches what was asked: the
cache key (which covers the engine version, a digest of the package's own
source, the corpus, the chunk's task ids, the policy's cache identity, seeds,
profile and costs), the policy label, the task ids, the seeds, the row count
and a SHA-256 of its columns. Anything else is recomputed and rewritten; the
runner says so once per evaluation.

An entry is opened only if it is a regular file (not a symbolic link, a FIFO,
a device, a socket or a directory) no larger than a chunk of its size can be
(`size_bound`), and it is opened without following links and without
blocking, so a planted entry costs a warning and a recomputation, never a hung
or exhausted run.

Files live under one folder per engine version and source digest
(`episodes-e<engine>-<digest>/<policy>/<key>.json`). The first evaluation of a
process that uses a cache folder deletes the folders of every other version
there (and files of the older flat layout): no code can read them again, and
they would otherwise pile up (gigabytes on a development machine). A folder that
cannot be made or written is warned about once and the run goes on uncached.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

from finbench.running.columns import COLUMNS, KINDS
from finbench.errors import warn_caller
from finbench.sim import constants as C
from finbench.files import root
from finbench.memo import memoised, register

CACHE_DIR = root() / "data" / "cache"
FORMAT = "finbench-episodes/2"
_VERSIONED = re.compile(r"^episodes-e[\w.]+-[0-9a-f]{16}$")
_FLAT_FILE = re.compile(r"^\.?[0-9a-f]{32}\.json(\..*\.tmp)?$")


class CacheWarning(UserWarning):
    """Cached chunks that did not match what was asked for (recomputed), or a cache folder that cannot be used."""

MAX_CHUNK_BYTES = 256 * 2 ** 20
"""No cache file is read beyond this, whatever the chunk (a real one is a few hundred KB)."""
_ROW_BYTES = 8192  # a row is ~550 bytes of JSON; the budget is generous, the strings a row repeats come on top
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))

# what decides an episode row: the engine, the grader, the agents and the runner of one
# episode; presentation (analysis/, experiments/, the CLI) and the layers above a row
# (Run, re-pricing) cannot change one
_ROW_LAYERS = ("sim", "grading", "agents")
_ROW_MODULES = ("running/evaluation.py", "running/episode.py", "running/cache.py")


def source_digest(pkg: Path | None = None) -> str:
    """SHA-256 (16 hex) over the source that decides an episode row, so edited code never meets old rows.

    Args:
        pkg: the package folder (default: this package).
    """
    return _digest_of(Path(pkg)) if pkg is not None else _own_digest()


@memoised("running.cache.source_digest", keys="nothing: the source this process imported", bound=1)
def _own_digest() -> str:
    return _digest_of(Path(__file__).resolve().parents[1])


def _digest_of(pkg: Path) -> str:
    files = [p for layer in _ROW_LAYERS for p in (pkg / layer).rglob("*") if p.is_file() and p.suffix in (".py", ".txt")]
    files += [pkg / m for m in _ROW_MODULES if (pkg / m).exists()]
    h = hashlib.sha256()
    for p in sorted(files, key=lambda p: p.relative_to(pkg).as_posix()):
        h.update(p.relative_to(pkg).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def chunk_key(fingerprint: str, task_ids, cache_id: str, seeds, profile, costs, probe=None) -> str:
    """The file name of one (chunk, policy): everything that decides its rows.

    The probe mode enters the key only when it is not the default (`full`), so
    the keys of every run before probe modes existed are unchanged."""
    parts = [FORMAT, C.ENGINE_VERSION, source_digest(), fingerprint, list(task_ids), cache_id,
             list(seeds), profile.key(), costs.key()]
    if probe is not None and not probe.is_full:
        parts.append(["probe", *probe.key()])
    blob = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def version_folder() -> str:
    """The folder of this engine version and source digest inside a cache folder."""
    return f"episodes-e{C.ENGINE_VERSION}-{source_digest()}"


def chunk_path(cache_dir: Path, label: str, key: str) -> Path:
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label)[:60] or "policy"
    return Path(cache_dir) / version_folder() / slug / f"{key}.json"


_PRUNED_SIZE = 1024
_PRUNED: set = register("running.cache.pruned", set(), keys="a cache folder's resolved path: pruned once per process",
                        bound=_PRUNED_SIZE)


def usable(cache_dir: Path) -> Path | None:
    """`cache_dir` if this version's folder can be made and written there (pruning the other versions'
    folders the first time), else None with one `CacheWarning`: the run goes on uncached."""
    here = Path(cache_dir) / version_folder()
    try:
        here.mkdir(parents=True, exist_ok=True)
        if not os.access(here, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as e:
        warn_caller(f"the episode cache folder {cache_dir} cannot be used ({e.strerror or e}); "
                    "the run goes on uncached", CacheWarning)
        return None
    if first_time(_PRUNED, _PRUNED_SIZE, cache_dir):
        prune(Path(cache_dir))
    return Path(cache_dir)


def first_time(seen: set, bound: int, folder) -> bool:
    """Whether this process meets `folder` (by its resolved path) for the first time in `seen`, a registered
    memo emptied when it holds `bound` paths; notes it as met."""
    where = os.path.realpath(folder)
    if where in seen:
        return False
    if len(seen) >= bound:
        seen.clear()
    seen.add(where)
    return True


def prune(cache_dir: Path) -> int:
    """Delete what no code of this version can read in `cache_dir`: other versions' folders, and cache
    files of the older flat layout (`<policy>/<key>.json`). Returns how many entries went; nothing
    else in the folder is touched."""
    gone, keep = 0, version_folder()
    try:
        entries = list(os.scandir(cache_dir))
    except OSError:
        return 0
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        if _VERSIONED.match(entry.name):
            if entry.name != keep:
                shutil.rmtree(entry.path, ignore_errors=True)
                gone += 1
            continue
        gone += _prune_flat(Path(entry.path))
    return gone


def _prune_flat(folder: Path) -> int:
    """Cache files of the flat layout in one policy folder (named like a key, starting with a cache header)."""
    gone = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if entry.is_file(follow_symlinks=False) and _FLAT_FILE.match(entry.name):
            if _head(entry.path).startswith(b'{"format": "finbench-episodes/'):
                Path(entry.path).unlink(missing_ok=True)
                gone += 1
    try:
        folder.rmdir()  # only if nothing else is left in it
    except OSError:
        pass
    return gone


def _head(path: str) -> bytes:
    """The first bytes of a regular file (never following a link, never blocking), else b""."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return b""
    try:
        return os.read(fd, 64) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def try_save(path: Path, key: str, label: str, task_ids, seeds, columns: dict) -> bool:
    """`save_chunk`, but a disk that is full or a folder that cannot be written costs one `CacheWarning`
    and False (write no more this run), never the rows already played."""
    try:
        save_chunk(path, key, label, task_ids, seeds, columns)
    except OSError as e:
        warn_caller(f"could not write the episode cache ({e.strerror or e}: {path.parent}); the run goes on "
                    "without writing it", CacheWarning)
        return False
    return True


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def save_chunk(path: Path, key: str, label: str, task_ids, seeds, columns: dict) -> None:
    """Two lines: a header (what the file is for, with the SHA-256 of the second line) and
    the columns. Written atomically: a unique temporary file per writer (created exclusively,
    so nothing planted at its name is opened), then rename, which replaces whatever entry was
    at `path` (a link, a FIFO, a stale file) except a directory: that one is left, unwritten,
    and the next load says so again."""
    body = json.dumps(columns, separators=(",", ":"), allow_nan=True).encode()
    n = len(next(iter(columns.values()))) if columns else 0
    head = {"format": FORMAT, "key": key, "label": label, "task_ids": list(task_ids), "seeds": list(seeds),
            "rows": n, "sha256": _digest(body)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_unique(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(json.dumps(head).encode() + b"\n" + body)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink()  # made by this call, not yet replaced
        if _entry_kind(path) == "a directory":
            return
        raise
    except BaseException:
        Path(tmp).unlink()
        raise


def _create_unique(path: Path) -> tuple[int, Path]:
    """A new temporary file beside `path`, created exclusively (never an existing entry, never through a
    link) with the permissions the umask gives an ordinary file (mkstemp's are owner-only)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def size_bound(label: str, task_ids, seeds) -> int:
    """The most bytes a cache file of this chunk can hold (capped at `MAX_CHUNK_BYTES`): a
    generous budget per row, plus the strings each row repeats, plus the header."""
    task_ids, seeds = list(task_ids), list(seeds)
    longest = max((len(json.dumps(t)) for t in task_ids), default=2)
    per_row = _ROW_BYTES + 4 * (len(json.dumps(label)) + longest)
    head = 2 ** 20 + 2 * len(json.dumps(task_ids)) + 2 * len(json.dumps(seeds))
    return min(MAX_CHUNK_BYTES, head + len(task_ids) * len(seeds) * per_row)


def _entry_kind(path: Path) -> str | None:
    """What the entry at `path` is if not a regular file ("a FIFO", ...), else None (also if absent)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return next((name for test, name in _KINDS if test(mode)), None)  # _KINDS names every kind but a regular file


def _read_regular(path: Path, limit: int) -> tuple[bytes | None, str | None]:
    """(the bytes, None) of a regular file of at most `limit` bytes; (None, None) if there is
    no entry; else (None, why not). Never follows a link, never blocks on a FIFO or a device,
    never reads more than `limit` + 1 bytes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"unreadable ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return None, f"not a regular file: {_entry_kind(path) or 'unknown'}"
    if st.st_size > limit:
        return None, f"{st.st_size} bytes, more than a chunk of this size can hold ({limit})"
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None, None  # removed since the lstat
    except OSError as e:  # e.g. ELOOP: replaced by a link since the lstat
        return None, f"unreadable ({e.strerror})"
    try:
        st = os.fstat(fd)  # what was opened, not what the name pointed at a moment ago
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file (replaced while being opened)"
        parts, left = [], limit + 1
        while left > 0:
            part = os.read(fd, min(left, 1 << 20))
            if not part:
                break
            parts.append(part)
            left -= len(part)
    except OSError as e:
        return None, f"unreadable ({e.strerror})"
    finally:
        os.close(fd)
    raw = b"".join(parts)
    if len(raw) > limit:
        return None, f"more than a chunk of this size can hold ({limit} bytes)"
    return raw, None


def load_chunk(path: Path, key: str, label: str, task_ids, seeds) -> tuple[dict | None, str | None]:
    """(columns, None) if the file is what was asked for, (None, None) if there is none,
    else (None, why not): an entry that is not a regular file or is too large is not opened."""
    raw, why = _read_regular(Path(path), size_bound(label, task_ids, seeds))
    if raw is None:
        return None, why
    try:
        first, sep, body = raw.partition(b"\n")
        head = json.loads(first) if sep else None
    except (ValueError, RecursionError) as e:
        return None, f"unreadable ({type(e).__name__})"
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        return None, "not an episode cache file"
    if head.get("label") != label:
        return None, f"written for policy {head.get('label')!r}"
    if head.get("key") != key:
        return None, "written for another request (key differs)"
    if head.get("task_ids") != list(task_ids) or head.get("seeds") != list(seeds):
        return None, "task ids or seeds differ"
    if _digest(body) != head.get("sha256"):  # checked on the bytes, before parsing them
        return None, "content does not match its digest"
    try:
        cols = json.loads(body)
    except (ValueError, RecursionError) as e:
        return None, f"columns unreadable ({type(e).__name__})"
    if not isinstance(cols, dict) or not cols or not all(isinstance(v, list) for v in cols.values()):
        return None, "columns malformed"
    n = len(task_ids) * len(seeds)
    if head.get("rows") != n or any(len(v) != n for v in cols.values()):
        return None, f"holds {head.get('rows')} rows, expected {n}"
    if set(cols.get("policy", ())) != {label}:
        return None, "rows of another policy"
    if sorted(set(cols.get("task_id", ()))) != sorted(task_ids) or set(cols.get("seed", ())) != set(seeds):
        return None, "rows for other tasks or seeds"
    if any(isinstance(x, float) and math.isnan(x) for x in cols.get("gap", ())):
        return None, "NaN gaps"
    if list(cols) != list(COLUMNS):  # checked after the digest: a file whose digest was made anew
        return None, "columns other than this version's, or in another order"
    if cols["task_id"] != [t for t in task_ids for _ in seeds] or cols["seed"] != list(seeds) * len(task_ids):
        return None, "rows out of (task, seed) order"
    wrong = next((c for c in COLUMNS if any(type(v) not in KINDS[c] for v in cols[c])), None)
    if wrong is not None:
        return None, f"values of the wrong type in column {wrong!r}"
    return cols, None
