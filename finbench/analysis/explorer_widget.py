"""A live explorer for JupyterLab: choose an arm, a probe mode and filters, step through the matching
episodes, and see each one's timeline and re-graded effect checks (notebook `explore`).

    ex = explorer(n_tasks=60, seeds=range(2))    # an ipywidgets widget: display it
    ex.controls["policy"].value = "sop"          # redraws, as a click would
    ex.row, ex.title, ex.checks                  # what is drawn now
    ex.static()                                  # the same outputs, as plain notebook outputs
    explorer(policy=MyAgent)                     # any policy reference, beside SPEC's nine
    explorer(rows="build/eval/my_agent/rows.csv", policy="my_agent.py:MyAgent")   # a report card's rows

Episodes come from the `Run` that `finbench.analysis.explore.explore_run` makes, so from the same
episode cache as the notebooks, or from rows made elsewhere (`read_rows`), replayed when their corpus
and policy can be rebuilt (`rows_replay`). The Output is filled with rendered outputs (PNG, HTML tables)
rather than captured prints, so it holds the drawing with or without a frontend (papermill, a test).
Writes nothing.
"""
from __future__ import annotations

import base64
import html
import io

import ipywidgets as widgets
import pandas as pd

from finbench.sim import constants as C
from finbench.sim.probe import ProbeMode
from finbench.agents.loading import cause
from finbench.agents.registry import policy_order
from finbench.analysis.explore import (VERDICTS, checks, explore_run, explored_policy, pick_row, read_rows, recorded,
                                       rows_replay, select)

__all__ = ["ARMS", "Explorer", "explorer"]

ARMS = ("all", "none", *(f"only:{f}" for f in C.FAMILIES), *(f"without:{f}" for f in C.FAMILIES))
"""The arm dropdown's choices: SPEC's profile, no faults, and Table VI's one-family arms."""

FILTERS = ("arm", "probe", "policy", "archetype", "verdict")
_DPI = 110  # the widget's PNG: readable in a notebook column, a fraction of the saved figures' bytes


def _options(values, chosen: str) -> list:
    """Dropdown options: the values, plus `chosen` if it is not among them (a knob, an intensity)."""
    values = list(dict.fromkeys(values))
    return values if chosen in values else [*values, chosen]


def _any(values) -> list[tuple[str, str]]:
    """('any', '') then each value: a filter that may match everything."""
    return [("any", ""), *((v, v) for v in values)]


def _png(fig, title: str) -> dict:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                     "text/plain": f"<timeline: {title.splitlines()[0]}>"}}


def _text(text: str) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {"text/plain": text}}


def _table(df: pd.DataFrame) -> dict:
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/html": df.to_html(), "text/plain": df.to_string()}}


def _counted(rows: pd.DataFrame) -> str:
    """'pass 3 · violation 5 · unscorable 0': the matching episodes by verdict."""
    n = rows["verdict"].value_counts()
    return " · ".join(f"{v} {int(n.get(v, 0)):,}" for v in VERDICTS)


