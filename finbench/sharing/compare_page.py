"""`compare.md` and `compare.html` of a `Comparison` (`finbench.sharing.compare`): the same tables in both,
the HTML with the standing figure of the compared agents on the shared episodes."""
from __future__ import annotations

import pandas as pd

from finbench.sharing import figures as F
from finbench.sharing.page import figure_html, md_text, page, section, table_html, text
from finbench.sharing.report_page import MONEY, PCT, interval

__all__ = ["compare_html", "compare_markdown", "tables"]


def _signed(fmt: str):
    return lambda v: fmt.replace("{:", "{:+").format(v)


def tables(c) -> dict[str, pd.DataFrame]:
    """The comparison's tables as both pages print them, by name."""
    head = pd.DataFrame({"agent": c.headline["name"], "episodes": c.headline["episodes"],
                         "exact %": c.headline["exact_pct"],
                         "exact 95% interval": [interval(ci, PCT) for ci in zip(c.headline["exact_lo"],
                                                                               c.headline["exact_hi"])],
                         "mean gap $": c.headline["mean_gap"],
                         "gap 95% interval": [interval(ci, MONEY) for ci in zip(c.headline["gap_lo"],
                                                                               c.headline["gap_hi"])],
                         "from": c.headline["path"]})
    p = c.pairs
    pairs = pd.DataFrame({"a - b": p["a"] + " - " + p["b"], "episodes": p["episodes"],
                          "mean gap diff $": p["gap_diff"],
                          "95% interval": [interval(ci, "{:+.2f}") for ci in zip(p["gap_lo"], p["gap_hi"])],
                          "exact diff (points)": p["exact_diff_pct"],
                          "95% interval ": [interval(ci, "{:+.1f}") for ci in zip(p["exact_lo"], p["exact_hi"])],
                          "decided differently": p["decided_differently"], "a lower gap": p["a_better"],
                          "b lower gap": p["b_better"]})
    a = c.archetypes
    arche = pd.DataFrame({"a - b": a["a"] + " - " + a["b"], "archetype": a["archetype"], "episodes": a["episodes"],
                          "mean gap diff $": a["gap_diff"],
                          "95% interval": [interval(ci, "{:+.2f}") for ci in zip(a["gap_lo"], a["gap_hi"])],
                          "exact diff (points)": a["exact_diff_pct"],
                          "95% interval ": [interval(ci, "{:+.1f}") for ci in zip(a["exact_lo"], a["exact_hi"])]})
    passk = c.pass_k.rename(columns={n: f"{n} %" for n in c.names})
    verdicts = c.verdicts.rename(columns=lambda col: col.replace("_fail_pct", " fail %").replace("_pct", " %"))
    return {"headline": head, "pairs": pairs, "archetypes": arche, "pass_k": passk, "verdicts": verdicts}


_FORMATS = {"exact %": PCT.format, "mean gap $": MONEY.format, "mean gap diff $": _signed(MONEY),
            "exact diff (points)": _signed(PCT)}


def _fmt(df: pd.DataFrame) -> dict:
    out = {c: _FORMATS[c] for c in df.columns if c in _FORMATS}
    out.update({c: PCT.format for c in df.columns if c.endswith(" %")})
    return out


def _dollars(x: float) -> str:
    return f"-${-x:.2f}" if x < 0 else f"${x:.2f}"


def _wins_lines(c, md: bool) -> list[str]:
    out = []
    for w in c.wins:
        for side, other in (("a", "b"), ("b", "a")):
            me, them = w[side], w[other]
            shown = w[f"{side}_wins"]
            name = md_text if md else (lambda x: x)
            out.append(f"{name(me)} left a lower gap than {name(them)} on {len(shown)} task(s) shown here"
                       + (":" if shown else "."))
            for e in shown:
                out.append(f"- {e['task_id']} ({e['archetype']}), seed {e['seed']}: gap {_dollars(e['gap_a'])} for "
                           f"{name(w['a'])} (ended {e['ended_a']}), {_dollars(e['gap_b'])} for {name(w['b'])} (ended "
                           f"{e['ended_b']})")
                out.append(f"  `{e['draw']}`" if md else e["draw"])
    return out


def _intro(c) -> str:
    return (f"{len(c.names)} results compared on the {c.episodes:,} episodes all of them played (same task, same "
            f"seed); differences are paired, with 95% bootstrap intervals over units (twin pairs resampled "
            f"together, {c.stamp.get('n_boot', 2000)} resamples, seed {c.stamp.get('boot_seed', 0)}).")


def compare_markdown(c) -> str:
    t = tables(c)
    lines = [f"# Comparison: {', '.join(map(md_text, c.names))}", "",
             *(f"- {k}: {md_text(v)}" for k, v in c.stamp.items()), "", _intro(c), ""]
    for title, name in (("The agents", "headline"), ("Paired differences (a - b)", "pairs"),
                        ("By archetype", "archetypes"), ("pass^k", "pass_k"), ("Effect verdicts", "verdicts")):
        df = t[name].copy()
        for col, how in _fmt(df).items():
            df[col] = [how(v) for v in df[col]]
        df = df.rename(columns=md_text)
        for col in df.columns:
            df[col] = [md_text(v) if isinstance(v, str) else v for v in df[col]]  # a name is text, markup escaped
        lines += [f"## {title}", "", df.to_markdown(index=False, disable_numparse=True), ""]
    lines += ["## Where each wins", "", "Episodes where one left a lower gap than the other (by more than half a "
              "cent); each command draws both timelines (left: the first, right: the second).", "",
              *_wins_lines(c, True), ""]
    return "\n".join(lines)


def compare_html(c) -> str:
    t = tables(c)
    standing = [{"policy": n, "exact_pct": r.exact_pct, "exact_ci": [r.exact_lo, r.exact_hi], "mean_gap": r.mean_gap,
                 "gap_ci": [r.gap_lo, r.gap_hi]} for n, r in zip(c.names, c.headline.itertuples())]
    parts = [f"<p>{text(_intro(c))}</p>",
             section("The agents", figure_html(F.standing_figure(standing, set(c.names)), "exact % and mean gap",
                                               "Each agent on the shared episodes, with its 95% interval."),
                     table_html(t["headline"], _fmt(t["headline"]), key="headline")),
             section("Paired differences (a - b)", table_html(t["pairs"], _fmt(t["pairs"]), key="pairs"),
                     "<p class=\"note\">A negative mean gap difference: a lost less money than b.</p>"),
             section("By archetype", table_html(t["archetypes"], _fmt(t["archetypes"]), key="archetypes")),
             section("pass^k", table_html(t["pass_k"], _fmt(t["pass_k"]), key="pass_k")),
             section("Effect verdicts", table_html(t["verdicts"], _fmt(t["verdicts"]), key="verdicts")),
             section("Where each wins", "<pre>" + text("\n".join(_wins_lines(c, False))) + "</pre>")]
    return page(f"Comparison: {', '.join(c.names)}", parts, c.stamp)
