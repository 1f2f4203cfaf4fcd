"""The experiment layer: Run, sweep, publish, claims, re-pricing and policy references (issue 7)."""
import math
import subprocess
import sys

import pandas as pd
import pytest

import finbench as fb
from finbench.analysis import claims as CL
from finbench.agents.policies import Policy
from finbench.agents.registry import PolicyError, PolicyRef, parse_label, policy_label, resolve_policies
from finbench.running.reprice import PRICED, reprice
from finbench.analysis.tables import read_table
from finbench.running.run import clear_memo, costs_label
from finbench.running.evaluation import evaluate

SMALL = fb.make_corpus(n_tasks=40)


class Patient(Policy):
    """A user's policy: probe until settled, escalate at the deadline."""

    name = "patient"

    def act(self, obs):
        caps = (obs.get("result") or {}).get("captures", [])
        if any(c["status"] == "settled" for c in caps):
            return self.call("ship")
        if obs["t"] > 590:
            return self.call("escalate")
        return self.call("probe_processor")


class Counting:
    """A user's policy object with state: it must be copied fresh for every episode."""

    name = "counting"

    def __init__(self):
        self.calls = 0

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        self.calls += 1
        if self.calls > 3:
            return "write_off", {"order_id": self.order}
        return "wait", {"order_id": self.order, "ticks": 50}


# --- policy references -------------------------------------------------------------------

def test_labels_round_trip():
    for name, knobs in [("sop", {}), ("sop", {"patience": 60, "poll_interval": 15}), ("react", {"wait": 45})]:
        assert parse_label(policy_label(name, knobs)) == (name, knobs)
    with pytest.raises(PolicyError):
        parse_label("sop[patience]")


def test_user_policies_in_every_form_match_run_episode():
    refs = resolve_policies([Patient, Counting(), "finality_gate"])
    assert [r.label for r in refs] == ["patient", "counting", "finality_gate"]
    df = evaluate(SMALL, [Patient, Counting(), "finality_gate"], seeds=[0, 1], cache=False)
    for task in SMALL.tasks[:10]:
        for seed in (0, 1):
            row = df[(df.task_id == task.task_id) & (df.seed == seed)].set_index("policy")
            assert row.loc["patient", "position"] == fb.run_episode(task, Patient(), seed).position
            assert fb.run_episode(task, Patient, seed) == fb.run_episode(task, Patient(), seed)  # a class too
            assert row.loc["counting", "position"] == fb.run_episode(task, Counting(), seed).position
    # the stateful object was copied for every episode: each wrote off after four calls
    counting = df[df.policy == "counting"]
    assert len(counting) == len(SMALL) * 2
    assert (counting.n_calls == 4).all()


def test_user_policy_forms_are_all_accepted_with_labels():
    factory = PolicyRef.of(lambda: Patient(), label="patient_factory")
    df = evaluate(SMALL, [Patient, factory], seeds=[0], cache=False)
    a, b = (df[df.policy == p].reset_index(drop=True) for p in ("patient", "patient_factory"))
    pd.testing.assert_frame_equal(a.drop(columns="policy"), b.drop(columns="policy"))


def test_a_user_policy_without_cache_id_is_not_cached(tmp_path, capsys):
    evaluate(SMALL, [Patient, "sop"], seeds=[0], cache=tmp_path)
    assert "not caching patient" in capsys.readouterr().err
    assert not (tmp_path / "patient").exists() and (tmp_path / "sop").exists()
    ref = PolicyRef.of(Patient, cache_id="v1")
    first = evaluate(SMALL, [ref], seeds=[0], cache=tmp_path)
    assert (tmp_path / "patient").exists()
    pd.testing.assert_frame_equal(first, evaluate(SMALL, [ref], seeds=[0], cache=tmp_path))


def test_bad_policy_objects_are_named():
    with pytest.raises(PolicyError, match="not a policy"):
        resolve_policies([42])
    with pytest.raises(PolicyError, match="lacks begin"):
        resolve_policies([lambda: 42])
    with pytest.raises(PolicyError, match="unknown policy 'gpt'"):
        resolve_policies(["gpt"])
    assert [r.label for r in resolve_policies("sop")] == ["sop"]  # one name, not its characters


