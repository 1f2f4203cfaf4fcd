"""Transcripts of `finbench.agents.llm.ModelAgent` on disk: where they live, reading them back, one writer each.

- `model_dir_name`, `transcript_path`: `<root>/<model folder>/<task>__seed<seed>__<prompt hash>.jsonl`,
  the model folder a readable slug plus a hash of the exact name (injective).
- `load_transcript`: a transcript's header and request/response pairs with their byte offsets,
  or `Unreplayable` naming what is wrong; `set_aside` renames such a file to
  `<name>.unreplayable-<n>.jsonl` with a `TranscriptWarning` naming it.
- `TranscriptLock`: `<transcript>.lock`, an `flock` holding the writer's pid (shared for readers);
  the kernel drops it when its holder dies, so a stale lock file is taken over.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
from pathlib import Path

from finbench.errors import warn_caller

try:  # POSIX: a kernel lock, released when its holder dies
    import fcntl
except ImportError:  # pragma: no cover - elsewhere: O_EXCL with the holder's pid
    fcntl = None

MAX_TRANSCRIPT_BYTES = 512 * 2**20
_TRANSCRIPT_NAME = re.compile(r"__seed-?\d+__[0-9a-f]{12}\.jsonl$")


class TranscriptWarning(UserWarning):
    """A transcript was set aside (it cannot be replayed) or skipped."""


def legacy_dir_name(model: str) -> str:
    """The folder name before it carried a hash (not injective: 'org/m' and 'org_m' shared one)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"


def model_dir_name(model: str) -> str:
    """A model name as a folder name: a readable slug and 10 hex digits of the exact name's hash.

    Injective in practice: `'org/m'` -> `'org_m-…'` and `'org_m'` -> `'org_m-…'` with different hashes.

    >>> model_dir_name("org/m") != model_dir_name("org_m")
    True
    >>> model_dir_name("qwen2.5:7b")
    'qwen2.5_7b-643816e6f5'
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._-")[:60].rstrip("._-") or "model"
    digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{slug}-{digest}"


def transcript_path(root: str | Path, model: str, task_id: str, seed: int, phash: str) -> Path:
    """Where the transcript of (model, task, seed, prompt hash) lives."""
    return Path(root) / model_dir_name(model) / f"{task_id}__seed{seed}__{phash}.jsonl"


def is_transcript(path: str | Path) -> bool:
    """Whether a file name is a transcript's (not a set-aside one, not a lock)."""
    return bool(_TRANSCRIPT_NAME.search(Path(path).name))


def adopt_legacy(path: Path, model: str) -> None:
    """A transcript of `model` in the folder named before folder names carried a hash: moved to `path`."""
    old = path.parent.parent / legacy_dir_name(model) / path.name
    if old.parent == path.parent or header_model(old) != model:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old, path)
    except OSError:
        pass


def read_transcript(path: str | Path) -> list:
    """The records of a transcript as JSON values; a torn last line (a run killed mid-write) is dropped.

    What a record is not checked here (see `ModelAgent`, which sets aside a transcript it cannot replay)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except (ValueError, RecursionError):
                break
    return out


def header_model(path: str | Path) -> str | None:
    """The model a transcript's header names; None when the first line is not such a header."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            line = f.readline(4 * 2**20)
        rec = json.loads(line)
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(rec, dict) and rec.get("kind") == "header" and isinstance(rec.get("model"), str) and rec["model"]:
        return rec["model"]
    return None


# --- one writer per transcript ----------------------------------------------------------------

def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


class TranscriptLock:
    """`<transcript>.lock`: an `flock` (shared for replay-only readers, exclusive for writers) on a file
    holding the holder's pid; unlinked by the last holder. A lock of a dead process is free (the
    kernel dropped it), so a stale lock file is simply taken over."""

    def __init__(self, transcript: Path, key, shared: bool):
        self.path = transcript.with_name(transcript.name + ".lock")
        self.key, self.shared, self.fd = key, shared, None

    def acquire(self, wait: bool) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover
            return self._acquire_excl(wait)
        mode = fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:  # held by another process (any other OSError: no locks here, raised)
                os.close(fd)
                if not wait:
                    return False
                time.sleep(0.05)
                continue
            try:  # the last holder may have unlinked the file between our open and our lock
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            if not self.shared:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            self.fd = fd
            return True

    def _acquire_excl(self, wait: bool) -> bool:  # pragma: no cover - platforms without fcntl
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text().strip() or 0)
                except (OSError, ValueError):
                    pid = -1
                if pid > 0 and os.name == "posix" and not _pid_alive(pid):
                    try:
                        os.unlink(self.path)
                    except FileNotFoundError:
                        pass
                    continue
                if not wait:
                    return False
                time.sleep(0.05)
                continue
            os.write(fd, f"{os.getpid()}\n".encode())
            self.fd = fd
            return True

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is None:
            return
        try:
            if fcntl is None:  # pragma: no cover
                os.unlink(self.path)
            else:
                try:  # unlink only as the last holder (an exclusive lock): never under another's feet
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    os.unlink(self.path)
                except OSError:
                    pass
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


