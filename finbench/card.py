"""One agent's report card beside SPEC's nine: what `python -m finbench eval` computes and writes.

    card = report_card(Patient, n_tasks=30, seeds=range(2))   # or card_of(run, "patient") for any Run
    card.write("build/eval/patient")    # report.md, rows.csv, worst_twin_pair.png (+ .pdf)
    print(card.summary())               # the one-screen summary the command prints

The card reads the experiment layer's own tables (Table II and III from
`experiments.headline`, Table IV from `experiments.twins`), so its numbers are
the notebooks' numbers for the same run. It sits at the top of the package
because it imports the experiment layer, which `analysis` may not; it is not
named `report_card` so that the module never shadows the function of that name
exported by `finbench`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from finbench.agents.registry import DEFAULT_POLICIES, as_ref
from finbench.errors import FinbenchError, show
from finbench.experiments import headline, twins
from finbench.files import atomic_write
from finbench.grading import CHECKS
from finbench.running.run import Run

__all__ = ["ReportCard", "WorstPair", "card_of", "report_card"]

GATE = headline.GATE
FIGURE = "worst_twin_pair"
"""The stem of the worst twin pair's timeline (PNG and PDF) in the card's folder."""

_ESCAPES = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_MARKUP = re.compile(r"([\\`*|<>$])")


def _line(name: str) -> str:
    """A name as one line of printable text: escape sequences dropped, controls and line breaks a space."""
    text = _ESCAPES.sub("", name)
    return " ".join("".join(ch if ch.isprintable() else " " if ch.isspace() else "" for ch in text).split())


def _md(name: str) -> str:
    """A name as Markdown text: one line (no heading, no table row of its own), `|` and markup escaped."""
    return _MARKUP.sub(r"\\\1", _line(str(name)))


@dataclass(frozen=True)
class WorstPair:
    """The twin pair (and seed) on which the agent lost the most over both halves."""

    unit: str
    seed: int
    settle: str
    fail: str
    loss: float
    """The agent's mean gap $ over the two halves."""
    settle_gap: float
    fail_gap: float
    gate_loss: float


