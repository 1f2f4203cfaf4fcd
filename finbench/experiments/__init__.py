"""One module per experiment, named like its notebook (`01_headline` -> `headline`).

Each module turns episode rows from a `Run` into the experiment's tables,
figures and claims records; the notebook is parameters, a run, these calls,
and `publish`. An experiment module never imports another: what two share
lives a layer down (`metrics`, `policy_refs`, `plotting`, `claims`).

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
"""