def test_registered_policies_do_not_change_the_default_set():
    from finbench.agents.registry import REGISTRY, register_policy

    register_policy("patient_test", Patient)
    try:
        assert [r.label for r in resolve_policies(None)] == list(fb.POLICIES)
        assert resolve_policies(["patient_test"])[0].builtin
        with pytest.raises(PolicyError):
            register_policy("sop", Patient)
    finally:
        REGISTRY.pop("patient_test")


def test_replay_takes_labels_with_knobs():
    from finbench.experiments import effects as E

    task = SMALL.tasks[3]
    trace = E.replay_trace(task, "sop[patience=60]", 1)
    assert trace == list(fb.run_episode(task, fb.get_policy("sop", patience=60), 1).trace)


# --- re-pricing ----------------------------------------------------------------------------

COSTS = [fb.Costs(cogs_rate=0.4), fb.Costs(dispute_fee=50.0, escalation_cost=10.0),
         fb.Costs(cogs_rate=0.8, dispute_fee=15.0, escalation_cost=36.0)]


@pytest.mark.parametrize("costs", COSTS, ids=lambda c: costs_label(c))
def test_repricing_equals_simulating(costs):
    seeds = [0, 3]
    base = evaluate(SMALL, None, seeds=seeds, cache=False)
    direct = evaluate(SMALL, None, seeds=seeds, costs=costs, cache=False)
    priced = reprice(base, SMALL, costs, fb.Costs())
    pd.testing.assert_frame_equal(priced, direct, check_exact=True)
    assert not base["position"].equals(direct["position"])  # the costs did matter


def test_repricing_refuses_what_policies_see():
    base = evaluate(SMALL, ["sop"], seeds=[0], cache=False)
    with pytest.raises(ValueError, match="probe_ticks"):
        reprice(base, SMALL, fb.Costs(probe_ticks=9), fb.Costs())
    assert set(PRICED) <= set(base.columns)


# --- Run and sweep -------------------------------------------------------------------------

def test_run_stamps_itself():
    run = fb.Run(SMALL, seeds=range(3), profile=fb.FaultProfile.only("loss"), costs=fb.Costs(cogs_rate=0.5),
                 policies=["sop", Patient], n_boot=100)
    s = run.stamp()
    assert s["corpus"] == SMALL.fingerprint and s["seeds"] == "0..2" and s["profile"] == "only:loss"
    assert s["costs"] == "cogs_rate=0.5" and s["policies"] == "sop, patient" and s["n_boot"] == 100
    assert "n_boot" not in run.stamp(bootstrap=False)
    assert run.caption() == (f"corpus {SMALL.fingerprint} · 240 episodes · seeds 0..2 · profile only:loss · "
                             "costs cogs_rate=0.5")
    assert run.key() == run.replace(n_jobs=2, cache=False).key() != run.replace(boot_seed=1).key()
    assert fb.Run(SMALL).stamp()["costs"] == "default" and "policies" not in fb.Run(SMALL).stamp()


def test_run_rejects_what_is_not_a_run():
    with pytest.raises(fb.FinbenchError, match="Run: corpus must be a Corpus"):
        fb.Run("corpus")
    with pytest.raises(fb.FinbenchError, match="Run: n_boot must be an integer"):
        fb.Run(SMALL, n_boot=0)
    with pytest.raises(PolicyError):
        fb.Run(SMALL, policies=["sop", "sop"])


