"""One module per experiment, named like its notebook (`01_headline` -> `headline`).

Every module has one shape, so a reader (or `splits.across`, or the claims
report) can drive any of them alike:

    rows = experiment.episodes(run)              # the episode rows of a `Run`
    tables = experiment.tables(rows, run)        # stem -> DataFrame, the stems in `TABLES`
    claims = experiment.claims(tables)           # the paper's claims beside ours
    figures = experiment.figures(rows, run, tables)   # stem -> Figure
    publish_experiment(experiment, run, tables, claims, figures)   # as `PUBLISH` says

and `claims_from_tables(folder)` recomputes `claims` from the tables as written.
The notebook is parameters, a run and these calls. An experiment module never
imports another: what two share lives a layer down (`analysis.metrics`,
`agents.registry`, `analysis.plotting`, `analysis.verdicts`). `claims` (the
`99_claims` report) and `splits` read the others through this shape.

- `headline`: Table II, Table III (+ gap by archetype), Figure 1.
- `model_arm`: Table V, language-model agents through the tool schemas (`finbench.agents.llm`).
- `twins`: Table IV and Figure 2, twin pairs and the two rankings.
- `ablation`: Table VI, Figure 3, what each fault family changes, the 2x2 of loss and delay.
- `tuning`: Table VII, sop's knobs tuned on the public split, re-measured on regenerated ones.
- `cost_sweep`: the 45 cost configurations, re-priced.
- `plan_search`: the 1,215 open-loop plans against the reference.
- `splits`: the headline and its claims across regenerated corpora (`finbench.sim.splitseeds`).
- `effects`: the effect-level checks per policy.
- `probe_arms`: Table VIII, every policy (and the `reconciler`) under five probe modes.
- `exploits`: can the score be gamed? Adversarial plans on every task, the break-even dispute fee.
- `claims`: every experiment's claims in one report (notebook `99_claims`).

The claims report reads the others through `experiment(name)`, the one place
that loads an experiment by name (`NAMES`); a test holds `NAMES` to the folder
and checks that no experiment module imports another or loads one otherwise.
"""
from __future__ import annotations

import importlib

from finbench.errors import FinbenchError

NAMES = ("headline", "twins", "model_arm", "ablation", "tuning", "cost_sweep", "plan_search", "effects",
         "probe_arms", "splits", "exploits", "claims")
"""Every experiment module, by the name of its notebook (without the number)."""


def experiment(name: str):
    """The experiment module `name` (one of `NAMES`), loaded on first use.

    Raises:
        FinbenchError: not one of `NAMES`.
    """
    if name not in NAMES:
        raise FinbenchError(f"experiment: name must be one of {', '.join(NAMES)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
