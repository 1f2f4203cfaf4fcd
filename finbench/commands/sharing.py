"""`finbench compare` and `finbench leaderboard`: results set side by side as researchers share them (report
cards' folders, or rows.csv files), each refused when they are not of one run (`finbench.sharing`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from finbench.commands import options as O

__all__ = ["add_sharing", "default_out"]

SAME_RUN = ("the same engine version, corpus, seeds, fault profile, costs, probe mode and bootstrap (finbench eval "
            "with the same options); anything else is refused, naming what differs (exit 64)")


def shown(paths) -> str:
    """Paths as the commands print them: relative to the current folder when under it."""
    here = Path.cwd().resolve()
    return ", ".join(str(p.resolve().relative_to(here)) if here in p.resolve().parents else str(p) for p in paths)


def default_out(name: str) -> Path:
    """Where a command writes by default: build/<name>/ of the current folder (refused when it cannot be
    written there)."""
    from finbench.errors import FinbenchError  # lazy: as the commands' other imports
    from finbench.eval_cli import unwritable  # lazy: as above

    out = Path.cwd() / "build" / name
    why = unwritable(out)
    if why:
        raise FinbenchError(f"cannot write into {out}: {why}; give --out DIR")
    return out


def add_sharing(commands) -> None:
    cmp_ = commands.add_parser(
        "compare", help="compare two or more agents' cards on the same episodes (paired, with intervals)",
        description="Compare two or more results (report card folders, as finbench eval writes them, or their "
                    "rows.csv) on the episodes all of them played: for each pair, the paired difference in mean "
                    "gap and exact % with a 95% bootstrap interval over units (twin pairs held together), per "
                    "archetype; pass^k and the effect verdicts of each; and the episodes where each left a lower "
                    f"gap, with the command that draws them. The results must share {SAME_RUN}. Writes "
                    "compare.md, compare.html and compare.json.")
    cmp_.add_argument("results", nargs="+", metavar="CARD_OR_ROWS",
                      help="a card's folder (or its card.json), or a rows.csv; two or more in all")
    cmp_.add_argument("--out", type=O.folder_for("the comparison"), metavar="DIR",
                      help="where the comparison goes (default: build/compare/ in the current folder)")
    cmp_.set_defaults(func=_compare, parser=cmp_)
    lb = commands.add_parser(
        "leaderboard", help="rank agents' cards beside the nine in one table",
        description="Rank the agents of one or more report cards beside the nine by mean gap (lower is better), "
                    "with exact %, paired loss on the twin pairs, pass^k, premature and violation %, each with "
                    f"its card's interval. The cards must share {SAME_RUN}, and the nine's rows they carry must "
                    "agree. Writes leaderboard.md, leaderboard.html and leaderboard.csv (stamped).")
    lb.add_argument("cards", nargs="+", metavar="CARD",
                    help="a card's folder (or its card.json), or a folder of card folders")
    lb.add_argument("--out", type=O.folder_for("the leaderboard"), metavar="DIR",
                    help="where the leaderboard goes (default: build/leaderboard/ in the current folder)")
    lb.set_defaults(func=_leaderboard, parser=lb)


def _read(paths, cards_below: bool = False) -> list:
    from finbench.errors import FinbenchError  # lazy: `grade` loads no simulator
    from finbench.sharing.submitted import read_submitted  # lazy: as above

    out = []
    for text in paths:
        path = Path(text)
        if cards_below and path.is_dir() and not (path / "rows.csv").is_file():  # a folder of card folders
            below = sorted(p.parent for p in path.glob("*/card.json"))
            if not below:
                raise FinbenchError(f"{path} holds no card (no card.json in it or in a folder of it)")
            for folder in below:
                out += read_submitted(folder, "")
        else:
            out += read_submitted(path, "")
    return out


def _compare(args: argparse.Namespace) -> int:
    from finbench.sharing.compare import compare  # lazy: as above
    from finbench.sharing.page import one_line  # lazy: as above

    c = compare(_read(args.results), "")
    paths = c.write(args.out or default_out("compare"))
    for p in c.pairs.itertuples():
        print(f"{one_line(p.a)} - {one_line(p.b)}: mean gap {p.gap_diff:+.2f} [{p.gap_lo:+.2f}, {p.gap_hi:+.2f}] $, "
              f"exact {p.exact_diff_pct:+.1f} [{p.exact_lo:+.1f}, {p.exact_hi:+.1f}] points over {p.episodes:,} shared "
              f"episodes; decided differently in {p.decided_differently:,}, lower gap {p.a_better:,} vs "
              f"{p.b_better:,}")
    print("comparison: " + shown(paths))
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from finbench.sharing.leaderboard import leaderboard  # lazy: as above
    from finbench.sharing.page import one_line  # lazy: as above

    board = leaderboard(_read(args.cards, cards_below=True), "")
    paths = board.write(args.out or default_out("leaderboard"))
    table = board.shown().drop(columns=["card"])
    print(table.assign(policy=table["policy"].map(one_line)).to_string(index=False))
    print("leaderboard: " + shown(paths))
    return 0
