"""Tables for machines (CSV, full precision) and people (Markdown), both stamped
with the corpus fingerprint and the parameters they ran with."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from finbench.errors import bad
from finbench.sim import constants as C
from finbench.files import atomic_write


def _stamp(meta: dict) -> list[str]:
    """One `key: value` line per entry; a line break inside would end the CSV's comment header."""
    return [" ".join(f"{k}: {v}".splitlines()) for k, v in meta.items()]


def write_table(df: pd.DataFrame, stem: str, meta: dict, tables_dir: str | Path = "tables",
                title: str | None = None, floatfmt: str = ".2f", notes: list[str] | None = None,
                markdown: pd.DataFrame | None = None) -> list[Path]:
    """Write `<stem>.csv` (comment lines of metadata, then the data) and `<stem>.md`
    (`markdown` if given: a formatted rendering of the same rows)."""
    out = Path(tables_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / f"{stem}.csv"
    md = out / f"{stem}.md"
    header = "".join(f"# {line}\n" for line in _stamp(meta))
    atomic_write(csv, header + df.to_csv(index=False, lineterminator="\n", float_format="%.10g"))
    lines = [f"# {title or stem}", ""]
    lines += [f"- {line}" for line in _stamp(meta)]
    shown = df if markdown is None else markdown
    lines += ["", shown.to_markdown(index=False, floatfmt=floatfmt), ""]
    if notes:
        lines += [*notes, ""]
    atomic_write(md, "\n".join(lines))
    return [csv, md]


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV written by `write_table`: its leading `# ` stamp lines skipped (a `#` in a cell is data)."""
    with open(path, encoding="utf-8") as fh:
        stamp = 0
        for line in fh:
            if not line.startswith("#"):
                break
            stamp += 1
    return pd.read_csv(path, skiprows=stamp)


def corpus_table(corpus) -> pd.DataFrame:
    """The archetype mix: tasks, twins, units, value and determination-time ranges."""
    rows = []
    tasks = list(corpus)
    if not tasks:
        raise bad("corpus_table", "corpus", corpus, "a corpus with at least one task")
    for a in C.ARCHETYPES:
        ts = [t for t in tasks if t.archetype == a]
        if not ts:
            continue
        rows.append({
            "archetype": a,
            "tasks": len(ts),
            "twin_tasks": sum(t.twin_id is not None for t in ts),
            "settle": sum(t.outcome == "settled" for t in ts),
            "fail": sum(t.outcome == "failed" for t in ts),
            "value_min": min(t.order_value for t in ts),
            "value_max": max(t.order_value for t in ts),
            "value_mean": round(sum(t.order_value for t in ts) / len(ts), 2),
            "determined_min": min(t.determined_at for t in ts),
            "determined_max": max(t.determined_at for t in ts),
        })
    df = pd.DataFrame(rows)
    total = {"archetype": "total", "tasks": len(tasks), "twin_tasks": int(df.twin_tasks.sum()),
             "settle": int(df.settle.sum()), "fail": int(df.fail.sum()),
             "value_min": df.value_min.min(), "value_max": df.value_max.max(),
             "value_mean": round(sum(t.order_value for t in tasks) / len(tasks), 2),
             "determined_min": df.determined_min.min(), "determined_max": df.determined_max.max()}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


def corpus_meta(corpus, **params) -> dict:
    return {"corpus": corpus.fingerprint, "master_seed": corpus.master_seed, "tasks": len(corpus),
            "units": len(corpus.units), "twin_pairs": len(corpus.twin_pairs),
            "engine": C.ENGINE_VERSION, **params, "made_by": f"{__name__}.corpus_table"}