@dataclass(frozen=True)
class ReportCard:
    """The agent's tables beside the nine, computed from one run's episode rows.

    Attributes:
        agent: the agent's label (its rows' `policy`).
        run: the `Run` (the nine and the agent).
        rows: every policy's episode rows.
        table2: Table II over every policy (`headline.table2`).
        table3: exact % by archetype, the agent's row and the gate's (Table III transposed).
        table4: Table IV over every policy, or None when the corpus has no twin pair.
        checks: per effect check, the agent's fail % and unknown % and the gate's fail %, most failed first.
        worst: the worst twin pair, or None without twin pairs.
    """

    agent: str
    run: Run
    rows: pd.DataFrame
    table2: pd.DataFrame
    table3: pd.DataFrame
    table4: pd.DataFrame | None
    checks: pd.DataFrame
    worst: WorstPair | None

    @property
    def own_rows(self) -> pd.DataFrame:
        """The agent's episode rows (what `rows.csv` holds)."""
        return self.rows[self.rows["policy"] == self.agent].reset_index(drop=True)

    def stamp(self) -> dict:
        """The run's stamp with the agent named."""
        return self.run.stamp(agent=self.agent)

    def row(self) -> pd.Series:
        """The agent's Table II row."""
        return self.table2.set_index("policy").loc[self.agent]

    # --- rendering ---------------------------------------------------------------------
    def markdown(self) -> str:
        """report.md: the stamp, Table II beside the nine, Table III's row, the twin pairs, the checks,
        the worst twin pair."""
        a, k = _md(self.agent), self.run.k  # the agent's name as the user gave it, but never as markup
        t2 = headline.table2_markdown(self.table2)
        t2["policy"] = [f"**{a}**" if p == self.agent else _md(p) for p in t2["policy"]]
        t3 = self.table3.assign(policy=self.table3["policy"].map(_md))
        lines = [f"# Report card: {a}", "", *(f"- {key}: {_md(value)}" for key, value in self.stamp().items()), "",
                 "## In one paragraph", "", self._headline(a), "",
                 f"## Table II: {a} beside the nine", "", t2.to_markdown(index=False), "",
                 f"Exact % and mean gap with 95% bootstrap intervals over units; pass^{k}: exact on all {k} seeds; "
                 "premature: an irreversible action before the outcome exists; gap - gate: the mean-gap "
                 "difference to the finality gate on a shared resample; violation and unscorable: the "
                 "effect-level grader's verdicts.", "",
                 "## Table III: exact % by archetype", "", t3.to_markdown(index=False, floatfmt=".1f"), ""]
        lines += ["## Twin pairs (Table IV)", ""]
        if self.table4 is None:
            lines += ["The corpus holds no twin pair (give more tasks).", ""]
        else:
            t4 = twins.table4_markdown(self.table4)
            t4 = t4[t4["policy"].isin([self.agent, GATE])]
            lines += [t4.assign(policy=t4["policy"].map(_md)).to_markdown(index=False), "", self._twin_line(a), ""]
        lines += ["## Effect checks it fails most", "", self._checks_markdown(a), ""]
        lines += ["## Its worst twin pair", ""]
        w = self.worst
        if w is None:
            lines += ["No twin pair in the corpus.", ""]
        else:
            lines += [f"{w.unit} (tasks {w.settle} settling, {w.fail} failing), seed {w.seed}: paired loss "
                      f"${w.loss:.2f} (settle half ${w.settle_gap:.2f}, fail half ${w.fail_gap:.2f}); the gate "
                      f"loses ${w.gate_loss:.2f} on the same pair. Left: {a}; right: the gate; top: the "
                      "capture settles; bottom: it fails.", "", f"![worst twin pair]({FIGURE}.png)", ""]
        return "\n".join(lines)

    def headline(self) -> str:
        """One sentence: the agent's accuracy, money, effect violations and difference to the gate."""
        return self._headline(_line(self.agent))

    def _headline(self, a: str) -> str:
        r = self.row()
        text = (f"{a}: exact {r.exact_pct:.1f}% [{r.exact_lo:.1f}, {r.exact_hi:.1f}], mean gap "
                f"${r.mean_gap:.2f} [{r.gap_lo:.2f}, {r.gap_hi:.2f}], premature {r.premature_pct:.1f}%, "
                f"effect violations {r.violation_pct:.1f}% of episodes (unscorable {r.unscorable_pct:.1f}%)")
        if "diff_to_gate" in r.index:
            g = self.table2.set_index("policy").loc[GATE]
            text += (f"; mean gap minus the gate's ({GATE}: ${g.mean_gap:.2f}, violations "
                     f"{g.violation_pct:.1f}%) {r.diff_to_gate:+.2f} [{r.diff_lo:+.2f}, {r.diff_hi:+.2f}]")
        return text + "."

    def _twin_line(self, a: str) -> str:
        t = self.table4.set_index("policy")
        r = t.loc[self.agent]
        return (f"{a}'s paired loss ${r.paired_loss:.2f} [{r.paired_lo:.2f}, {r.paired_hi:.2f}] over "
                f"{int(r.n_pairs)} twin pairs (the gate's ${t.loc[GATE, 'paired_loss']:.2f}); rank "
                f"{int(r.rank_paired)} of {len(t)} by paired loss, {int(r.rank_exact)} by exact %.")

    def _checks_markdown(self, a: str) -> str:
        shown = self.checks.rename(columns={"fail_pct": f"{a} fail %", "unknown_pct": f"{a} unknown %",
                                            "gate_fail_pct": "gate fail %"})
        return shown.to_markdown(index=False, floatfmt=".1f")

    def summary(self) -> str:
        """The one-screen summary the command prints."""
        t2, a, k, run = self.table2, self.agent, self.run.k, self.run
        head = (f"{_line(a)} beside the nine: {len(run.corpus)} tasks x {len(run.seeds)} seeds, {run.episodes:,} "
                f"episodes (corpus {run.corpus.fingerprint}, profile {run.profile.name}, costs "
                f"{self.stamp()['costs']}" + ("" if run.probe.is_full else f", probe {run.probe.name}") + ")")
        cols = {"exact_pct": "exact %", "mean_gap": "mean gap $", f"pass{k}_pct": f"pass^{k} %",
                "premature_pct": "premature %", "violation_pct": "violation %", "unscorable_pct": "unscorable %",
                "diff_to_gate": "gap - gate $"}
        keep = [c for c in cols if c in t2.columns]
        cells = [["policy", *(cols[c] for c in keep)]]
        cells += [[("> " if r.policy == a else "  ") + _line(r.policy), *(f"{getattr(r, c):.1f}" for c in keep)]
                  for r in t2.itertuples(index=False)]
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        table = "\n".join("  ".join([row[0].ljust(widths[0]), *(x.rjust(w) for x, w in zip(row[1:], widths[1:]))])
                          for row in cells)
        lines = [head, "", table, "",
                 self.headline()]
        if self.table4 is not None:
            lines.append(self._twin_line(_line(a)))
        verdicts = self.own_rows["verdict"].value_counts(normalize=True)
        lines.append("effect verdicts: " + ", ".join(f"{v} {100 * verdicts.get(v, 0.0):.1f}%"
                                                     for v in ("pass", "violation", "unscorable")))
        failing = self.checks[self.checks["fail_pct"] > 0]
        lines.append("checks failed most: " + (", ".join(f"{r.check} {r.fail_pct:.1f}% (gate {r.gate_fail_pct:.1f}%)"
                                                        for r in failing.head(3).itertuples()) or "none"))
        if self.worst is not None:
            w = self.worst
            lines.append(f"worst twin pair: {w.unit} seed {w.seed}, paired loss ${w.loss:.2f} (gate ${w.gate_loss:.2f})")
        return "\n".join(lines)

    def write(self, out: str | Path) -> list[Path]:
        """Write report.md, rows.csv and the worst twin pair's timeline into `out`; the paths written."""
        from finbench.analysis.publish import publish  # lazy: matplotlib loads only to draw

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        if self.worst is not None:
            paths += publish(self.figure(), FIGURE, self.run, to=out,
                             caption_extra=f"{_drawn(self.agent)} (left) and {GATE} (right), seed {self.worst.seed}")
        header = "".join(f"# {' '.join(f'{k}: {v}'.splitlines())}\n" for k, v in self.stamp().items())
        body = self.own_rows.to_csv(index=False, lineterminator="\n", float_format="%.10g")
        paths.insert(0, atomic_write(out / "rows.csv", header + body))
        paths.insert(0, atomic_write(out / "report.md", self.markdown()))
        return paths

    def figure(self):
        """The worst twin pair's timelines: the agent and the gate, settle half above, fail half below."""
        from finbench.analysis.timeline_plot import timeline_figure  # lazy: matplotlib loads only to draw

        w = self.worst
        if w is None:
            raise FinbenchError("ReportCard.figure: the corpus holds no twin pair")
        ref = next(r for r in self.run.policies if r.label == self.agent)
        ref = replace(ref, label=_drawn(ref.label))  # the label is only drawn
        gate = next(r for r in self.run.policies if r.label == GATE)
        c, run = self.run.corpus, self.run
        return timeline_figure((c[w.settle], c[w.fail]), policies=(ref, gate), seed=w.seed, profile=run.profile,
                               costs=run.costs, probe=run.probe)


