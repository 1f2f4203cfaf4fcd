"""One agent's report card beside SPEC's nine: what `python -m finbench eval` computes and writes.

    card = report_card(Patient, n_tasks=30, seeds=range(2))   # or card_of(run, "patient") for any Run
    card.write("build/eval/patient")    # report.md, report.html, card.json, rows.csv, worst_twin_pair.png (+ .pdf)
    print(card.summary())               # the one-screen summary the command prints

The card reads the experiment layer's own tables (Table II and III and the gap by archetype from `headline`,
Table IV from `twins`, the split of `exactly_one_effect` from `effects`), so its numbers are the notebooks'
numbers for the same run; what it adds (invalid calls, how cases ended, calls and ticks, pass^k for every k,
its losses against the gate) is `analysis.card_tables`; `card.json` holds all of it (docs/card.md), and
`report.html` shows it (`sharing.report_page`). At the top: it imports the experiments.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

import finbench
from finbench.agents.registry import DEFAULT_POLICIES, as_ref
from finbench.analysis import card_tables as T
from finbench.errors import FinbenchError, show
from finbench.experiments import effects, headline, twins
from finbench.files import atomic_write
from finbench.sharing.page import md_text as _md, one_line as _line
from finbench.running.run import Run

__all__ = ["ReportCard", "WorstPair", "card_of", "report_card"]

GATE = headline.GATE
FIGURE = "worst_twin_pair"
"""The stem of the worst twin pair's timeline (PNG and PDF) in the card's folder."""
ENDS = {"ship": "ship", "refund": "refund", "write_off": "write off", "escalate": "escalate", "close": "close",
        "budget_or_horizon": "budget or horizon"}

def _code(text: str) -> list[str]:
    """A fenced code block holding `text` (a fence longer than any run of backticks in it)."""
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return [fence + "sh", text, fence]


@dataclass(frozen=True)
class WorstPair:
    """The twin pair (and seed) on which the agent's paired loss most exceeds the gate's on the same pair."""

    unit: str
    seed: int
    settle: str
    fail: str
    loss: float
    """The agent's mean gap $ over the two halves."""
    settle_gap: float
    fail_gap: float
    gate_loss: float
    gate_settle_gap: float = float("nan")
    gate_fail_gap: float = float("nan")
    excess: float = float("nan")
    """`loss - gate_loss`: what the agent lost on this pair beyond the gate."""
    draw: str = ""
    """The shell line that draws this pair's timelines (the agent and the gate)."""


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
        worst: the worst twin pair against the gate, or None without twin pairs.
        gaps: mean gap $ by archetype: `archetype, episodes, agent, gate, diff` (`headline.table3_gap`).
        effects: the effects table's rows of the agent and the gate (`effects.effects_table`).
        facts: `card_tables.card_facts` (invalid calls, dispositions, usage, pass^k, examples, source).
        meta: the stamp's entries beyond the run's: agent, package, commit (and task_ids).
    """

    agent: str
    run: Run
    rows: pd.DataFrame
    table2: pd.DataFrame
    table3: pd.DataFrame
    table4: pd.DataFrame | None
    checks: pd.DataFrame
    worst: WorstPair | None
    gaps: pd.DataFrame
    effects: pd.DataFrame
    facts: dict
    meta: dict

    @property
    def own_rows(self) -> pd.DataFrame:
        """The agent's episode rows (what `rows.csv` holds)."""
        return self.rows[self.rows["policy"] == self.agent].reset_index(drop=True)

    def stamp(self) -> dict:
        """The run's stamp with the agent, the package version and the commit named."""
        return self.run.stamp(**{**self.meta, "commit": self.meta.get("commit") or "none (not a git checkout)"})

    def row(self) -> pd.Series:
        """The agent's Table II row."""
        return self.table2.set_index("policy").loc[self.agent]

    # --- rendering ---------------------------------------------------------------------
    def warnings(self, md: bool = False) -> list[str]:
        """What heads the card: invalid calls (or calls naming another order) above `INVALID_WARN_PCT`."""
        f, q = self.facts["invalid_calls"], (_md if md else _line)
        out = []
        if f["warn"]:
            top = "; ".join(f"\"{q(m['message'])}\" {m['count']:,}" for m in f["messages"][:3])
            out.append(f"Invalid calls: {f['invalid']:,} of its {f['calls']:,} calls ({f['invalid_pct']:.1f}%), in "
                       f"{f['episodes_with_invalid']:,} of {f['episodes']:,} episodes; each was answered with an "
                       f"error and still cost a call of the budget and a tick. Most frequent: {top}.")
        if f["warn_other_order"]:
            out.append(f"Calls on the customer's other, completed order: {f['other_order']:,} of {f['calls']:,} "
                       f"({f['other_order_pct']:.1f}%); acting on it is an unrelated-state violation.")
        return out

    def markdown(self) -> str:
        """report.md: warnings, the stamp, Table II beside the nine, how cases ended, calls and ticks, invalid
        calls, the archetypes, pass^k, the twin pairs, the checks, the worst pair and episodes against the gate."""
        a, k, f = _md(self.agent), self.run.k, self.facts  # the agent's name as the user gave it, never as markup
        t2 = headline.table2_markdown(self.table2)
        t2["policy"] = [f"**{a}**" if p == self.agent else _md(p) for p in t2["policy"]]
        t3 = self.table3.assign(policy=self.table3["policy"].map(_md))
        lines = [f"# Report card: {a}", ""]
        lines += [line for w in self.warnings(md=True) for line in (f"> **Warning.** {w}", "")]
        lines += [*(f"- {key}: {_md(value)}" for key, value in self.stamp().items()),
                  f"- its episodes: {_md(f['source']['text'])}", "",
                  *([] if f.get("model") is None else
                    ["## The model", "", *("- " + _md(line[2:]) for line in T.model_lines(f["model"])), ""]),
                  "## In one paragraph", "", self._headline(a), "",
                  f"## Table II: {a} beside the nine", "", t2.to_markdown(index=False), "",
                  f"Exact % and mean gap with 95% bootstrap intervals over units; pass^{k}: exact on all {k} seeds; "
                  "premature: an irreversible action before the outcome exists; gap - gate: the mean-gap "
                  "difference to the finality gate on a shared resample; violation and unscorable: the "
                  "effect-level grader's verdicts.", ""]
        lines += ["## How its cases ended", "", self._ends().to_markdown(index=False, floatfmt=".1f"), "",
                  "Budget or horizon: closed without a disposition of its own when the call budget "
                  f"({self.run.costs.step_budget} calls) ran out or the clock reached the horizon. "
                  + "E" + self._fees()[1:], ""]
        lines += ["## Calls and ticks used", "", self._usage().to_markdown(index=False, floatfmt=".1f"), "",
                  "Per episode; ticks from the hand-over to the case's end.", ""]
        lines += ["## Invalid calls", "", *self._invalid_md(), ""]
        lines += ["## By archetype", "", "Exact %:", "", t3.to_markdown(index=False, floatfmt=".1f"), "",
                  "Mean gap $ (diff: the agent's minus the gate's):", "",
                  self.gaps.rename(columns={"agent": a, "gate": GATE}).to_markdown(index=False, floatfmt=".2f"), ""]
        lines += [f"## pass^k for k = 1..{len(self.run.seeds)}", "",
                  pd.DataFrame(f["pass_k"]).astype({"k": str}).rename(columns={"agent": f"{a} %", "gate": f"{GATE} %"})
                  .to_markdown(index=False, floatfmt=".1f", colalign=("right", "right", "right")), "",
                  "pass^k: the chance that k seeds drawn from a task's are all exact, averaged over tasks.", ""]
        lines += ["## Twin pairs (Table IV)", ""]
        if self.table4 is None:
            lines += ["The corpus holds no twin pair (give more tasks).", ""]
        else:
            t4 = twins.table4_markdown(self.table4)
            t4 = t4[t4["policy"].isin([self.agent, GATE])]
            lines += [t4.assign(policy=t4["policy"].map(_md)).to_markdown(index=False), "", self._twin_line(a), ""]
        lines += ["## Effect checks it fails most", "", self._checks_markdown(a), "", *self._effects_md(a), ""]
        lines += ["## Its worst twin pair against the gate", ""]
        w = self.worst
        if w is None:
            lines += ["No twin pair in the corpus.", ""]
        else:
            lines += [f"{w.unit} (tasks {w.settle} settling, {w.fail} failing), seed {w.seed}: the largest paired "
                      f"loss beyond the gate's on the same pair. Paired loss ${w.loss:.2f} (settle half "
                      f"${w.settle_gap:.2f}, fail half ${w.fail_gap:.2f}); the gate's ${w.gate_loss:.2f} (settle "
                      f"${w.gate_settle_gap:.2f}, fail ${w.gate_fail_gap:.2f}): {w.excess:+.2f} against the gate. "
                      f"Left: {a}; right: the gate; top: the capture settles; bottom: it fails.", "",
                      f"![worst twin pair]({FIGURE}.png)", "", *_code(w.draw), ""]
        lines += ["## Where it loses most against the gate", "", *self._examples_md(a)]
        return "\n".join(lines)

    def _ends(self) -> pd.DataFrame:
        d = self.facts["dispositions"]
        return pd.DataFrame([{"ended by": label, f"{_md(self.agent)} %": d["agent"][key]["pct"],
                              f"{GATE} %": d["gate"][key]["pct"]} for key, label in ENDS.items()])

    def _fees(self) -> str:
        d = self.facts["dispositions"]
        a, g = d["agent"]["escalation_fees"], d["gate"]["escalation_fees"]
        return (f"escalation fees paid: ${a['total']:,.2f} over {a['episodes']:,} escalated episodes "
                f"(${a['per_episode']:.2f} per episode); the gate's ${g['total']:,.2f} over {g['episodes']:,} "
                f"(${g['per_episode']:.2f}).")

    def _usage(self) -> pd.DataFrame:
        u = self.facts["usage"]
        return pd.DataFrame([{"": f"{what} ({who})", **{k: u[key][what][k] for k in ("mean", "p10", "median",
                                                                                   "p90", "max")}}
                             for what in ("calls", "ticks") for key, who in (("agent", _md(self.agent)),
                                                                             ("gate", GATE))])

    def _invalid_md(self) -> list[str]:
        f = self.facts["invalid_calls"]
        out = [f"{f['invalid']:,} of its {f['calls']:,} calls ({f['invalid_pct']:.1f}%) were invalid, in "
               f"{f['episodes_with_invalid']:,} of {f['episodes']:,} episodes; {f['other_order']:,} "
               f"({f['other_order_pct']:.1f}%) were on the customer's other, completed order. Counted by the "
               "environment as it answered them (docs/card.md)."]
        if f["messages"]:
            out += ["", pd.DataFrame([{"message": _md(m["message"]), "calls": m["count"],
                                       "% of calls": m["pct_of_calls"]} for m in f["messages"]])
                    .to_markdown(index=False, floatfmt=".1f")]
        return out

    def _effects_md(self, a: str) -> list[str]:
        e = self.effects.set_index("policy")
        cols = {"fail_exactly_one_effect_pct": "exactly_one_effect fails %", "captured_twice_pct": "captured twice %",
                "zero_lost_pct": "never captured, payment lost %", "zero_recoverable_pct": "never captured, "
                "recoverable %"}
        t = e.loc[[self.agent, GATE], list(cols)].rename(columns=cols).rename(index={self.agent: a})
        return ["exactly_one_effect, split:", "", t.reset_index().to_markdown(index=False, floatfmt=".1f"), "",
                "A payment lost for good (the original capture and a replacement would both fail) is never "
                "captured in any right play, so exactly_one_effect fails there for every policy, the oracle "
                "included; read the check as captured twice plus never captured, not as double charging."]

    def _examples_md(self, a: str) -> list[str]:
        ex = self.facts["examples"]
        if not ex:
            return ["On no episode does it lose more than the gate (same task and seed).", ""]
        out = [f"The {len(ex)} episodes (same task and seed) where its gap most exceeds the gate's; each command "
               f"draws both timelines ({a} left, the gate right) into a PNG:", ""]
        for i, e in enumerate(ex, 1):
            out += [f"{i}. {e['task_id']} ({e['archetype']}), seed {e['seed']}: gap ${e['gap']:.2f} (ended by "
                    f"{_end(e['ended'])}) against the gate's ${e['gate_gap']:.2f} ({_end(e['gate_ended'])}), "
                    f"{e['loss_vs_gate']:+.2f}.", "", *_code(e["draw"]), ""]
        what = {"AGENT": "AGENT with your policy (its class, factory or object)",
                "CORPUS": "CORPUS with the run's corpus"}
        if self.facts["placeholders"]:
            out += [f"In the commands, replace {' and '.join(what[p] for p in self.facts['placeholders'])}.", ""]
        return out

    def headline(self) -> str:  # one sentence: accuracy, money, effect violations, difference to the gate
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
        return self.checks.rename(columns={"fail_pct": f"{a} fail %", "unknown_pct": f"{a} unknown %",
                                           "gate_fail_pct": "gate fail %"}).to_markdown(index=False, floatfmt=".1f")

    def summary(self) -> str:
        """The one-screen summary the command prints (warnings first, when there are any)."""
        t2, a, k, run, f = self.table2, self.agent, self.run.k, self.run, self.facts
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
        lines = [*(f"WARNING: {w}" for w in self.warnings()), *([""] if self.warnings() else []),
                 head, "", table, "", self.headline()]
        if self.table4 is not None:
            lines.append(self._twin_line(_line(a)))
        verdicts = self.own_rows["verdict"].value_counts(normalize=True)
        lines.append("effect verdicts: " + ", ".join(f"{v} {100 * verdicts.get(v, 0.0):.1f}%"
                                                     for v in ("pass", "violation", "unscorable")))
        failing = self.checks[self.checks["fail_pct"] > 0]
        lines.append("checks failed most: " + (", ".join(f"{r.check} {r.fail_pct:.1f}% (gate {r.gate_fail_pct:.1f}%)"
                                                        for r in failing.head(3).itertuples()) or "none"))
        e = self.effects.set_index("policy")
        lines.append("exactly_one_effect: " + "; ".join(
            f"{_line(p) if p == a else 'gate'} captured twice {e.loc[p, 'captured_twice_pct']:.1f}%, never captured "
            f"{e.loc[p, 'captured_zero_pct']:.1f}% (payment lost for good {e.loc[p, 'zero_lost_pct']:.1f}%)"
            for p in (a, GATE)))
        inv, d = f["invalid_calls"], f["dispositions"]
        lines.append(f"invalid calls: {inv['invalid']:,} of {inv['calls']:,} ({inv['invalid_pct']:.1f}%); ended: "
                     + ", ".join(f"{label} {d['agent'][key]['pct']:.1f}%" for key, label in ENDS.items()
                                 if d["agent"][key]["episodes"]) + "; " + self._fees())
        u = f["usage"]["agent"]
        lines.append(f"calls per episode: mean {u['calls']['mean']:.1f} (median {u['calls']['median']:.0f}, 90th "
                     f"percentile {u['calls']['p90']:.0f}); ticks used: mean {u['ticks']['mean']:.1f} (median "
                     f"{u['ticks']['median']:.0f}, 90th percentile {u['ticks']['p90']:.0f})")
        lines.append("pass^k: " + ", ".join(f"k={p['k']} {p['agent']:.1f}% (gate {p['gate']:.1f}%)"
                                            for p in f["pass_k"]))
        if self.worst is not None:
            w = self.worst
            lines.append(f"worst twin pair against the gate: {w.unit} seed {w.seed}, paired loss ${w.loss:.2f} (gate "
                         f"${w.gate_loss:.2f}, {w.excess:+.2f})")
        if f["examples"]:
            lines.append("loses most against the gate: " + "; ".join(
                f"{x['task_id']} seed {x['seed']} {x['loss_vs_gate']:+.2f}" for x in f["examples"]))
        lines.append(f"its episodes: {f['source']['text']}")
        m = f.get("model")
        if m is not None:
            lines.append(f"model: {m['requests']:,} requests ({m['retries']:,} retried, {m['rate_limited']:,} "
                         f"answered 429/503), tokens {m['input_tokens']:,} in / {m['output_tokens']:,} out"
                         + (" (estimated)" if m["tokens_estimated"] else "") + ", latency median "
                         + ("-" if m["latency_median_s"] is None else f"{m['latency_median_s']:.3f} s, 90th "
                            f"percentile {m['latency_p90_s']:.3f} s"))
        return "\n".join(lines)

    def as_json(self) -> dict:
        """card.json's content (docs/card.md): every number of report.md, none of its wording."""
        return T.card_json(self)

    def write(self, out: str | Path) -> list[Path]:
        """Write report.md, report.html, card.json, rows.csv and the worst twin pair's timeline into `out`; the
        paths written."""
        from finbench.analysis.publish import publish  # lazy: matplotlib loads only to draw

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        if self.worst is not None:
            paths += publish(self.figure(), FIGURE, self.run, to=out,
                             caption_extra=f"{_drawn(self.agent)} (left) and {GATE} (right), seed {self.worst.seed}")
        else:  # an earlier card's timeline in this folder is not this card's
            for old in (out / f"{FIGURE}.png", out / f"{FIGURE}.pdf"):
                old.unlink(missing_ok=True)
        header = "".join(f"# {' '.join(f'{k}: {v}'.splitlines())}\n" for k, v in self.stamp().items())
        body = self.own_rows.to_csv(index=False, lineterminator="\n", float_format="%.10g")
        paths.insert(0, atomic_write(out / "rows.csv", header + body))
        text = json.dumps(self.as_json(), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        paths.insert(0, atomic_write(out / "card.json", text))
        paths.insert(0, atomic_write(out / "report.md", markdown := self.markdown()))
        from finbench.sharing.report_page import report_html  # lazy: matplotlib loads only to draw
        png = (out / f"{FIGURE}.png").read_bytes() if self.worst is not None else None
        paths.insert(1, atomic_write(out / "report.html", report_html(json.loads(text), markdown, png)))
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


def _end(outcome: str) -> str:
    return "the budget" if outcome == "budget" else "the horizon" if outcome == "horizon" else ENDS[outcome]


def _drawn(name: str) -> str:
    """A name as matplotlib text: one printable line, a `$` not the start of mathtext."""
    return _line(name).replace("$", r"\$")


def _gaps(rows: pd.DataFrame, agent: str) -> pd.DataFrame:
    """Mean gap $ by archetype, the agent's beside the gate's (`headline.table3_gap`), with the agent's episodes."""
    t = headline.table3_gap(rows)[["archetype", agent, GATE]].rename(columns={agent: "agent", GATE: "gate"})
    n = rows[rows["policy"] == agent].groupby("archetype").size()
    return t.assign(episodes=t["archetype"].map(n).fillna(0).astype(int), diff=t["agent"] - t["gate"])[
        ["archetype", "episodes", "agent", "gate", "diff"]]


def _meta(run: Run, agent: str) -> dict:
    meta = {"agent": agent, "package": finbench.__version__, "commit": T.commit()}
    ms = run.corpus.master_seed
    if ms is None or T.corpus_expr(run.corpus) != f"fb.make_corpus({ms}, {len(run.corpus)})":
        meta["task_ids"] = ",".join(t.task_id for t in run.corpus.tasks)  # not make_corpus(master_seed, tasks)
    return meta


def card_of(run: Run, agent: str, rows: pd.DataFrame | None = None, spec: str | None = None,
            model: dict | None = None) -> ReportCard:
    """The report card of the policy labelled `agent` in `run` (which must hold the finality gate).

    Args:
        run: the run; its policies include `agent` and the gate.
        agent: the agent's label.
        rows: the run's episode rows, if already evaluated (else `run.evaluate()`).
        spec: how a command names the agent (PATH.py:NAME or module:NAME), for the commands that draw its
            episodes; None: a built-in's label, else the placeholder AGENT.
        model: a language model's facts (`eval_cli.model_facts`): card.json's `model` object (docs/card.md).
    """
    labels = run.labels
    if agent not in labels or GATE not in labels:
        raise FinbenchError(f"card_of: the run's policies must include {show(agent)} and {GATE!r}, got {labels}")
    rows = run.evaluate() if rows is None else rows
    t3 = headline.table3(rows).set_index("archetype")[[agent, GATE]].T
    t3 = t3.rename_axis(None, axis=1).rename_axis("policy").reset_index()
    t4 = twins.table4(rows, run) if rows["twin_side"].notna().any() else None
    facts = T.card_facts(rows, run, agent, GATE, spec)
    if model is not None:
        facts["model"] = model
        facts["source"] = T.model_source(rows, agent, model)
    worst = facts["worst_pair"]
    eff = effects.effects_table(rows[rows["policy"].isin([agent, GATE])], run.corpus)
    lost = rows[rows["policy"] == agent]["task_id"].map({t.task_id: effects.payment_lost(t) for t in run.corpus})
    facts["lost_for_good_pct"] = 100 * float(lost.mean()) if len(lost) else math.nan
    return ReportCard(agent, run, rows, headline.table2(rows, run), t3, t4, T.checks_table(rows, agent, GATE),
                      None if worst is None else WorstPair(**worst), _gaps(rows, agent), eff, facts, _meta(run, agent))


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
