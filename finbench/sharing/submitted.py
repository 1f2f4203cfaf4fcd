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
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from finbench.analysis.explore import probe_named, profile_named, read_rows, rebuilt
from finbench.agents.registry import DEFAULT_POLICIES
from finbench.analysis.card_tables import SCHEMA
from finbench.errors import FinbenchError, show
from finbench.running.run import seeds_label

__all__ = ["DECIDING", "Submitted", "at", "distinct", "named", "read_submitted", "same_run", "stamp_run"]

FREE = ("agent", "package", "commit", "policies")
"""Stamp entries two comparable results may differ in: who played, with which release, in which run."""
DECIDING = ("engine", "corpus", "master_seed", "tasks", "task_ids", "units", "twin_pairs", "seeds", "profile",
            "costs", "probe", "n_boot", "boot_seed")
"""The stamp entries that decide the episodes or their intervals, in the order a refusal names them."""
UNSTAMPED = {"probe": "full"}
"""What an entry a stamp leaves out means (a run with the full probe does not name it)."""


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
    if not isinstance(path, (str, os.PathLike)):
        raise FinbenchError(f"{at(where)}path must be a card's folder, its card.json or a rows.csv, got {show(path)}")
    path = Path(path)
    folder = path if path.is_dir() else path.parent if path.name == "card.json" else None
    rows_path = folder / "rows.csv" if folder is not None else path
    if folder is not None and not rows_path.is_file():
        raise FinbenchError(f"{at(where)}{show(str(path))} is not a report card's folder (no rows.csv in it)")
    rows = read_rows(rows_path, where or str(rows_path))
    stamp = rows.attrs.get("stamp") or {}
    if not stamp:
        raise FinbenchError(f"{at(where)}{show(str(rows_path))} has no stamp (the '# key: value' lines a card's "
                            "rows.csv starts with): without it nothing says which run its episodes belong to")
    card = _card(folder / "card.json", where) if folder is not None and (folder / "card.json").is_file() else None
    _check_rows(rows, stamp, f"{at(where)}{rows_path}")
    labels = list(dict.fromkeys(rows["policy"]))
    if card is not None:
        _check_card(card, rows, f"{at(where)}{folder}")
    out = []
    for label in labels:
        mine = rows[rows["policy"] == label].reset_index(drop=True)
        mine.attrs["stamp"] = dict(stamp)
        out.append(Submitted(folder or path, label, mine, card, label))
    return out


def at(where: str) -> str:
    """A message's prefix: `where: `, or nothing (a command names itself)."""
    return f"{where}: " if where else ""


_VERDICTS = {"pass", "violation", "unscorable"}
_CHECKED = {"pass", "fail", "unknown"}


def _check_rows(rows: pd.DataFrame, stamp: dict, where: str) -> None:
    """Refuse rows a comparison would misread: a missing or non-numeric number, a flag that is not True or
    False, an unknown verdict, an episode twice, or episodes other than the stamp's tasks x seeds."""
    for col in ("gap", "position", "reference_position"):
        values = pd.to_numeric(rows[col], errors="coerce") if col in rows else None
        if values is not None and not values.notna().all():
            i = int(values.isna().to_numpy().argmax())
            cell = rows[col].iloc[i]
            raise FinbenchError(f"{where}: row {i + 1}'s {col} is {'empty' if pd.isna(cell) else show(cell)}, "
                                "not a number")
    for col in ("exact", "premature_irreversible"):
        if col in rows and rows[col].dtype != bool:
            raise FinbenchError(f"{where}: the column {col} holds {show(_odd(rows[col], (True, False)))}, not "
                                "True or False")
    if not rows["verdict"].isin(_VERDICTS).all():
        raise FinbenchError(f"{where}: a verdict is {show(_odd(rows['verdict'], _VERDICTS))}, not one of "
                            f"{', '.join(sorted(_VERDICTS))}")
    for col in (c for c in rows.columns if c.startswith("check_")):
        if not rows[col].isin(_CHECKED).all():
            raise FinbenchError(f"{where}: {col} holds {show(_odd(rows[col], _CHECKED))}, not pass, fail or unknown")
    twice = rows.duplicated(["policy", "task_id", "seed"])
    if twice.any():
        r = rows[twice].iloc[0]
        raise FinbenchError(f"{where}: {r['policy']} on {r['task_id']} seed {r['seed']} is there twice")
    seeds = sorted(set(rows["seed"]))
    if seeds_label(seeds) != stamp.get("seeds", seeds_label(seeds)):
        raise FinbenchError(f"{where}: the rows' seeds ({seeds_label(seeds)}) are not their stamp's "
                            f"({stamp['seeds']})")
    for policy, mine in rows.groupby("policy", sort=False):
        n = mine["task_id"].nunique()
        if str(n) != str(stamp.get("tasks", n)) or len(mine) != n * len(seeds):
            raise FinbenchError(f"{where}: {policy}'s rows hold {len(mine)} episodes of {n} tasks, not every one of "
                                f"the stamp's {stamp.get('tasks')} tasks x {len(seeds)} seeds")
    why, corpus, _ = rebuilt(stamp, rows, 0, None)
    if not why and set(rows["task_id"]) != {t.task_id for t in corpus.tasks}:
        raise FinbenchError(f"{where}: the rows' tasks are not the corpus their stamp names")


