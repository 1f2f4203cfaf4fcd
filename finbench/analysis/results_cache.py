"""Small results computed from episode rows, kept on disk so that a warm run reads them.

A corpus's tables and claim verdicts in the splits experiment, or an experiment's tables
(`experiment_tables`: the ablation's, the exploit search's), are a function of episode
rows and of the code that analyses them; a warm run would otherwise load every row from
the episode cache and recompute every table and bootstrap. `frames` keeps such a result
(a tuple of DataFrames) under a key made of everything that decides it:

- what the caller names (for the splits: the run's identity, `Run.key()`, which holds
  the corpus fingerprint, seeds, fault profile, costs, each policy's cache key, the
  bootstrap and the probe mode; the split's index; the experiments and their seeds);
- a digest of the whole package's source (every module, not only the engine's: the
  analysis and the experiments decide a table as much as the rows do), of the paper's
  claims file the verdicts are read against, and the versions of numpy, pandas and scipy.

Nothing is kept for a run that caches nothing (`cache=False`) or that holds a policy
without a cache key (a user's policy that declares no `cache_id`): its rows are not
reused, so neither is what was computed from them. Files live under
`<cache folder>/results-<digest>/<namespace>/<key>.json`, beside the episode cache; the
first use in a process deletes the folders of other digests. A file that is unreadable,
altered or not of this format is recomputed and rewritten. A frame is kept only if it
comes back from its file exactly (values, dtypes, columns, index); else it is recomputed
on every run, never served approximately.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Callable

import numpy
import pandas as pd
import scipy

from finbench.errors import warn_caller
from finbench.analysis.verdicts import PAPER_CLAIMS
from finbench.files import atomic_write
from finbench.memo import memoised, register
from finbench.running.cache import CACHE_DIR, CacheWarning, first_time

FORMAT = "finbench-results/1"
_FOLDER = re.compile(r"^results-[0-9a-f]{16}$")
_PRUNED_SIZE = 1024
_PRUNED: set = register("analysis.results_cache.pruned", set(), keys="a cache folder's resolved path: pruned once "
                        "per process", bound=_PRUNED_SIZE)
__all__ = ["FORMAT", "digest_of", "experiment_tables", "frames", "package_digest", "packaged"]


def package_digest() -> str:
    """SHA-256 (16 hex) over the package's source, the paper's claims file and the numeric libraries' versions.

    Read from disk again whenever a module of the package has been (re)loaded since it was last read
    (`importlib.reload`, JupyterLab's autoreload): the results are keyed by the code that makes them now."""
    loaded = [m for name, m in sorted(sys.modules.items()) if name == "finbench" or name.startswith("finbench.")]
    specs = tuple(getattr(m, "__spec__", None) for m in loaded)
    _LOADED_SPECS.append(specs)  # kept alive: the key holds their ids, which no other spec may take
    del _LOADED_SPECS[:-2]
    return _package_digest(tuple(map(id, specs)))


_LOADED_SPECS: list = []


@memoised("analysis.results_cache.package_digest", keys="the ids of the package's loaded module specs (a reload "
          "makes a new one)", bound=4)
def _package_digest(loaded: tuple) -> str:
    return digest_of(Path(__file__).resolve().parents[1], Path(PAPER_CLAIMS))


def digest_of(pkg: Path, claims: Path) -> str:
    """`package_digest` of the package folder `pkg` with the claims file `claims`."""
    h = hashlib.sha256(f"numpy {numpy.__version__} pandas {pd.__version__} scipy {scipy.__version__}\0".encode())
    files = sorted((p for p in pkg.rglob("*") if p.is_file() and p.suffix in (".py", ".txt")),
                   key=lambda p: p.relative_to(pkg).as_posix())
    for p in files:
        h.update(p.relative_to(pkg).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(b"paper_claims\0" + (claims.read_bytes() if claims.is_file() else b"missing") + b"\0")
    return h.hexdigest()[:16]


def packaged(module) -> bool:
    """Whether `module` is a file of this package (its code is in `package_digest`)."""
    pkg = Path(__file__).resolve().parents[1]
    path = getattr(module, "__file__", None)
    return path is not None and Path(path).resolve().is_relative_to(pkg)


def experiment_tables(run, experiment, *params) -> dict[str, pd.DataFrame]:
    """An experiment's tables by stem (`experiment.TABLES`, in that order):
    `experiment.tables(experiment.episodes(run, *params), run)`, or what an earlier call with the same run
    (`run.key()`), experiment and `params` (JSON values: the experiment's own arguments beside the run)
    kept, so a warm run loads none of its rows. Nothing is kept for an experiment module from outside the
    package or a run holding a policy without a cache key.

    Raises:
        ValueError: the experiment's `tables` gives other stems than `experiment.TABLES`.
    """
    names = list(experiment.TABLES)

    def computed() -> tuple[pd.DataFrame, ...]:
        out = experiment.tables(experiment.episodes(run, *params), run)
        if list(out) != names:
            raise ValueError(f"experiment_tables: {experiment.__name__} computed tables {list(out)}, "
                             f"not its TABLES {names}")
        return tuple(out.values())

    cacheable = packaged(experiment) and all(ref.cache_key() is not None for ref in run.policies)
    parts = [run.key(), experiment.__name__, names, list(params)]
    return dict(zip(names, frames(run.cache, "tables", parts, computed, cacheable)))


def _folder(cache) -> Path | None:
    """This digest's folder under the run's cache folder, made and writable; None (one warning) if it cannot be."""
    base = Path(CACHE_DIR if cache is True else cache)
    here = base / f"results-{package_digest()}"
    try:
        here.mkdir(parents=True, exist_ok=True)
        if not os.access(here, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as e:
        warn_caller(f"the results cache folder {base} cannot be used ({e.strerror or e}); computing afresh",
                    CacheWarning)
        return None
    if first_time(_PRUNED, _PRUNED_SIZE, base):
        for entry in os.scandir(base):
            if entry.is_dir(follow_symlinks=False) and _FOLDER.match(entry.name) and entry.name != here.name:
                shutil.rmtree(entry.path, ignore_errors=True)
    return here


def _encode(df: pd.DataFrame) -> dict | None:
    """A frame as JSON-ready columns, or None if it would not come back exactly."""
    if not isinstance(df.index, pd.RangeIndex) or df.index.start != 0 or df.index.step != 1:
        return None
    if not all(isinstance(c, str) for c in df.columns) or df.columns.duplicated().any():
        return None
    enc = {"columns": list(df.columns), "dtypes": [str(t) for t in df.dtypes],
           "data": [df[c].tolist() for c in df.columns], "rows": len(df)}
    try:
        back = _decode(json.loads(json.dumps(enc)))
    except (TypeError, ValueError):
        return None
    return enc if _same(df, back) else None


def _decode(enc: dict) -> pd.DataFrame:
    cols = {c: pd.Series(v, dtype=t) for c, t, v in zip(enc["columns"], enc["dtypes"], enc["data"], strict=True)}
    return pd.DataFrame(cols, index=pd.RangeIndex(enc["rows"]))


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Equal values (NaN where NaN), dtypes, columns and index, element by element and by type."""
    if list(a.columns) != list(b.columns) or not a.index.equals(b.index) or list(a.dtypes) != list(b.dtypes):
        return False
    for c in a.columns:
        x, y = a[c].tolist(), b[c].tolist()
        if any(type(p) is not type(q) or (p != q and not (p != p and q != q)) for p, q in zip(x, y, strict=True)):
            return False
    return True


def _digest(encoded: list) -> str:
    """Of the frames as JSON: a file edited by hand, or cut short, does not match its digest."""
    return hashlib.sha256(json.dumps(encoded).encode()).hexdigest()


def frames(cache, namespace: str, parts: list, compute: Callable[[], tuple[pd.DataFrame, ...]],
           cacheable: bool = True) -> tuple[pd.DataFrame, ...]:
    """`compute()`, or what an earlier call with the same key kept.

    Args:
        cache: the run's `cache` (True: the default folder; a path; False: compute, keep nothing).
        namespace: a folder per kind of result (e.g. "splits").
        parts: JSON-serialisable values naming everything, besides the package, that decides the result.
        compute: returns a tuple of DataFrames.
        cacheable: False for a run whose rows are not reused (a policy without a cache key).
    """
    if cache is False or not cacheable:
        return compute()
    here = _folder(cache)
    if here is None:
        return compute()
    key = hashlib.sha256(json.dumps([FORMAT, namespace, parts], sort_keys=True).encode()).hexdigest()[:32]
    path = here / namespace / f"{key}.json"
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("format") == FORMAT and doc.get("key") == key and doc.get("sha256") == _digest(doc["frames"]):
            return tuple(_decode(enc) for enc in doc["frames"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent, unreadable or not ours: computed afresh and rewritten
    out = tuple(compute())
    encoded = [_encode(df) for df in out]
    if all(e is not None for e in encoded):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps({"format": FORMAT, "key": key, "sha256": _digest(encoded), "frames": encoded}))
        except OSError as e:
            warn_caller(f"the results cache could not keep {path.name} ({e.strerror or e})", CacheWarning)
    return out
