"""`finbench verify` (`make verify`): the notebooks' principal runs evaluated afresh, and a seeded sample of
their rows of every origin replayed alone with nothing reused (`finbench.running.verify`)."""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from finbench.commands import options as O
from finbench.errors import show

__all__ = ["add_verify"]


def add_verify(commands) -> None:
    ver = commands.add_parser(
        "verify", help="replay a sample of rows of every origin and compare them with the rows (0 all equal)",
        description="Evaluate the notebooks' principal runs (the nine on the public corpus, two fault-ablation "
                    "arms, a probe arm, one seed, other prices, the nine again from the episode cache) with a "
                    "fresh episode cache, and replay a seeded sample of their rows of every origin (played, "
                    "derived, cut, re-priced, loaded) one episode at a time with every memo emptied, comparing "
                    "every column. Exit 0 when every replay equals its row, 1 naming each difference (row, "
                    "origin, column). Your own run, in Python: finbench.verify(run).")
    ver.add_argument("--n-tasks", type=O.count, default=321, metavar="N", help="the corpus size (default: 321)")
    ver.add_argument("--seeds", type=O.count, default=5, help="fault seeds, 0..N-1 (default: 5)")
    ver.add_argument("--per-origin", type=O.count, default=10, metavar="N",
                     help="rows replayed of each origin in each run (default: 10)")
    ver.add_argument("--seed", type=O.nonneg, default=0, help="the sample's seed (default: 0)")
    ver.add_argument("--card", metavar="CARD_OR_ROWS",
                     help="instead, check a shared result (a card's folder, its card.json or a rows.csv): replay a "
                          "seeded sample of its rows (--per-origin of each origin) under its stamp, which decides the "
                          "corpus, seeds, profile and costs (--n-tasks and --seeds are not read), and compare every "
                          "column")
    ver.add_argument("--agent", metavar=O.AGENT, type=O.text,
                     help="with --card: the agent that made the rows (not needed for the package's own policies)")
    ver.set_defaults(func=_verify, parser=ver)


def _verify(args: argparse.Namespace) -> int:
    from finbench.errors import FinbenchError  # lazy: `grade` loads no simulator
    from finbench.running.verify import verify_runs  # lazy: as above

    if args.card is not None:
        bad = _verify_card(args)
    else:
        if args.agent is not None:
            raise FinbenchError("--agent goes with --card (the agent that made a card's rows)")
        with tempfile.TemporaryDirectory(prefix="finbench-verify-") as cache:
            bad = verify_runs(cache, args.n_tasks, range(args.seeds), args.per_origin, args.seed)
    if bad.empty:
        print("finbench verify: every replayed row equals its row")
        return 0
    for line in bad.itertuples(index=False):
        print(f"finbench verify: {line.run}: row {line.row} ({line.origin}, {line.policy} on {line.task_id} seed "
              f"{line.seed}): {line.column} is {show(line.row_value)}, replayed {show(line.replayed)}",
              file=sys.stderr)
    return 1


def _verify_card(args: argparse.Namespace):
    """The differences between a sample of a shared card's rows and their replays under its stamp."""
    from finbench.analysis.explore import read_rows, rows_replay  # lazy: as above
    from finbench.errors import FinbenchError  # lazy: as above
    from finbench.running.verify import verify  # lazy: as above

    from finbench.sharing.submitted import read_submitted  # lazy: as above

    card = Path(args.card)
    read_submitted(card, "")  # refused unless its rows are the whole run its stamp names (and its card theirs)
    rows = read_rows(card.parent if card.name == "card.json" else card, str(card))
    replay = rows_replay(rows, policy=args.agent, where=str(card))
    if replay.cannot:
        label, why = next(iter(replay.cannot.items()))
        raise FinbenchError(f"the rows of {label!r} cannot be replayed: {why}".replace("pass policy=", "give --agent"))
    bad = verify(replay.run, rows, args.per_origin, args.seed, written=True).assign(run=str(args.card))
    print(f"finbench verify: {min(args.per_origin, len(rows)):,} of the {len(rows):,} rows of {args.card} replayed "
          f"({replay.caption})")
    return bad