class Explorer(widgets.VBox):
    """The explorer widget. `controls` maps arm, probe, policy, archetype, verdict and episode to their
    widgets; setting a value redraws `output` and the counts in `status`.

    What is drawn now: `run`, `all` (every episode of the run or the rows given), `rows` (the
    matching episodes), `row` (the one selected, or None),
    `title` (its timeline's title, None when it is not drawn), `checks` (the six checks as recorded
    and re-graded; as recorded only when it cannot be replayed), `result` (its `EpisodeResult`, with
    the trace), `message` (the text above the drawing) and `draws` (redraws so far). `replay` is how
    rows given to `explorer(rows=...)` are replayed (None for a run of its own).
    """

    def __init__(self, master_seed: int, n_tasks: int | None, seeds, *, arm: str | None, probe: str | None,
                 policy, archetype: str, verdict: str, pick: int, n_jobs: int, cache, rows=None):
        self._runs: dict = {}  # (arm, probe) -> (run, its rows): switching back is instant
        self.replay = None
        if rows is None:
            extra, label = explored_policy("optimistic" if policy is None else policy, "explorer")
            self._spec = dict(master_seed=master_seed, n_tasks=C.DEFAULT_TASKS if n_tasks is None else n_tasks,
                              seeds=tuple(seeds), policy=extra or "", n_jobs=n_jobs, cache=cache)
            arm, probe = "all" if arm is None else arm, "full" if probe is None else probe
            run, df = self._load(arm, probe)  # a bad arm, probe or policy fails here, before any widget
            labels = run.labels
        else:  # rows made elsewhere: one fixed set, replayed as far as it can be rebuilt
            df = read_rows(rows, "explorer")
            labels = policy_order(df["policy"])
            self.replay = rows_replay(df, policy=policy, master_seed=master_seed, n_tasks=n_tasks, arm=arm,
                                      probe=probe, where="explorer")
            label = self.replay.label or (labels[0] if len(labels) == 1 else "")
            arm, probe, run = self.replay.arm, self.replay.probe, self.replay.run
            self._runs[(arm, probe)] = (run, df)
        first = select(df, policy=label, archetype=archetype, verdict=verdict)  # a bad filter fails here
        if len(first):  # a pick that is not an integer, or out of range, fails here too
            pick = int(pick_row(first, pick).name)  # a negative pick counts from the end, as in `pick_row`
        arms, probes = ARMS, [m.name for m in ProbeMode.all()]
        if self.replay is not None:  # the rows' own arm and probe mode: shown, not chosen
            arms, probes = [arm], [probe]
        drop = dict(layout=widgets.Layout(width="auto"), style={"description_width": "initial"})
        self.controls = {
            "arm": widgets.Dropdown(options=_options(arms, arm), value=arm, description="arm", **drop),
            "probe": widgets.Dropdown(options=_options(probes, probe), value=probe, description="probe", **drop),
            "policy": widgets.Dropdown(options=_any(labels), value=label, description="policy", **drop),
            "archetype": widgets.Dropdown(options=_any(C.ARCHETYPES), value=archetype, description="archetype",
                                          **drop),
            "verdict": widgets.Dropdown(options=_any(VERDICTS), value=verdict, description="verdict", **drop),
            "episode": widgets.IntSlider(value=0, min=0, max=0, description="episode", continuous_update=False,
                                         layout=widgets.Layout(width="50%")),
        }
        self.controls["arm"].disabled = self.controls["probe"].disabled = self.replay is not None
        self.status = widgets.HTML()
        self.output = widgets.Output()
        self.run = run
        self.all = df
        self.rows = first
        self.row = self.title = self.checks = self.result = None
        self.message = ""
        self.draws = 0
        self._quiet = False
        super().__init__([widgets.HBox([self.controls[k] for k in FILTERS]),
                          widgets.HBox([self.controls["episode"], self.status]), self.output])
        self._refilter(pick)
        for name in FILTERS:
            self.controls[name].observe(self._on_filter, names="value")
        self.controls["episode"].observe(self._on_episode, names="value")

    # --- data ------------------------------------------------------------------------
    def _load(self, arm: str, probe: str):
        key = (arm, probe)
        if key not in self._runs:
            run = explore_run(self._spec["master_seed"], self._spec["n_tasks"], self._spec["seeds"], arm=arm,
                              probe=probe, policy=self._spec["policy"], n_jobs=self._spec["n_jobs"],
                              cache=self._spec["cache"])
            self._runs[key] = (run, run.evaluate())
        return self._runs[key]

    def selection(self) -> dict:
        """The controls' values: arm, probe, policy, archetype, verdict, episode."""
        return {name: w.value for name, w in self.controls.items()}

    # --- reacting to the controls ------------------------------------------------------
    def _on_filter(self, change) -> None:
        if not self._quiet:
            self._refilter(0)

    def _on_episode(self, change) -> None:
        if not self._quiet:
            self._draw()

    def _refilter(self, pick: int) -> None:
        """New rows for the filters (a new run for a new arm or probe); the episode slider restarts."""
        v = self.selection()
        self.run, df = self._load(v["arm"], v["probe"])
        self.all = df
        self.rows = select(df, policy=v["policy"], archetype=v["archetype"], verdict=v["verdict"])
        slider = self.controls["episode"]
        self._quiet = True  # moving the slider's bounds changes its value: one redraw, below
        try:
            slider.max = max(len(self.rows) - 1, 0)
            slider.value = pick if len(self.rows) else 0
            slider.disabled = len(self.rows) < 2
        finally:
            self._quiet = False
        self._draw()

    def _draw(self) -> None:
        """Replay the selected episode, draw its timeline, re-grade its trace; fill the output (or say
        why the episode cannot be drawn, with its checks as recorded)."""
        v = self.selection()
        filters = ", ".join(f"{k}={v[k]!r}" for k in ("policy", "archetype", "verdict") if v[k]) or "no filter"
        head = f"{len(self.rows):,} of {len(self.all):,} episodes match ({filters}): {_counted(self.rows)}"
        self.row = self.title = self.checks = self.result = None
        if not len(self.rows):
            self._show(None, f"{head}; no episode to draw: widen policy, archetype or verdict")
            return
        row = self.rows.iloc[v["episode"]]
        caption = self.run.caption() if self.replay is None else self.replay.caption
        line = (f"{head}; episode {v['episode']}: {row['task_id']} · {row['policy']} · seed {row['seed']} · "
                f"verdict {row['verdict']}")
        why = "" if self.replay is None else self.replay.cannot.get(row["policy"], "")
        drawn = None if why else self._replayed(row)
        if isinstance(drawn, str):
            why, drawn = drawn, None
        self.row = row
        if drawn is None:
            self.checks = recorded(row)
            self._show([_table(self.checks)], f"{line}\ncannot draw its timeline: {why}\n{caption}")
            return
        self.result, self.checks, self.title, picture = drawn
        self._show([picture, _table(self.checks)], f"{line}\n{caption}")

    def _replayed(self, row):
        """(result, checks, title, PNG) of the row's episode replayed, or why it cannot be (a string)."""
        import matplotlib.pyplot as plt

        from finbench.analysis.timeline_plot import draw_row  # lazy: matplotlib loads only to draw

        figures = set(plt.get_fignums())
        try:
            drawn = draw_row(row, self.run)
            table = checks(row, drawn.result, self.run.corpus[row["task_id"]])
            title = drawn.ax.get_title(loc="left")
            return drawn.result, table, title, _png(drawn.figure, title)
        except Exception as exc:  # noqa: BLE001 - a callback's exception is lost in a frontend: say it instead
            if isinstance(exc, RuntimeError) and str(exc).startswith(("replay of", "re-grading")):
                return (f"replaying it does not reproduce its row ({' '.join(str(exc).split())}); the policy "
                        "that made the row is not the one given, or it does not play the same episode twice")
            return f"replaying it raised {cause(exc, set())}"
        finally:
            for number in set(plt.get_fignums()) - figures:  # the PNG is what is kept: no figure stays open
                plt.close(number)

    def _show(self, outputs, message: str) -> None:
        self.message = message
        self.status.value = f"<small>{html.escape(message.splitlines()[0], quote=False)}</small>"
        self.output.outputs = (_text(message), *(outputs or ()))
        self.draws += 1

    def static(self) -> None:
        """Display the output's contents as ordinary outputs: what a notebook shows without a
        frontend to render the widget (papermill, a static export)."""
        from IPython.display import display

        for out in self.output.outputs:
            display(out["data"], raw=True, metadata=out.get("metadata") or None)


