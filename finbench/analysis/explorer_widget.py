"""A live explorer for JupyterLab: choose an arm, a probe mode and filters, step through the matching
episodes, and see each one's timeline and re-graded effect checks (notebook `explore`).

    ex = explorer(n_tasks=60, seeds=range(2))    # an ipywidgets widget: display it
    ex.controls["policy"].value = "sop"          # redraws, as a click would
    ex.row, ex.title, ex.checks                  # what is drawn now
    ex.static()                                  # the same outputs, as plain notebook outputs

Episodes come from the `Run` that `finbench.analysis.explore.explore_run` makes, so from the same
episode cache as the notebooks. The Output is filled with rendered outputs (PNG, HTML tables)
rather than captured prints, so it holds the drawing with or without a frontend (papermill, a test).
Writes nothing.
"""
from __future__ import annotations

import base64
import io

import ipywidgets as widgets
import pandas as pd

from finbench.sim import constants as C
from finbench.sim.probe import ProbeMode
from finbench.analysis.explore import VERDICTS, checks, explore_run, pick_row, select

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


class Explorer(widgets.VBox):
    """The explorer widget. `controls` maps arm, probe, policy, archetype, verdict and episode to their
    widgets; setting a value redraws `output`.

    What is drawn now: `run`, `rows` (the matching episodes), `row` (the one drawn, or None),
    `title` (its timeline's title), `checks` (the six checks as recorded and re-graded),
    `result` (its `EpisodeResult`, with the trace), `message` (the text above the drawing) and
    `draws` (redraws so far).
    """

    def __init__(self, master_seed: int, n_tasks: int, seeds, *, arm: str, probe: str, policy: str,
                 archetype: str, verdict: str, pick: int, n_jobs: int, cache):
        self._spec = dict(master_seed=master_seed, n_tasks=n_tasks, seeds=tuple(seeds), policy=policy,
                          n_jobs=n_jobs, cache=cache)
        self._runs: dict = {}  # (arm, probe) -> (run, its rows): switching back is instant
        run, df = self._load(arm, probe)  # a bad arm, probe or policy fails here, before any widget
        first = select(df, policy=policy, archetype=archetype, verdict=verdict)  # and a bad filter
        if len(first):  # a pick that is not an integer, or out of range, fails here too
            pick = int(pick_row(first, pick).name)  # a negative pick counts from the end, as in `pick_row`
        probes = [m.name for m in ProbeMode.all()]
        drop = dict(layout=widgets.Layout(width="auto"), style={"description_width": "initial"})
        self.controls = {
            "arm": widgets.Dropdown(options=_options(ARMS, arm), value=arm, description="arm", **drop),
            "probe": widgets.Dropdown(options=_options(probes, probe), value=probe, description="probe", **drop),
            "policy": widgets.Dropdown(options=_any(run.labels), value=policy, description="policy", **drop),
            "archetype": widgets.Dropdown(options=_any(C.ARCHETYPES), value=archetype, description="archetype",
                                          **drop),
            "verdict": widgets.Dropdown(options=_any(VERDICTS), value=verdict, description="verdict", **drop),
            "episode": widgets.IntSlider(value=0, min=0, max=0, description="episode", continuous_update=False,
                                         layout=widgets.Layout(width="50%")),
        }
        self.status = widgets.HTML()
        self.output = widgets.Output()
        self.run = run
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
        """Replay the selected episode, draw its timeline, re-grade its trace; fill the output."""
        import matplotlib.pyplot as plt

        from finbench.analysis.timeline_plot import draw_row  # lazy: matplotlib loads only to draw

        v = self.selection()
        filters = ", ".join(f"{k}={v[k]!r}" for k in ("policy", "archetype", "verdict") if v[k]) or "no filter"
        head = f"{len(self.rows):,} of {self.run.episodes:,} episodes match ({filters})"
        if not len(self.rows):
            self._show(None, f"{head}: no episode to draw; widen policy, archetype or verdict")
            return
        row = self.rows.iloc[v["episode"]]
        drawn = draw_row(row, self.run)
        try:
            table = checks(row, drawn.result, self.run.corpus[row["task_id"]])
            self.row, self.result, self.checks = row, drawn.result, table
            self.title = drawn.ax.get_title(loc="left")
            picture = _png(drawn.figure, self.title)
        finally:
            plt.close(drawn.figure)  # the PNG is what is kept: redraws leave no open figures
        self._show([picture, _table(table)],
                   f"{head}; episode {v['episode']}: {row['task_id']} · {row['policy']} · seed {row['seed']} · "
                   f"verdict {row['verdict']}\n{self.run.caption()}")

    def _show(self, outputs, message: str) -> None:
        if outputs is None:
            self.row = self.title = self.checks = self.result = None
        self.message = message
        self.status.value = f"<small>{message.splitlines()[0]}</small>"
        self.output.outputs = (_text(message), *(outputs or ()))
        self.draws += 1

    def static(self) -> None:
        """Display the output's contents as ordinary outputs: what a notebook shows without a
        frontend to render the widget (papermill, a static export)."""
        from IPython.display import display

        for out in self.output.outputs:
            display(out["data"], raw=True, metadata=out.get("metadata") or None)


def explorer(master_seed: int = C.PUBLIC_SEED, n_tasks: int = C.DEFAULT_TASKS, seeds=range(5), *,
             arm: str = "all", probe: str = "full", policy: str = "optimistic", archetype: str = "",
             verdict: str = "", pick: int = 0, n_jobs: int = 1, cache=True) -> Explorer:
    """A live explorer of one corpus's episodes: dropdowns for arm (fault profile), probe mode, policy,
    archetype and effect verdict, a slider for the episode among the matching rows, and the episode's
    timeline and effect checks (re-graded from its replayed trace), redrawn on every change.

    Args:
        master_seed, n_tasks, seeds: the corpus and fault seeds (as `Run.make`).
        arm, probe: the first fault profile and probe mode, by name (`explore.profile_named`,
            `explore.probe_named`); the dropdowns offer `ARMS` and every probe mode.
        policy: the first policy filter; a label outside SPEC's nine (`sop[patience=60]`) joins the run.
        archetype, verdict: the first filters ('' matches anything).
        pick: the first episode drawn, among the matching rows.
        n_jobs, cache: how episodes are evaluated; `cache=True` reads and fills `data/cache`, as the
            notebooks do.

    Returns:
        An `Explorer` (an `ipywidgets.VBox`), already drawn.

    Raises:
        FinbenchError: an unknown arm, probe mode, archetype, verdict or policy filter, or a bad pick.
        PolicyError: an unknown policy.

    Example:
        >>> ex = explorer(n_tasks=9, seeds=range(1), policy="sop", cache=False)
        >>> ex.controls["verdict"].value = "pass"
        >>> ex.row["policy"], ex.checks.loc["verdict", "re-graded"]
        ('sop', 'pass')
    """
    return Explorer(master_seed, n_tasks, seeds, arm=arm, probe=probe, policy=policy, archetype=archetype,
                    verdict=verdict, pick=pick, n_jobs=n_jobs, cache=cache)
