"""One episode on one time axis (finbench.analysis.timeline): the drawing replays `run_episode` exactly, shows every
lane, marks every fault the world recorded, and never changes a result."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import finbench as fb  # noqa: E402
from finbench.sim import constants as C  # noqa: E402
from finbench.sim.env import FinalityEnv  # noqa: E402
from finbench.sim.play import play
from finbench.analysis.plotting import apply_style, save  # noqa: E402
from finbench.agents.registry import as_ref  # noqa: E402
from finbench.analysis.timeline import LANES, episode_timeline, pick_twin_pair  # noqa: E402
from finbench.analysis.timeline_plot import draw_row, draw_timeline, timeline_figure  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    apply_style()
    return fb.make_corpus(n_tasks=60)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _first(corpus, archetype):
    return next(t for t in corpus.tasks if t.archetype == archetype)


class ReadTwiceThenShip:
    """A user's policy: reads the processor twice, then ships."""

    name = "read-twice"

    def begin(self, brief):
        self.order, self.n = brief["order_id"], 0

    def act(self, obs):
        self.n += 1
        return ("read_processor" if self.n <= 2 else "ship"), {"order_id": self.order}


@pytest.mark.parametrize("policy", ["optimistic", "finality_gate", "sop[patience=60]", "majority_vote", "random",
                                    "finality_oracle", ReadTwiceThenShip])
def test_the_drawn_episode_is_run_episodes(corpus, policy):
    for task, seed in [(_first(corpus, "pending_fail"), 0), (_first(corpus, "duplicate_settlement"), 3),
                       (_first(corpus, "late_chargeback"), 1)]:
        drawn = draw_timeline(task, policy, seed)
        # run_episode takes a class's instance (given the class itself, it would call begin on the class)
        expected = fb.run_episode(task, policy() if isinstance(policy, type) else policy, seed)
        assert (drawn.result.position, drawn.result.gap) == (expected.position, expected.gap)
        assert drawn.result == expected  # every field: actions, trace, firings
        title = drawn.ax.get_title(loc="left")
        assert task.task_id in title and expected.disposition in title and f"seed {seed}" in title
        assert f"gap {'−' if expected.gap < 0 else ''}\\${abs(expected.gap):,.2f}" in title


def test_profile_costs_and_probe_are_replayed(corpus):
    task = _first(corpus, "stale_processor")
    profile, costs, probe = fb.FaultProfile.only("delay", "stale_read"), fb.Costs(cogs_rate=0.4), fb.ProbeMode.none()
    ev = episode_timeline(task, "react", 2, profile, costs=costs, probe=probe)
    ref = ev.attrs["result"]
    assert ref == fb.run_episode(task, ev.attrs["policy"], 2, profile, costs, probe)
    assert set(ev.fault) <= {"", "delay", "stale_read"}


def test_every_lane_is_drawn_and_every_delivery_is_a_row(corpus):
    task = _first(corpus, "pending_settle")
    for seed in range(4):
        drawn = draw_timeline(task, "finality_gate", seed)
        ev = drawn.events
        labels = [t.get_text() for t in drawn.ax.get_yticklabels()]
        assert len(labels) == len(LANES) and labels[-1] == "agent calls" and "ledger" in labels
        assert list(dict.fromkeys(ev.lane)) == [lane for lane in LANES if lane in set(ev.lane)]  # lane order
        assert {"truth", "processor", "ledger", "erp", "agent"} <= set(ev.lane)
        env = play(FinalityEnv(task, seed), as_ref("finality_gate").make())
        arrived = ev[ev.lane.isin(C.SYSTEMS) & ~ev.fault.str.contains("loss")]
        assert sorted(arrived.delivery) == sorted(d.id for d in env.world.deliveries)
        assert sorted(zip(arrived.delivery, arrived.t)) == sorted((d.id, d.arrival) for d in env.world.deliveries)
        truth = ev[ev.lane == "truth"]
        assert list(truth.kind[:3]) == ["order_placed", "auth_approved", "capture_submitted"]
        assert (truth.t == task.determined_at).sum() >= 1
        calls = ev[(ev.lane == "agent") & (ev.kind != "human")]
        assert list(calls.kind) == [tool for _, tool, _, _ in drawn.result.actions]
    # the deadline and the handover are vertical lines
    xs = {round(line.get_xdata()[0]) for line in drawn.ax.lines if len(set(line.get_xdata())) == 1
          and list(line.get_ydata()) == [0, 1]}
    assert {C.HANDOVER, C.SHIP_BY} <= xs


def _firing_cases(corpus, family, policy="majority_vote", n=3):
    """(task, seed, env) for the first episodes, in corpus order, where `family` fired (read from the world)."""
    found = []
    for task in corpus.tasks:
        for seed in range(3):
            env = play(FinalityEnv(task, seed), as_ref(policy).make())
            if any(f == family for f, _ in env.world.firings):
                found.append((task, seed, env))
                if len(found) == n:
                    return found
    return found


def _markers(ax, marker):
    return sum(1 for line in ax.lines if line.get_marker() == marker)


