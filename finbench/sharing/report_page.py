"""A card's `report.html`: the report card as one self-contained page (`finbench.sharing.page`).

    html = report_html(card.as_json(), card.markdown(), timeline_png)

Its numbers are card.json's: the figures are drawn from it (`finbench.sharing.figures`) and the tables
beside them print it; below them the whole of report.md follows, its tables included.
"""
from __future__ import annotations

import re

import pandas as pd

from finbench.sharing import figures as F
from finbench.sharing.page import figure_html, markdown_html, page, png_html, section, table_html, text

__all__ = ["PCT", "MONEY", "interval", "report_html", "standing_table"]

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
PCT, MONEY = "{:.1f}", "{:.2f}"
"""How a page prints a percentage and an amount of dollars (as report.md does)."""


def interval(ci, fmt: str) -> str:
    """`[lo, hi]` as a page prints it; '–' for none."""
    if not ci or ci[0] is None or ci[1] is None:
        return "–"
    return f"[{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def standing_table(table2: list[dict], k) -> pd.DataFrame:
    """Table II's entries of a card (or of several) as a page prints them."""
    return pd.DataFrame([{
        "policy": e["policy"], "episodes": e["episodes"], "exact %": e["exact_pct"],
        "exact 95% interval": interval(e["exact_ci"], PCT), "mean gap $": e["mean_gap"],
        "gap 95% interval": interval(e["gap_ci"], MONEY), f"pass^{k} %": e["pass_k_pct"],
        "premature %": e["premature_pct"], "violation %": e["violation_pct"], "unscorable %": e["unscorable_pct"],
        "gap - gate $": e.get("diff_to_gate"), "gap - gate interval": interval(e.get("diff_ci"), MONEY),
    } for e in table2])


def _formats(k) -> dict:
    pct = PCT.format
    return {"exact %": pct, "mean gap $": MONEY.format, f"pass^{k} %": pct, "premature %": pct,
            "violation %": pct, "unscorable %": pct, "gap - gate $": "+.2f"}


def report_html(doc: dict, markdown: str, timeline_png: bytes | None) -> str:
    """The page of a card: `doc` its card.json, `markdown` its report.md, `timeline_png` the worst twin pair's
    timeline (None without twin pairs)."""
    agent, k = doc["agent"], doc["headline"]["k"]
    warnings = "".join(f"<p class=\"warning\"><strong>Warning.</strong> {text(w)}</p>" for w in doc["warnings"])
    source = doc["source"]["text"] if isinstance(doc.get("source"), dict) else ""
    parts = [warnings, f"<p>{text(_sentence(doc))}</p>" + (f"<p class=\"note\">Its episodes: {text(source)}.</p>"
                                                             if source else "")]
    parts.append(section(
        "Standing beside the nine",
        figure_html(F.standing_figure(doc["table2"], {agent}), "exact % and mean gap with intervals, per policy",
                    f"{agent} (blue) beside the nine; the gate in orange, the privileged oracle hollow."),
        table_html(standing_table(doc["table2"], k), _formats(k), mine=agent, key="table2"),
        "<p class=\"note\">Exact % and mean gap with 95% bootstrap intervals over units (twin pairs resampled "
        "together); gap - gate: the mean-gap difference to the finality gate on a shared resample.</p>",
        anchor="standing"))
    arche = pd.DataFrame([{"archetype": a["archetype"], "episodes": a["episodes"], f"{agent} exact %": a["exact_pct"],
                           "gate exact %": a["gate_exact_pct"], f"{agent} mean gap $": a["mean_gap"],
                           "gate mean gap $": a["gate_mean_gap"], "diff $": a["diff"]} for a in doc["archetypes"]])
    parts.append(section(
        "By archetype, against the gate",
        figure_html(F.archetype_figure(doc["archetypes"], agent), "exact % and mean gap by archetype",
                    f"{agent} (blue) and the finality gate (orange) on the same episodes."),
        table_html(arche, {f"{agent} exact %": PCT.format, "gate exact %": PCT.format,
                           f"{agent} mean gap $": MONEY.format, "gate mean gap $": MONEY.format, "diff $": "+.2f"},
                   key="archetypes"), anchor="archetypes"))
    use = pd.DataFrame([{"": f"{what} ({who})", **{q: doc["usage"][key][what][q]
                                                   for q in ("mean", "p10", "median", "p90", "max")}}
                        for what in ("calls", "ticks") for key, who in (("agent", agent), ("gate", F.GATE))])
    parts.append(section(
        "Calls and ticks",
        figure_html(F.usage_figure(doc["usage"], agent), "calls and ticks per episode",
                    "Per episode (ticks from the hand-over to the case's end): the bar spans the 10th to the 90th "
                    "percentile, the thick line is the median, the diamond the mean, the thin line min to max."),
        table_html(use, dict.fromkeys(("mean", "p10", "median", "p90", "max"), PCT.format), key="usage"),
        anchor="usage"))
    if timeline_png is not None and doc.get("worst_pair"):
        w = doc["worst_pair"]
        parts.append(section(
            "The worst twin pair against the gate",
            png_html(timeline_png, "the worst twin pair's timelines",
                     f"{w['settle']} and {w['fail']}, seed {w['seed']}: {agent} (left) loses "
                     f"${w['loss']:.2f} a case on the pair, the gate ${w['gate_loss']:.2f}."),
            f"<details><summary>The command that draws it</summary><pre>{text(w['draw'])}</pre></details>",
            anchor="worst-pair"))
    body = markdown.split("\n## ", 1)[1] if "\n## " in markdown else markdown  # report.md but its title and stamp
    body = _IMAGE.sub("*(its timelines are drawn above)*", body)  # the page fetches nothing, not even a file beside it
    parts.append(section("The card in full (report.md)", markdown_html("## " + body), anchor="card"))
    return page(f"Report card: {agent}", parts, doc["stamp"])


def _sentence(doc: dict) -> str:
    h, agent = doc["headline"], doc["agent"]
    a, g = h["agent"], h["gate"]
    diff = "" if a.get("diff_to_gate") is None else (
        f"; mean gap minus the gate's {a['diff_to_gate']:+.2f} {interval(a.get('diff_ci'), '{:+.2f}')}")
    return (f"{agent}: exact {PCT.format(a['exact_pct'])}% {interval(a['exact_ci'], PCT)}, mean gap "
            f"${MONEY.format(a['mean_gap'])} {interval(a['gap_ci'], MONEY)} over {a['episodes']:,} episodes "
            f"(the gate: exact {PCT.format(g['exact_pct'])}%, mean gap ${MONEY.format(g['mean_gap'])}){diff}.")