class Unreplayable(Exception):
    pass


class Transcript:
    """A transcript read back: its header, its request/response pairs (sha, response record, byte
    offset of the request), the byte offset after the last whole pair, whether it ended."""

    def __init__(self, header, pairs, end_offset, finished):
        self.header, self.pairs, self.end_offset, self.finished = header, pairs, end_offset, finished


def load_transcript(path: Path, model: str) -> Transcript | None:
    """The transcript at `path` (None: absent, or nothing whole written yet); `Unreplayable` naming
    what is wrong. A torn last line and a last request without its response are dropped."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise Unreplayable("a link to nothing") from None
        return None
    except OSError as e:
        raise Unreplayable(f"cannot be read ({e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise Unreplayable("not a regular file")
    if st.st_size > MAX_TRANSCRIPT_BYTES:
        raise Unreplayable(f"{st.st_size} bytes, over {MAX_TRANSCRIPT_BYTES}")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TRANSCRIPT_BYTES + 1)
    except OSError as e:
        raise Unreplayable(f"cannot be read ({e})") from None
    recs, pos, n = [], 0, 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # what follows the last newline is a torn write: dropped
        n += 1
        raw, start, pos = data[pos:nl], pos, nl + 1
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError):
            raise Unreplayable(f"line {n} is not JSON") from None
        if not isinstance(rec, dict):
            raise Unreplayable(f"line {n} is a JSON {type(rec).__name__}, not a record")
        recs.append((n, start, pos, rec))
    if not recs:
        return None
    n, _, end_offset, header = recs[0]
    if header.get("kind") != "header":
        raise Unreplayable(f"line {n} is not a header")
    if not isinstance(header.get("model"), str) or not header["model"]:
        raise Unreplayable("the header names no model")
    if header["model"] != model:
        raise Unreplayable(f"the header names model {repr(header['model'])[:80]}, not {model!r}")
    pairs, finished, i = [], False, 1
    while i < len(recs):
        n, start, _, rec = recs[i]
        kind = rec.get("kind")
        if kind == "end":
            if i != len(recs) - 1:
                raise Unreplayable(f"line {n}: records after the end record")
            finished = True
            break
        turn = rec.get("turn")
        if kind != "request" or type(turn) is not int or turn != len(pairs) or not isinstance(rec.get("sha"), str):
            raise Unreplayable(f"line {n}: not the request of turn {len(pairs)} (kind {repr(kind)[:40]}, "
                                f"turn {repr(turn)[:40]})")
        if i + 1 == len(recs):
            break  # the run stopped while asking: that request is asked again
        n2, _, end2, resp = recs[i + 1]
        t2 = resp.get("turn")
        if (resp.get("kind") != "response" or type(t2) is not int or t2 != turn
                or not ("body" in resp or any(isinstance(resp.get(k), str) for k in ("invalid", "ended")))):
            raise Unreplayable(f"line {n2}: not the response of turn {turn}")
        pairs.append((rec["sha"], resp, start))
        end_offset = end2
        i += 2
    return Transcript(header, pairs, end_offset, finished)


def set_aside(path: Path, why: str) -> Path | None:
    """Rename an unreplayable transcript to `<name>.unreplayable-<n>.jsonl` and warn, naming both."""
    n = 1
    while True:
        target = path.with_name(f"{path.name[:-len('.jsonl')]}.unreplayable-{n}.jsonl")
        if not os.path.lexists(target):
            break
        n += 1
    try:
        os.rename(path, target)
    except FileNotFoundError:  # another reader set it aside first
        return None
    warn_caller(f"transcript {path} cannot be replayed ({why}); set aside as {target.name}, and the episode "
                "is played afresh", TranscriptWarning)
    return target