def _odd(values: pd.Series, allowed) -> object:
    bad = values[~values.isin(list(allowed))]
    return None if bad.empty or pd.isna(bad.iloc[0]) else bad.iloc[0]


CARD_KEYS = ("agent", "stamp", "headline", "table2", "usage", "archetypes", "warnings")


def _check_card(card: dict, rows: pd.DataFrame, where: str) -> None:
    """Refuse a card.json that is not its rows' card: keys missing, another agent or corpus, an agent named as
    one of the nine, or its agent's Table II entry other than its rows give."""
    lacking = [k for k in CARD_KEYS if k not in card]
    if lacking:
        raise FinbenchError(f"{where}: card.json lacks {', '.join(lacking)}: not a card of schema {SCHEMA}")
    labels = list(dict.fromkeys(rows["policy"]))
    stamp = rows.attrs.get("stamp") or {}
    if labels != [card["agent"]] or card["stamp"].get("corpus") != stamp.get("corpus"):
        raise FinbenchError(f"{where}: card.json is {show(card['agent'])}'s on corpus "
                            f"{show(card['stamp'].get('corpus'))}, rows.csv holds {', '.join(labels)} on "
                            f"{show(stamp.get('corpus'))}: not one card")
    own = [e for e in card["table2"] if isinstance(e, dict) and e.get("policy") == card["agent"]]
    if card["agent"] in DEFAULT_POLICIES or len(own) != 1:
        raise FinbenchError(f"{where}: card.json's agent {show(card['agent'])} is "
                            + ("one of the nine" if card["agent"] in DEFAULT_POLICIES else "not once in its table2"))
    e, gap, exact = own[0], float(rows["gap"].mean()), 100 * float(rows["exact"].mean())
    if (e.get("episodes") != len(rows) or not _near(e.get("mean_gap"), gap) or not _near(e.get("exact_pct"), exact)):
        raise FinbenchError(f"{where}: card.json says {e.get('episodes')} episodes, mean gap {e.get('mean_gap')}, "
                            f"exact {e.get('exact_pct')}%, its rows.csv {len(rows)}, {gap:.6g}, {exact:.6g}%: the "
                            "card is not its rows'")


def _near(x, y: float) -> bool:
    return isinstance(x, (int, float)) and abs(x - y) <= 1e-6 * max(1.0, abs(y))


def _card(path: Path, where: str) -> dict:
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise FinbenchError(f"{at(where)}{show(str(path))} cannot be read as JSON ({' '.join(str(e).split())[:120]})"
                            ) from None
    if not isinstance(card, dict) or card.get("schema") != SCHEMA:
        got = card.get("schema") if isinstance(card, dict) else type(card).__name__
        raise FinbenchError(f"{at(where)}{show(str(path))} is not a card of schema {SCHEMA} (got {show(got)}); "
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


def distinct(subs, where: str) -> list[Submitted]:
    """`subs` as a list of `Submitted` (a FinbenchError for anything else), each result once."""
    if isinstance(subs, (str, os.PathLike, Submitted)) or not isinstance(subs, (list, tuple)):
        raise FinbenchError(f"{at(where)}results must be a list of read_submitted's results, got {show(subs)}")
    odd = [x for x in subs if not isinstance(x, Submitted)]
    if odd:
        raise FinbenchError(f"{at(where)}results must be read_submitted's results, got {show(odd[0])} among them")
    seen: dict = {}
    for s in subs:
        key = (str(Path(s.path).resolve()), s.agent)
        if key in seen:
            raise FinbenchError(f"{at(where)}{s.path} ({s.agent}) is given twice: each result once")
        seen[key] = s
    return list(subs)


def same_run(subs: list[Submitted], where: str = "compare") -> dict:
    """The stamp entries `subs` share (`DECIDING`), or a FinbenchError naming each entry that differs and
    whose value it has in each result."""
    if not subs:
        raise FinbenchError(f"{at(where)}nothing to compare")
    differs = []
    for key in DECIDING:
        values = [s.stamp.get(key, UNSTAMPED.get(key)) for s in subs]
        if len(set(values)) > 1:
            differs.append(f"{key} ({'; '.join(f'{s.name}: {_value(v)}' for s, v in zip(subs, values))})")
    if differs:
        raise FinbenchError(f"{at(where)}the results are not comparable, their runs differ in {', '.join(differs)}; "
                            "evaluate them with the same engine, corpus, seeds, profile, costs, probe mode and "
                            "bootstrap")
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