def explorer(master_seed: int = C.PUBLIC_SEED, n_tasks: int | None = None, seeds=range(5), *,
             arm: str | None = None, probe: str | None = None, policy=None, archetype: str = "",
             verdict: str = "", pick: int = 0, n_jobs: int = 1, cache=True, rows=None) -> Explorer:
    """A live explorer of one corpus's episodes: dropdowns for arm (fault profile), probe mode, policy,
    archetype and effect verdict, a slider for the episode among the matching rows, and the episode's
    timeline and effect checks (re-graded from its replayed trace), redrawn on every change, with the
    matching episodes counted by verdict.

    Args:
        master_seed, n_tasks, seeds: the corpus (default `C.DEFAULT_TASKS` tasks) and fault seeds (as
            `Run.make`).
        arm, probe: the first fault profile and probe mode, by name (`explore.profile_named`,
            `explore.probe_named`; default 'all' and 'full'); the dropdowns offer `ARMS` and every probe mode.
        policy: the first policy filter (default 'optimistic'), any policy reference: a label, a name
            registered with `register_policy`, a class, factory or object, or 'PATH.py:NAME'; one outside
            SPEC's nine joins the run beside them (played afresh unless it declares `cache_id`).
        archetype, verdict: the first filters ('' matches anything).
        pick: the first episode drawn, among the matching rows.
        n_jobs, cache: how episodes are evaluated; `cache=True` reads and fills `data/cache`, as the
            notebooks do.
        rows: instead of a run, episode rows made elsewhere: a DataFrame (`evaluate`'s) or the path of
            a CSV file (a report card's `rows.csv`, or its folder). Their stamp, if any, decides the
            corpus, profile, costs and probe mode (else master_seed, n_tasks, arm and probe do); `policy`
            then names the agent that made them (its rows are replayed with it), and the package's and
            registered policies are rebuilt by label. An episode that cannot be replayed is listed with
            its recorded checks and a line saying why it is not drawn. seeds, n_jobs and cache are unused.

    Returns:
        An `Explorer` (an `ipywidgets.VBox`), already drawn.

    Raises:
        FinbenchError: an unknown arm, probe mode, archetype, verdict or policy filter, a bad pick, or
            rows that are not a DataFrame or a readable CSV file of episode rows.
        PolicyError: an unknown policy, or one that cannot be loaded or made.

    Example:
        >>> ex = explorer(n_tasks=9, seeds=range(1), policy="sop", cache=False)
        >>> ex.controls["verdict"].value = "pass"
        >>> ex.row["policy"], ex.checks.loc["verdict", "re-graded"]
        ('sop', 'pass')
    """
    return Explorer(master_seed, n_tasks, seeds, arm=arm, probe=probe, policy=policy, archetype=archetype,
                    verdict=verdict, pick=pick, n_jobs=n_jobs, cache=cache, rows=rows)