def test_sweep_shares_episodes_and_reprices(monkeypatch):
    from finbench.running import run as running_run

    clear_memo()
    calls = []
    real = running_run.evaluate
    monkeypatch.setattr(running_run, "evaluate", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    base = fb.Run(SMALL, seeds=[0, 1], policies=["sop", "finality_gate"], cache=False)
    costs = [fb.Costs(), fb.Costs(cogs_rate=0.4), fb.Costs(dispute_fee=50.0)]
    out = fb.sweep(base, {"costs": costs, "policies": [["sop", "finality_gate"], ["sop"]]})
    assert len(calls) == 1  # one simulation, re-priced twice, sliced for the second policy set
    assert list(out.columns[:2]) == ["costs", "policies"]
    assert set(out.costs) == {"default", "cogs_rate=0.4", "dispute_fee=50"}
    for c in costs[1:]:
        direct = evaluate(SMALL, ["sop", "finality_gate"], seeds=[0, 1], costs=c, cache=False)
        got = out[(out.costs == costs_label(c)) & (out.policies == "sop, finality_gate")]
        pd.testing.assert_frame_equal(got.drop(columns=["costs", "policies"]).reset_index(drop=True), direct)
    clear_memo()


def test_sweep_summarises_per_run():
    clear_memo()
    base = fb.Run(SMALL, seeds=[0], policies=["finality_gate", "optimistic"], cache=False)
    out = fb.sweep(base, {"profile": [fb.FaultProfile.none(), fb.FaultProfile.only("loss")]},
                   lambda run, df: df.groupby("policy", sort=False)["gap"].mean().reset_index())
    assert list(out.columns) == ["profile", "policy", "gap"]
    assert list(out.profile) == ["none", "none", "only:loss", "only:loss"]
    gate = out[out.policy == "finality_gate"].gap
    assert gate.iloc[0] == gate.iloc[1]  # the gate is fault-invariant
    with pytest.raises(ValueError, match="unknown Run field"):
        fb.sweep(base, {"n_jobs": [1, 2]})


# --- publish and claims -----------------------------------------------------------------------

def test_publish_stamps_tables_figures_and_claims(tmp_path):
    import matplotlib.pyplot as plt

    run = fb.Run(SMALL, seeds=[0, 1], n_boot=10)
    table = pd.DataFrame({"policy": ["a", "b"], "x": [1.0, 2.5]})
    csv, md = fb.publish(table, "t", run, to=tmp_path)
    assert f"# corpus: {SMALL.fingerprint}" in csv.read_text() and "- seeds: 0,1" in md.read_text()
    pd.testing.assert_frame_equal(read_table(csv), table)
    fig, ax = plt.subplots()
    png, pdf = fb.publish(fig, "f", run, to=tmp_path)
    assert png.suffix == ".png" and pdf.suffix == ".pdf"
    assert png.read_bytes().startswith(b"\x89PNG") and pdf.read_bytes().startswith(b"%PDF")
    assert any(run.caption() in t.get_text() for t in fig.texts)
    claims = [CL.numeric("x", "a", "a rate", 50.0, 52.0, source="tables/t.csv", tol=5, unit="%"),
              CL.qualitative("x", "b", "b holds", False, "no", source="tables/t.csv")]
    paths = fb.publish(claims, "x", run, to=tmp_path)
    assert paths[0].name == "claims_x.csv"
    back = read_table(paths[0])
    assert list(back.verdict) == ["reproduced", "differs"]
    with pytest.raises(TypeError, match="cannot write"):
        fb.publish(42, "x", run, to=tmp_path)


@pytest.mark.parametrize("ours, kw, verdict", [
    (85.0, {"ci": (79.9, 90.2)}, "reproduced"),
    (70.0, {"ci": (79.9, 90.2), "direction": True}, "same direction"),
    (70.0, {"ci": (79.9, 90.2), "direction": False}, "differs"),
    (58.0, {"tol": 5.0}, "differs"),
    (61.0, {"tol": 5.0}, "reproduced"),
    (None, {"tol": 5.0}, "not run"),
])
def test_claim_verdicts(ours, kw, verdict):
    c = CL.numeric("e", "id", "text", 65.7 if "tol" in kw else 85.4, ours, source="tables/x.csv", **kw)
    assert c.verdict == verdict
    assert c.verdict in CL.VERDICTS
    if ours is None:
        assert math.isnan(c.ours)


def test_claim_ids_are_unique():
    c = CL.qualitative("e", "a", "t", True, "m", source="s")
    with pytest.raises(ValueError, match="repeat"):
        CL.claims_frame([c, c])


# --- imports ---------------------------------------------------------------------------------

def test_grading_imports_neither_pandas_nor_the_simulator():
    code = ("import sys, finbench.grading, finbench.cli; "
            "bad = [m for m in ('pandas', 'numpy', 'finbench.sim.world', 'finbench.sim.env', 'finbench.running.evaluation') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "finbench.grading" in names and "pandas" not in names and "finbench.sim.world" not in names


def test_registered_names_work_in_worker_processes():
    # a worker process that never imported the registering module imports it first
    import finbench.agents.plans as P

    label = fb.PolicyRef.named("plan", next(iter(P.all_plans()))).label
    one = evaluate(SMALL, [label, "sop"], seeds=[0], n_jobs=1, cache=False)
    two = evaluate(SMALL, [label, "sop"], seeds=[0], n_jobs=2, cache=False)
    pd.testing.assert_frame_equal(one, two)