def _marks(ev):
    """(row index, family, source) for every fault mark in the frame."""
    return [(i, f, s) for i, fault, source in zip(ev.index, ev.fault, ev.source) if fault
            for f, s in zip(fault.split("+"), source.split("+"))]


@pytest.mark.parametrize("family", C.FAMILIES)
def test_every_firing_is_marked_on_its_delivery(corpus, family):
    cases = _firing_cases(corpus, family)
    assert cases, f"no episode in the corpus fired {family}"
    for task, seed, env in cases:
        ids = [key for f, key in env.world.firings if f == family]
        drawn = draw_timeline(task, "majority_vote", seed)
        ev = drawn.events
        assert all(len(f.split("+")) == len(s.split("+")) for f, s in zip(ev.fault, ev.source))
        hit = ev.loc[sorted({i for i, f, s in _marks(ev) if f == family and s == "profile"})]
        if family == "loss":
            assert sorted(hit.delivery) == sorted(ids)
            assert _markers(drawn.ax, "X") == int((ev.fault == "loss").sum())
        elif family == "delay":
            assert sorted(hit.delivery) == sorted(ids)
            moved = hit[hit.t != hit.due_t]  # a bank line may land in the batch it was due in anyway
            assert len(moved) and (moved.t > moved.due_t).sum() >= len(moved) / 2
        elif family == "duplicate":
            assert sorted(hit.original) == sorted(ids) and hit.delivery.str.endswith("#copy1").all()
            assert _markers(drawn.ax, "D") == int(ev.fault.str.contains("duplicate").sum())
        elif family == "reorder":
            assert sorted(hit.delivery) == sorted(i for pair in ids for i in pair)
            assert set(hit.partner) == set(hit.delivery)
        elif family == "partial_commit":
            assert sorted(hit.delivery) == sorted(ids)
            partial = ev.fault.str.contains("partial_commit").sum()
            assert sum(1 for line in drawn.ax.lines if line.get_fillstyle() == "left") == partial
        else:  # stale_read: the read that fired, on the agent's lane, with the tick it saw
            assert len(hit) == len(ids) and (hit.lane == "agent").all()
            assert ((hit.t - hit.as_of_t).between(*C.STALE_RANGE)).all()
            assert sorted(hit.kind.str.replace("read_", "", regex=False)) == sorted(i.split("#")[0] for i in ids)


def test_archetype_faults_are_marked_as_the_archetypes(corpus):
    lost = _first(corpus, "lost_settlement")
    ev = episode_timeline(lost, "sop", 0, fb.FaultProfile.none())
    dropped = ev[ev.fault == "loss"]
    assert set(dropped.lane) == {"processor", "erp"} and set(dropped.source) == {"archetype"}
    assert len(dropped) == 2 and (dropped.t == dropped.due_t).all()  # crossed where each was due
    assert set(dropped.kind) == {"capture_settled"}
    stale = episode_timeline(_first(corpus, "stale_processor"), "sop", 0, fb.FaultProfile.none())
    lag = stale[stale.fault == "delay"]
    assert list(lag.lane) == ["processor"] and list(lag.source) == ["archetype"]
    dup = episode_timeline(_first(corpus, "duplicate_settlement"), "sop", 0, fb.FaultProfile.none())
    assert set(dup[dup.fault == "duplicate"].lane) == {"ledger", "bank"}
    part = episode_timeline(_first(corpus, "partial_ledger"), "sop", 0, fb.FaultProfile.none())
    assert list(part[part.fault == "partial_commit"].source) == ["archetype"]
    # no profile fault at all under FaultProfile.none()
    for frame in (ev, stale, dup, part):
        assert not frame.source.str.contains("profile").any()


def test_a_users_policy_object_is_drawn_and_left_untouched(corpus):
    task = _first(corpus, "pending_settle")
    proto = ReadTwiceThenShip()
    proto.n = 0
    drawn = draw_timeline(task, proto, 1)
    assert proto.n == 0  # played on a copy, as evaluate does
    assert drawn.result == fb.run_episode(task, ReadTwiceThenShip(), 1)
    calls = drawn.events[drawn.events.lane == "agent"]
    assert list(calls.kind) == ["read_processor", "read_processor", "ship"]
    ship = calls.iloc[-1]
    assert ship.irreversible and ship.terminal and ship.premature == (ship.t < task.determined_at)


def test_the_pair_picker_returns_a_settle_and_a_fail_half(corpus):
    for seed in (0, 1):
        settle, fail = pick_twin_pair(corpus, seed=seed)
        assert settle.twin_id == fail.twin_id and settle.unit == fail.unit
        assert (settle.twin_side, settle.outcome, fail.twin_side, fail.outcome) == ("settle", "settled", "fail",
                                                                                   "failed")
        opt = [fb.run_episode(t, "optimistic", seed) for t in (settle, fail)]
        gate = [fb.run_episode(t, "finality_gate", seed) for t in (settle, fail)]
        assert opt[0].gap != opt[1].gap and all(g.exact for g in gate)
        assert (settle, fail) == pick_twin_pair(corpus, seed=seed)  # deterministic
        earlier = corpus.twin_pairs[:corpus.twin_pairs.index((settle, fail))]
        for s, f in earlier:  # none before it is as illustrative
            o = [fb.run_episode(t, "optimistic", seed) for t in (s, f)]
            g = [fb.run_episode(t, "finality_gate", seed) for t in (s, f)]
            assert not (all(r.premature_irreversible for r in o) and o[0].exact and not o[1].exact
                        and all(r.exact for r in g))
    singles = fb.Corpus(tuple(t for t in corpus.tasks if t.twin_id is None))
    with pytest.raises(ValueError, match="no twin pair"):
        pick_twin_pair(singles)


