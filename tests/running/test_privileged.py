"""A user's policy that asks for the resolution is marked privileged and never compared as unprivileged (issue 18)."""
from __future__ import annotations

import functools

import finbench as fb
from finbench.experiments import headline, twins

SMALL = fb.make_corpus(n_tasks=30)


class Peeker:
    """Told the resolution (privileged = True): ships if the capture will settle, else writes off."""

    name = "peeker"
    privileged = True

    def begin(self, brief, resolution=None):
        self.order = brief["order_id"]
        self.ship = resolution is not None and resolution["outcome"] == "settled"

    def act(self, obs):
        return ("ship" if self.ship else "write_off"), {"order_id": self.order}


class Honest(Peeker):
    name = "honest"
    privileged = False


class Wrapped(Peeker):
    """A Peeker whose begin is no method but another callable taking (brief, resolution): a partial."""

    name = "wrapped"

    def __init__(self):
        self.begin = functools.partial(Peeker.begin, self)


def _begin(self, brief, resolution=None):
    Peeker.begin(self, brief, resolution)


_begin.__module__ = None  # as code run by exec without a module name makes it


class Nameless(Peeker):
    """A Peeker whose begin method's function names no module."""

    name = "nameless"
    begin = _begin


def test_a_told_policy_is_told_whatever_callable_its_begin_is():
    """A privileged policy's `begin` may be any callable that takes (brief, resolution), not only a method of a
    class in a module."""
    settled = [t for t in SMALL.tasks if t.outcome == "settled"]
    failed = [t for t in SMALL.tasks if t.outcome != "settled"]
    assert settled and failed
    for task in settled[:2] + failed[:2]:
        for policy in (Wrapped(), Nameless()):  # a partial; a method whose function names no module
            res = fb.run_episode(task, policy)
            assert res.privileged and res.disposition == ("ship" if task in settled else "write_off")


def test_rows_of_a_told_policy_are_marked():
    df = fb.evaluate(SMALL, [Peeker, Honest, "finality_oracle", "finality_gate"], seeds=[0], cache=False)
    told = df.groupby("policy").privileged.agg(["all", "any"])
    assert told.loc["peeker", "all"] and told.loc["finality_oracle", "all"]
    assert not told.loc["honest", "any"] and not told.loc["finality_gate", "any"]
    # the mark is earned by being told, not by the name: Honest plays blind (never ships)
    assert set(df[df.policy == "honest"].disposition) == {"write_off"}


def test_a_told_policy_is_left_out_of_unprivileged_claims():
    run = fb.Run.make(n_tasks=30, seeds=range(2), n_boot=50, cache=False,
                      policies=[*fb.POLICIES, Peeker])
    tables = headline.tables(headline.episodes(run), run)
    t2 = tables["table2"].set_index("policy")
    assert bool(t2.loc["peeker", "privileged"]) and not bool(t2.loc["finality_gate", "privileged"])
    assert t2.loc["peeker", "mean_gap"] <= t2.loc["finality_gate", "mean_gap"]  # it would win if counted
    claims = {c.id: c for c in headline.claims(tables)}
    blind = {c.id: c for c in headline.claims(headline.tables(
        headline.episodes(run.replace(policies=list(fb.POLICIES))), run.replace(policies=list(fb.POLICIES))))}
    assert claims["gate_gap"].verdict == blind["gate_gap"].verdict
    assert claims["gate_exact"].verdict == blind["gate_exact"].verdict
    t4 = twins.tables(headline.episodes(run), run)["table4"].set_index("policy")
    assert bool(t4.loc["peeker", "privileged"])
    second = claims["optimistic_second"]  # its place by exact rate among the unprivileged
    assert second.measured.startswith("by exact:") and "peeker" not in second.measured
