"""Run the notebooks headless with papermill: `python -m finbench.pipeline [NAME ...]`.

Executed copies go to `build/notebooks/` (build products, never committed);
the notebooks write `tables/`, `figures/` and `data/` relative to the repo root.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def run_notebook(path: str | Path, parameters: dict | None = None, out_dir: str | Path | None = None,
                 cwd: str | Path = ROOT) -> Path:
    """Execute one notebook with papermill (kernel python3, explicit cwd)."""
    import papermill

    path = Path(path)
    out_dir = Path(out_dir) if out_dir else ROOT / "build" / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / path.name
    env_path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in env_path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env_path) if p)
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
    os.environ.setdefault("MPLBACKEND", "Agg")
    papermill.execute_notebook(str(path), str(out), parameters=parameters or {}, kernel_name="python3",
                               cwd=str(cwd), progress_bar=False, log_output=False)
    return out


def main(argv: list[str] | None = None) -> int:
    names = argv if argv is not None else sys.argv[1:]
    chosen = [p for p in notebooks() if not names or p.stem in names or p.name in names]
    if names and not chosen:
        print(f"no notebook matches {names}; have: {[p.stem for p in notebooks()]}", file=sys.stderr)
        return 2
    for p in chosen:
        start = time.perf_counter()
        run_notebook(p)
        print(f"{p.stem}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