def _drawn(name: str) -> str:
    """A name as matplotlib text: one printable line, a `$` not the start of mathtext."""
    return _line(name).replace("$", r"\$")


def _checks(rows: pd.DataFrame, agent: str) -> pd.DataFrame:
    """Per check: % of the agent's episodes failing it and unknown, % of the gate's failing; most failed first."""
    mine, gate = rows[rows["policy"] == agent], rows[rows["policy"] == GATE]
    out = pd.DataFrame({
        "check": list(CHECKS),
        "fail_pct": [100 * (mine[f"check_{c}"] == "fail").mean() for c in CHECKS],
        "unknown_pct": [100 * (mine[f"check_{c}"] == "unknown").mean() for c in CHECKS],
        "gate_fail_pct": [100 * (gate[f"check_{c}"] == "fail").mean() if len(gate) else float("nan")
                          for c in CHECKS],
    })
    return out.sort_values(["fail_pct", "unknown_pct"], ascending=False, kind="mergesort").reset_index(drop=True)


def _worst(rows: pd.DataFrame, agent: str) -> WorstPair | None:
    """The (twin pair, seed) with the agent's largest mean gap over both halves; ties: corpus order, lower seed."""
    tw = rows[rows["twin_side"].notna() & rows["policy"].isin([agent, GATE])]
    if tw.empty:
        return None
    pairs = tw.pivot_table(index=["unit", "seed"], columns=["policy", "twin_side"], values="gap", aggfunc="first",
                           sort=False)
    mine = pairs[agent]
    loss = (mine["settle"] + mine["fail"]) / 2
    unit, seed = loss.idxmax()  # the first maximum: corpus order, then seed
    ids = tw[(tw["unit"] == unit) & (tw["policy"] == agent) & (tw["seed"] == seed)].set_index("twin_side")["task_id"]
    gate = pairs[GATE].loc[(unit, seed)] if GATE in pairs.columns.get_level_values(0) else None
    return WorstPair(str(unit), int(seed), str(ids["settle"]), str(ids["fail"]), float(loss.max()),
                     float(mine.loc[(unit, seed), "settle"]), float(mine.loc[(unit, seed), "fail"]),
                     float("nan") if gate is None else float((gate["settle"] + gate["fail"]) / 2))


