"""Policy references (issue 7): a user's policy as a class, an object, a factory or a label goes wherever a
built-in one does, is cached only with a cache id, and bad ones are named."""
import pandas as pd
import pytest

import finbench as fb
from tests.rows import assert_same_rows
from finbench.agents.policies import Policy
from finbench.agents.registry import PolicyError, PolicyRef, parse_label, policy_label, resolve_policies
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


def test_a_user_policy_is_cached_only_by_its_declaration(tmp_path, capsys):
    """Without cache_id a user's policy is played afresh and said so; with one, its rows are kept."""
    from finbench.running.cache import version_folder

    here = tmp_path / version_folder()
    first = evaluate(SMALL, [Patient, "sop"], seeds=[0], cache=tmp_path)
    assert capsys.readouterr().err.count("note: playing patient afresh") == 1
    assert not (here / "patient").exists() and (here / "sop").exists()
    declared = PolicyRef.of(Patient, cache_id="v1")
    evaluate(SMALL, [declared, "sop"], seeds=[0], cache=tmp_path)
    assert "afresh" not in capsys.readouterr().err
    files = set((here / "patient").iterdir())
    assert len(files) > 0
    again = evaluate(SMALL, [declared, "sop"], seeds=[0], cache=tmp_path)
    assert_same_rows(first, again)
    assert set(first[first.policy == "patient"]["origin"]) == {"played"} and set(again["origin"]) == {"cache"}
    assert again.attrs["loaded"] == {"patient": len(SMALL), "sop": len(SMALL)}
    assert set((here / "patient").iterdir()) == files  # read back, not rewritten under another key
    bumped = PolicyRef.of(Patient, cache_id="v2")
    assert bumped.cache_key() != declared.cache_key()
    evaluate(SMALL, [bumped], seeds=[0], cache=tmp_path)
    assert len(set((here / "patient").iterdir())) == 2 * len(files)


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
        ref = resolve_policies(["patient_test"])[0]
        assert not ref.builtin and ref.cache_key() is None  # the user's factory: played afresh
        with pytest.raises(PolicyError):
            register_policy("sop", Patient)
    finally:
        REGISTRY.pop("patient_test")


def test_replay_takes_labels_with_knobs():
    from finbench.experiments import effects as E

    task = SMALL.tasks[3]
    trace = E.replay_trace(task, "sop[patience=60]", 1)
    assert trace == list(fb.run_episode(task, fb.get_policy("sop", patience=60), 1).trace)


def test_registered_names_work_in_worker_processes():
    # a worker process that never imported the registering module imports it first
    import finbench.agents.plans as P

    label = fb.PolicyRef.named("plan", next(iter(P.all_plans()))).label
    one = evaluate(SMALL, [label, "sop"], seeds=[0], n_jobs=1, cache=False)
    two = evaluate(SMALL, [label, "sop"], seeds=[0], n_jobs=2, cache=False)
    pd.testing.assert_frame_equal(one, two)


def test_a_factory_declares_its_cache_id_as_its_own_attribute():
    def make_patient():
        return Patient()

    assert PolicyRef.of(make_patient).cache_id is None  # undeclared: played afresh
    make_patient.cache_id = "v3"
    ref = PolicyRef.of(make_patient)
    assert ref.cache_id == "user:patient:v3" and ref.label == "patient"


def test_a_package_policy_object_holding_a_key_that_is_not_plain_data_is_a_users():
    """An object of the package's own class is keyed as the package's only while its state is plain data, a
    dict's keys included; a key that is not (here a frozenset) makes it a user's, played afresh."""
    plain, odd = fb.get_policy("sop"), fb.get_policy("sop")
    plain.extra, odd.extra = {"a": [1, 2.5]}, {frozenset({1}): 2}
    assert PolicyRef.of(plain).cache_id.startswith("package:")
    assert PolicyRef.of(odd).cache_id is None


def test_a_reference_built_by_hand_is_keyed_by_its_factory_s_code():
    """`PolicyRef(label, factory, cache_id)` with no source: the key holds the identity of the factory, so two
    classes under one label and one cache_id never share episodes."""
    class Quick(Patient):
        ticks = 5

    class Slow(Patient):
        ticks = 50

    quick, slow = (PolicyRef("patient", c, cache_id="v1") for c in (Quick, Slow))
    assert quick.cache_key().startswith("v1:") and slow.cache_key().startswith("v1:")
    assert quick.cache_key() != slow.cache_key()


def test_one_name_and_knobs_pair_given_bare_is_one_policy():
    (ref,) = resolve_policies(("sop", {"patience": 60}))
    assert ref.label == "sop[patience=60]"


def test_two_references_sharing_a_label_are_named_by_their_positions():
    with pytest.raises(PolicyError, match=r"^policies 1 and 3 share the label 'sop'; rows could not be told apart"):
        resolve_policies(["finality_gate", "sop", "optimistic", "sop"])


def test_a_pair_with_knobs_that_are_no_dict_and_a_bad_label_are_named():
    from finbench.agents.registry import as_ref

    with pytest.raises(PolicyError, match=r"^knobs of 'sop' must be a dict, got \['patience'\]$"):
        as_ref(("sop", ["patience"]))
    with pytest.raises(PolicyError, match=r"^not a policy name or label: 'sop\[patience=60'$"):
        parse_label("sop[patience=60")
