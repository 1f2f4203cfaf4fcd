"""Results as researchers share them: a report card's folder (`card.json` and `rows.csv`) or a `rows.csv`
alone, read back, and whether several of them may be set side by side.

    subs = [read_submitted("build/eval/v1"), read_submitted("build/eval/v2")]
    same_run(subs)                       # FinbenchError naming what differs, else the stamp they share

Two results are comparable when every entry of their stamps that decides the episodes or their intervals is
equal (`DECIDING`: the engine version, the corpus, its tasks, the seeds, the fault profile, the costs, the
probe mode, the bootstrap's resamples and seed); the agent, the package version, the commit and the list
of policies may differ. A card's `card.json` adds the nine's numbers (Table II and IV) that a leaderboard
ranks; a `rows.csv` alone holds the agent's episodes only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from finbench.analysis.explore import probe_named, profile_named, read_rows, rebuilt
from finbench.analysis.card_tables import SCHEMA
from finbench.errors import FinbenchError, show

__all__ = ["DECIDING", "Submitted", "named", "read_submitted", "same_run", "stamp_run"]

FREE = ("agent", "package", "commit", "policies")
"""Stamp entries two comparable results may differ in: who played, with which release, in which run."""
DECIDING = ("engine", "corpus", "master_seed", "tasks", "task_ids", "units", "twin_pairs", "seeds", "profile",
            "costs", "probe", "n_boot", "boot_seed")
"""The stamp entries that decide the episodes or their intervals, in the order a refusal names them."""


@dataclass(frozen=True)
class Submitted:
    """One agent's shared results: `rows` (its episodes, with the stamp in `rows.attrs["stamp"]`), `card`
    (card.json, None for a rows.csv alone), `name` (how tables name it: the agent's label, or the folder's
    name where two share a label) and `path`."""

    path: Path
    agent: str
    rows: pd.DataFrame = field(repr=False)
    card: dict | None = field(default=None, repr=False)
    name: str = ""

    @property
    def stamp(self) -> dict:
        return self.rows.attrs.get("stamp") or {}


def read_submitted(path, where: str = "read_submitted") -> list[Submitted]:
    """The results at `path`: a card's folder (card.json and rows.csv), its card.json, or a rows.csv (one
    `Submitted` per policy it holds). Raises FinbenchError when it is none of these, has no stamp, or its
    card.json does not belong to its rows."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent if path.name == "card.json" else None
    rows_path = folder / "rows.csv" if folder is not None else path
    if folder is not None and not rows_path.is_file():
        raise FinbenchError(f"{where}: {show(str(path))} is not a report card's folder (no rows.csv in it)")
    rows = read_rows(rows_path, where)
    stamp = rows.attrs.get("stamp") or {}
    if not stamp:
        raise FinbenchError(f"{where}: {show(str(rows_path))} has no stamp (the '# key: value' lines a card's "
                            "rows.csv starts with): without it nothing says which run its episodes belong to")
    card = _card(folder / "card.json", where) if folder is not None and (folder / "card.json").is_file() else None
    labels = list(dict.fromkeys(rows["policy"]))
    if card is not None:
        if labels != [card["agent"]] or card.get("stamp", {}).get("corpus") != stamp.get("corpus"):
            raise FinbenchError(f"{where}: {show(str(folder))}: card.json is {show(card.get('agent'))}'s on corpus "
                                f"{show(card.get('stamp', {}).get('corpus'))}, rows.csv holds {', '.join(labels)} on "
                                f"{show(stamp.get('corpus'))}: not one card")
    out = []
    for label in labels:
        mine = rows[rows["policy"] == label].reset_index(drop=True)
        mine.attrs["stamp"] = dict(stamp)
        out.append(Submitted(folder or path, label, mine, card, label))
    return out


def _card(path: Path, where: str) -> dict:
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise FinbenchError(f"{where}: {show(str(path))} cannot be read as JSON ({' '.join(str(e).split())[:120]})"
                            ) from None
    if not isinstance(card, dict) or card.get("schema") != SCHEMA:
        got = card.get("schema") if isinstance(card, dict) else type(card).__name__
        raise FinbenchError(f"{where}: {show(str(path))} is not a card of schema {SCHEMA} (got {show(got)}); "
                            "write it again with this release's finbench eval")
    return card


def named(subs: list[Submitted]) -> list[Submitted]:
    """`subs` with names unique: a label shared by several results is followed by its folder's name (then a
    number), so that two versions of one agent can stand side by side."""
    out, taken = [], set()
    count = pd.Series([s.agent for s in subs]).value_counts()
    for s in subs:
        name = s.agent if count[s.agent] == 1 else f"{s.agent} ({s.path.name})"
        base, n = name, 2
        while name in taken:
            name, n = f"{base} #{n}", n + 1
        taken.add(name)
        out.append(Submitted(s.path, s.agent, s.rows, s.card, name))
    return out


def same_run(subs: list[Submitted], where: str = "compare") -> dict:
    """The stamp entries `subs` share (`DECIDING`), or a FinbenchError naming each entry that differs and
    whose value it has in each result."""
    if not subs:
        raise FinbenchError(f"{where}: nothing to compare")
    differs = []
    for key in DECIDING:
        values = [s.stamp.get(key) for s in subs]
        if len(set(values)) > 1:
            differs.append(f"{key} ({'; '.join(f'{s.name}: {_value(v)}' for s, v in zip(subs, values))})")
    if differs:
        raise FinbenchError(f"{where}: the results are not comparable, their runs differ in {', '.join(differs)}; "
                            "evaluate them on the same corpus, seeds, profile, costs and engine")
    return {k: subs[0].stamp[k] for k in DECIDING if k in subs[0].stamp}


def _value(v) -> str:
    return "absent" if v is None else show(v)


def stamp_run(stamp: dict, rows: pd.DataFrame) -> SimpleNamespace:
    """What draws an episode of these rows: their corpus, profile, costs and probe mode (a `Run`'s fields
    `analysis.card_tables.draw_command` reads), rebuilt from the stamp. Raises FinbenchError when it cannot."""
    why, corpus, costs = rebuilt(stamp, rows, 0, None)
    if why:
        raise FinbenchError(f"the results' episodes cannot be drawn: {why}")
    return SimpleNamespace(corpus=corpus, costs=costs, profile=profile_named(stamp.get("profile", "all")),
                           probe=probe_named(stamp.get("probe", "full")))