def test_the_twin_figure_is_a_grid_of_the_pair_by_the_policies(corpus, tmp_path):
    fig = timeline_figure(corpus)
    panels = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert len(panels) == 4 and fig.axes[-1].get_legend() is not None  # 2 x 2, and the legend's own row
    settle, fail = pick_twin_pair(corpus)
    titles = [ax.get_title(loc="left") for ax in panels]
    assert [t.split(" ")[0] for t in titles] == [settle.task_id, settle.task_id, fail.task_id, fail.task_id]
    assert ["optimistic" in titles[0], "finality_gate" in titles[1]] == [True, True]
    assert panels[0].get_xlim() == panels[3].get_xlim()
    # the story: optimistic ships before the outcome exists on both halves and pays on the fail half
    assert "irreversible before determination" in titles[2] and "gap \\$0.00" in titles[3]
    png = save(fig, "timeline", tmp_path)[0]  # byte-identical rewrites: tests/test_notebooks.py, 02_twins
    assert png.stat().st_size > 50_000


def test_drawing_changes_no_result(corpus):
    tasks = fb.Corpus(corpus.tasks[:12])
    before = fb.evaluate(tasks, ["optimistic", "finality_gate", "random"], seeds=[0, 1], cache=False)
    for task in tasks.tasks:
        for seed in (0, 1):
            episode_timeline(task, "random", seed)
    timeline_figure(corpus)
    after = fb.evaluate(tasks, ["optimistic", "finality_gate", "random"], seeds=[0, 1], cache=False)
    pd.testing.assert_frame_equal(before, after)


def test_draw_row_replays_an_evaluated_row(corpus):
    run = fb.Run.make(n_tasks=60, seeds=range(2), policies=["sop", "optimistic"], cache=False)
    df = run.evaluate()
    row = df[(df.policy == "sop") & (df.fired_stale_read > 0)].iloc[0]
    drawn = draw_row(row, run)
    assert drawn.result.gap == pytest.approx(row.gap) and drawn.result.task_id == row.task_id
    bad = row.copy()
    bad["gap"] = row.gap + 1
    with pytest.raises(RuntimeError, match="replay"):
        draw_row(bad, run)


def test_an_unknown_policy_is_refused_clearly(corpus):
    task = corpus.tasks[0]
    for call in (lambda: draw_timeline(task, "no_such_policy"), lambda: episode_timeline(task, "no_such_policy"),
                 lambda: timeline_figure([task], policies=("optimistic", "no_such_policy"))):
        with pytest.raises(fb.PolicyError, match="unknown policy 'no_such_policy'; valid: random, optimistic"):
            call()
    with pytest.raises(fb.PolicyError, match="does not take knob"):
        draw_timeline(task, "sop[no_knob=1]")
    with pytest.raises(fb.FinbenchError, match="seed"):
        draw_timeline(task, "sop", seed=-1)


class Clumsy:
    """A user's policy that errs: an unknown tool, a bad wait, a read of the customer's other order, then a
    write-off of that other order (an unrelated-state violation), then closes the case."""

    def begin(self, brief):
        self.brief, self.n = brief, 0

    def act(self, obs):
        order, other = self.brief["order_id"], self.brief["customer_orders"][0]
        self.n += 1
        return [("fly", {"order_id": order}), ("wait", {"order_id": order, "ticks": 0}),
                ("read_bank", {"order_id": other}), ("write_off", {"order_id": other}),
                ("close", {"order_id": order})][self.n - 1]


def test_a_clumsy_policys_errors_and_other_order_calls_are_drawn(corpus):
    task = _first(corpus, "pending_settle")
    drawn = draw_timeline(task, Clumsy, 0)
    assert drawn.result == fb.run_episode(task, Clumsy(), 0)
    calls = drawn.events[drawn.events.lane == "agent"].reset_index(drop=True)
    assert list(calls.kind) == ["fly", "wait", "read_bank", "write_off", "close"]
    assert [bool(e) for e in calls.error] == [True, True, False, False, False]
    assert list(calls.other_order) == [False, False, True, True, False]
    assert not calls.irreversible[3] and calls.terminal[4] and drawn.result.unrelated_effects == 1
    texts = [t.get_text() for t in drawn.ax.texts]
    assert any(t.startswith("fly") and "(error)" in t for t in texts)
    assert any(f"(order {task.other_order_id})" in t for t in texts)