def card_of(run: Run, agent: str, rows: pd.DataFrame | None = None) -> ReportCard:
    """The report card of the policy labelled `agent` in `run` (which must hold the finality gate).

    Args:
        run: the run; its policies include `agent` and the gate.
        agent: the agent's label.
        rows: the run's episode rows, if already evaluated (else `run.evaluate()`).
    """
    labels = run.labels
    if agent not in labels or GATE not in labels:
        raise FinbenchError(f"card_of: the run's policies must include {show(agent)} and {GATE!r}, got {labels}")
    rows = run.evaluate() if rows is None else rows
    t3 = headline.table3(rows).set_index("archetype")[[agent, GATE]].T
    t3 = t3.rename_axis(None, axis=1).rename_axis("policy").reset_index()
    t4 = twins.table4(rows, run) if rows["twin_side"].notna().any() else None
    return ReportCard(agent, run, rows, headline.table2(rows, run), t3, t4, _checks(rows, agent), _worst(rows, agent))


def report_card(agent, *, n_tasks: int = 321, seeds=range(5), n_jobs: int = 1, cache=True, progress: bool = False,
                **fields) -> ReportCard:
    """The report card of `agent` (any policy reference: a class, factory, object or name) beside SPEC's nine.

    Args:
        agent: the policy.
        n_tasks, seeds: the corpus (`make_corpus(PUBLIC_SEED, n_tasks)`) and the fault seeds.
        n_jobs, cache, progress: how to run (as `evaluate`); the nine come from the episode cache when warm.
        fields: any other `Run` field: profile, costs, probe, n_boot, boot_seed, master_seed.

    Raises:
        PolicyError: `agent` is not a policy, or its label is one of the nine's.
    """
    ref = as_ref(agent)
    run = Run.make(n_tasks=n_tasks, seeds=tuple(seeds), policies=[*DEFAULT_POLICIES, ref], n_jobs=n_jobs,
                   cache=cache, progress=progress, **fields)
    return card_of(run, ref.label)
