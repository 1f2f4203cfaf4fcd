"""The report card worth showing (issue 30, point 3): report.md and card.json (schema finbench-card/2) hold the
invalid calls (at the top when above 5%), how cases ended and the escalation fees, calls and ticks, the gap by
archetype beside the gate's, exactly_one_effect split, pass^k for every k, the worst twin pair against the gate,
the episodes it loses most against the gate with the command that draws each, where its rows came from and
the stamp (package, engine, commit). Every expected value is derived here from the rows, replays or the corpus,
never copied from a run."""
from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import finbench as fb
from finbench.agents.registry import DEFAULT_POLICIES
from finbench.analysis import card_tables as T
from finbench.analysis.tables import read_table
from finbench.card import card_of
from finbench.cli import main
from finbench.sim import constants as C

ROOT = Path(__file__).resolve().parents[1]
GATE = "finality_gate"

AGENTS = '''
class Base:
    def begin(self, brief):
        self.order, self.other, self.n = brief["order_id"], brief["customer_orders"][0], 0
    def act(self, obs):
        self.n += 1
        return self.step(obs)

class ShipIt(Base):
    """A new user's first typo: a tool that does not exist, every call."""
    name = "ship_it_agent"
    def step(self, obs):
        return "ship_it", {"order_id": self.order}

class Patient(Base):
    """Never retries a capture: ships once the probe says settled, escalates near the deadline."""
    name = "patient"
    def step(self, obs):
        caps = (obs.get("result") or {}).get("captures", [])
        if any(c["status"] == "settled" for c in caps):
            return "ship", {"order_id": self.order}
        if obs["t"] > 590:
            return "escalate", {"order_id": self.order}
        return "probe_processor", {"order_id": self.order}

class WaitZero(Base):
    name = "wait_zero"
    def step(self, obs):
        return ("wait", {"order_id": self.order, "ticks": 0}) if self.n < 4 else ("ship", {"order_id": self.order})

class NoTicks(Base):
    name = "no_ticks"
    def step(self, obs):
        return ("wait", {"order_id": self.order}) if self.n % 2 else ("probe_processor", {"order_id": self.order})

class LateShip(Base):
    name = "late_ship"
    def step(self, obs):
        return ("wait", {"order_id": self.order, "ticks": 600}) if self.n == 1 else ("ship", {"order_id": self.order})

class ExtraArg(Base):
    name = "extra_arg"
    def step(self, obs):
        if self.n > 5:
            return "escalate", {"order_id": self.order}
        return "read_processor", {"order_id": self.order, "verbose": True}

class FloatWait(Base):
    name = "float_wait"
    def step(self, obs):
        return ("refund", {"order_id": self.order}) if self.n > 3 else ("wait", {"order_id": self.order, "ticks": 30.0})

class Mixed(Base):
    name = "mixed"
    def step(self, obs):
        if self.n > 30:
            return "close", {"order_id": self.order}
        o = self.order
        return [("wait", {"order_id": o, "ticks": 45}), ("read_bank", {"order_id": o}),
                ("retry_capture", {"order_id": o, "idempotency_key": f"k{self.n}"}), ("shipp", {"order_id": o}),
                ("wait", {"order_id": o, "ticks": 9999}), ("read_ledger", {"order_id": o, "x": 1, "y": 2}),
                ("probe_processor", {"order_id": o})][self.n % 7]

class WrongOrder(Base):
    name = "wrong_order"
    def step(self, obs):
        return "read_processor", {"order_id": "ORD-1"}

class OtherOrder(Base):
    name = "other_order"
    def step(self, obs):
        return ("read_erp", {"order_id": self.other}) if self.n < 3 else ("ship", {"order_id": self.order})

class Sleeper(Base):
    """Waits the longest wait, three times: the clock reaches the horizon before the budget runs out."""
    name = "sleeper"
    def step(self, obs):
        return "wait", {"order_id": self.order, "ticks": 600}

class NumpyWait(Base):
    """Waits with numpy's integers, as an agent computing its waits with numpy would."""
    name = "numpy_wait"
    def step(self, obs):
        import numpy
        return ("wait", {"order_id": self.order, "ticks": numpy.int64(10)}) if self.n < 6 else ("ship", {"order_id": self.order})

class KeyClose(Base):
    """Retries under a key holding the rendering's separators until the budget runs out."""
    name = "key_close"
    def step(self, obs):
        return "retry_capture", {"order_id": self.order, "idempotency_key": "x;bogus_tool;other@o:1,2;close"}

class ToolSemicolon(Base):
    name = "tool_semicolon"
    def step(self, obs):
        return ("read_erp;ship", {"order_id": self.order}) if self.n < 3 else ("close", {"order_id": self.order})

class Declared(Patient):
    name = "declared"
    cache_id = "v1"
'''
NS: dict = {}
exec(AGENTS, NS)


@pytest.fixture(scope="module")
def agents(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("agents") / "agents.py"
    path.write_text(AGENTS)
    return path


def _eval(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["eval", *map(str, args)])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def ship_it(agents, tmp_path_factory):
    out = tmp_path_factory.mktemp("card") / "ship_it"
    code, printed, err = _eval(f"{agents}:ShipIt", "--n-tasks", "12", "--seeds", "2", "--n-jobs", "1", "--no-cache",
                               "--out", out)
    assert code == 0, err
    return out, printed


@pytest.fixture(scope="module")
def patient(agents, tmp_path_factory):
    """The never-retrying agent at the issue's size, beside the gate evaluated on its own."""
    out = tmp_path_factory.mktemp("card") / "patient"
    code, printed, err = _eval(f"{agents}:Patient", "--n-tasks", "30", "--seeds", "2", "--n-jobs", "1", "--no-cache",
                               "--out", out)
    assert code == 0, err
    corpus = fb.make_corpus(n_tasks=30)
    gate = fb.evaluate(corpus, [GATE], seeds=range(2), cache=False)
    return out, printed, read_table(out / "rows.csv"), gate, corpus


def _card(out: Path) -> dict:
    return json.loads((out / "card.json").read_text())


# --- invalid calls ------------------------------------------------------------------------------------------------

def _replayed(agent, corpus, seeds):
    """From replays (run_episode's observations): per message (ticks elided) the calls answered with an error,
    the episodes holding one, and the valid calls on the customer's other order."""
    errors, episodes, other = Counter(), 0, 0
    for task in corpus.tasks:
        for seed in seeds:
            before = sum(errors.values())
            for _, tool, args, obs in fb.run_episode(task, agent(), seed).actions:
                other += "error" not in obs and args.get("order_id") == task.other_order_id
                if "error" in obs:
                    errors[re.sub(r"at t=\d+", "at t=…", obs["error"])] += 1
            episodes += sum(errors.values()) > before
    return errors, episodes, other


@pytest.mark.parametrize("name", ["ShipIt", "Patient", "WaitZero", "NoTicks", "LateShip", "ExtraArg", "FloatWait",
                                  "Mixed", "WrongOrder", "OtherOrder", "NumpyWait", "KeyClose", "ToolSemicolon"])
def test_invalid_calls_in_the_rows_match_replays(name):
    corpus, agent = fb.make_corpus(n_tasks=12), NS[name]
    rows = fb.evaluate(corpus, [agent], seeds=range(2), cache=False)
    f = T.invalid_calls(rows)
    errors, episodes, other = _replayed(agent, corpus, range(2))
    assert f["calls"] == rows["n_calls"].sum()
    assert f["invalid"] == sum(errors.values()), (f["messages"], errors)
    assert f["episodes_with_invalid"] == episodes and f["other_order"] == other
    assert f["distinct_messages"] == len(errors)
    assert [(m["message"], m["count"]) for m in f["messages"]] == errors.most_common(T.TOP_MESSAGES)
    assert f["warn"] == (100 * sum(errors.values()) / rows["n_calls"].sum() > 5)
    assert f["warn_other_order"] == (100 * other / rows["n_calls"].sum() > 5)


def test_numpy_integers_play_as_integers_in_the_environment_and_the_card():
    """`wait(ticks=numpy.int64(10))` is the valid wait it spells, to the environment and so to the card."""
    corpus = fb.make_corpus(n_tasks=12)
    rows = fb.evaluate(corpus, [NS["NumpyWait"]], seeds=[0], cache=False)
    waits = int(rows["wait_calls"].sum())
    assert waits > 0 and (rows["invalid_calls"] == 0).all() and T.invalid_calls(rows)["invalid"] == 0
    assert rows["calls"].str.contains("wait:10").all()
    assert rows["end_t"].min() > C.HANDOVER + 10  # the waits moved the clock


def test_separators_inside_a_value_neither_split_a_call_nor_end_the_case():
    """A retry key holding `;` and ending in `close` is one valid call: no tool `bogus_tool`, no call on another
    order, and a case the budget closed is the budget's, not the agent's `close`."""
    corpus = fb.make_corpus(n_tasks=12)
    rows = fb.evaluate(corpus, [NS["KeyClose"]], seeds=[0], cache=False)
    f = T.invalid_calls(rows)
    assert (f["invalid"], f["other_order"], f["messages"]) == (0, 0, [])
    parts = [c.split(";") for c in rows["calls"]]
    assert parts and all(len(p) == n for p, n in zip(parts, rows["n_calls"]))
    ends = T.dispositions(rows, fb.Costs().step_budget)
    assert ends["budget"]["episodes"] == len(rows) and ends["close"]["episodes"] == 0


def test_an_agent_whose_every_call_is_invalid_says_so_first(ship_it):
    out, printed = ship_it
    rows = read_table(out / "rows.csv")
    calls = int(rows["n_calls"].sum())
    one = fb.run_episode(fb.make_corpus(n_tasks=12).tasks[0], NS["ShipIt"](), 0).actions[0][3]["error"]
    report = (out / "report.md").read_text().splitlines()
    assert report[0] == "# Report card: ship_it_agent"
    assert report[2].startswith(f"> **Warning.** Invalid calls: {calls:,} of its {calls:,} calls (100.0%), in "
                                f"{len(rows)} of {len(rows)} episodes")
    assert "unknown tool 'ship_it'" in report[2]
    assert printed.splitlines()[0].startswith(f"WARNING: Invalid calls: {calls:,} of its {calls:,} calls (100.0%)")
    card = _card(out)
    assert card["schema"] == "finbench-card/2"
    inv = card["invalid_calls"]
    assert (inv["invalid"], inv["calls"], inv["invalid_pct"], inv["warn"]) == (calls, calls, 100.0, True)
    assert inv["messages"] == [{"message": one, "count": calls, "pct_of_calls": 100.0}]
    assert card["warnings"] and card["warnings"][0].startswith("Invalid calls:")
    assert card["dispositions"]["agent"]["budget"]["episodes"] == len(rows)  # every case closed by the budget


def test_an_agent_with_no_invalid_call_has_no_warning(patient):
    out, printed, rows, _, _ = patient
    report = (out / "report.md").read_text()
    assert "Warning" not in report.split("## In one paragraph")[0]
    assert not printed.startswith("WARNING") and "invalid calls: 0 of " in printed
    assert _card(out)["invalid_calls"]["invalid"] == 0 and _card(out)["warnings"] == []


# --- how cases ended, calls and ticks ------------------------------------------------------------------------------

def _ends(agent, corpus, seeds) -> Counter:
    """From replays: the disposition, or the note of a case closed by the budget or the horizon."""
    ends = Counter()
    for task in corpus.tasks:
        for seed in seeds:
            r = fb.run_episode(task, agent, seed)
            note = r.actions[-1][3].get("note")
            ends[{"call budget exhausted": "budget", "horizon reached": "horizon"}.get(note, r.disposition)] += 1
    return ends


@pytest.mark.parametrize("name", ["ShipIt", "Patient", "LateShip", "Mixed", "Sleeper", "FloatWait", "ExtraArg"])
def test_how_cases_ended_matches_replays(name):
    """The agent's own close (Mixed), the budget's (ShipIt, LateShip) and the horizon's (Sleeper) told apart."""
    corpus = fb.make_corpus(n_tasks=12)
    rows = fb.evaluate(corpus, [NS[name]], seeds=range(2), cache=False)
    got = T.dispositions(rows, fb.Costs().step_budget)
    ends = _ends(NS[name](), corpus, range(2))
    assert {o: got[o]["episodes"] for o in T.OUTCOMES} == {o: ends[o] for o in T.OUTCOMES}
    assert sum(got[o]["episodes"] for o in T.OUTCOMES) == len(rows)


def test_dispositions_and_escalation_fees(patient):
    out, _, rows, gate, corpus = patient
    card = _card(out)["dispositions"]
    for who, frame, ends in (("agent", rows, _ends(NS["Patient"](), corpus, range(2))),
                             ("gate", gate, _ends(GATE, corpus, range(2)))):
        for outcome in T.OUTCOMES:
            assert card[who][outcome]["episodes"] == ends[outcome], (who, outcome)
            assert card[who][outcome]["pct"] == pytest.approx(100 * ends[outcome] / len(frame))
        assert card[who]["budget_or_horizon"]["episodes"] == ends["budget"] + ends["horizon"]
        fees = card[who]["escalation_fees"]
        assert fees["episodes"] == (frame["disposition"] == "escalate").sum()
        assert fees["total"] == pytest.approx(fb.Costs().escalation_cost * (frame["disposition"] == "escalate").sum())
    assert card["agent"]["budget"]["episodes"] > 0  # the README's Patient polls past its budget
    report = (out / "report.md").read_text()
    assert "| budget or horizon |" in report and "Escalation fees paid: $" in report


def test_calls_and_ticks_used(patient):
    out, _, rows, gate, _ = patient
    usage = _card(out)["usage"]
    for who, frame in (("agent", rows), ("gate", gate)):
        for what, values in (("calls", frame["n_calls"]), ("ticks", frame["end_t"] - 120)):
            got = usage[who][what]
            assert got["mean"] == pytest.approx(np.mean(values))
            assert got["median"] == pytest.approx(np.median(values))
            assert got["p90"] == pytest.approx(np.percentile(values, 90))
            assert got["max"] == max(values) and got["min"] == min(values)


# --- against the gate ---------------------------------------------------------------------------------------------

def test_gap_by_archetype_beside_the_gate(patient):
    out, _, rows, gate, _ = patient
    for a in _card(out)["archetypes"]:
        mine, theirs = rows[rows["archetype"] == a["archetype"]], gate[gate["archetype"] == a["archetype"]]
        assert a["episodes"] == len(mine)
        assert a["mean_gap"] == pytest.approx(mine["gap"].mean())
        assert a["gate_mean_gap"] == pytest.approx(theirs["gap"].mean())
        assert a["exact_pct"] == pytest.approx(100 * mine["exact"].mean())
        assert a["diff"] == pytest.approx(mine["gap"].mean() - theirs["gap"].mean())
    assert len(_card(out)["archetypes"]) == rows["archetype"].nunique()


def test_exactly_one_effect_split_into_captured_twice_and_never(patient):
    out, printed, rows, gate, corpus = patient
    lost = {t.task_id: t.outcome == "failed" and t.retry_outcome != "settled" for t in corpus.tasks}
    split = _card(out)["exactly_one_effect"]
    for who, frame in (("agent", rows), ("gate", gate)):
        zero, gone = frame["capture_effects"] == 0, frame["task_id"].map(lost)
        got = split[who]
        assert got["fail_pct"] == pytest.approx(100 * (frame["check_exactly_one_effect"] == "fail").mean())
        assert got["captured_twice_pct"] == pytest.approx(100 * (frame["capture_effects"] >= 2).mean())
        assert got["never_captured_pct"] == pytest.approx(100 * zero.mean())
        assert got["never_captured_lost_pct"] == pytest.approx(100 * (zero & gone).mean())
        assert got["never_captured_recoverable_pct"] == pytest.approx(100 * (zero & ~gone).mean())
    assert split["agent"]["captured_twice_pct"] == 0  # it never retries: every failure is a capture never made
    assert split["agent"]["fail_pct"] == pytest.approx(split["agent"]["never_captured_pct"])
    assert "lost for good" in split["note"] and "every policy" in split["note"]
    report = (out / "report.md").read_text()
    assert "captured twice %" in report and "never captured, payment lost %" in report
    assert "fails there for every policy" in report
    assert "exactly_one_effect: patient captured twice 0.0%, never captured" in printed


def _pass_hat(frame: pd.DataFrame, k: int) -> float:
    per = frame.groupby("task_id")["exact"].agg(["size", "sum"])
    return 100 * float(np.mean([math.comb(int(c), k) / math.comb(int(n), k) for n, c in zip(per["size"], per["sum"])]))


def test_pass_k_for_every_k(patient):
    out, _, rows, gate, _ = patient
    got = _card(out)["pass_k"]
    assert [p["k"] for p in got] == [1, 2]
    for p in got:
        assert p["agent"] == pytest.approx(_pass_hat(rows, p["k"]))
        assert p["gate"] == pytest.approx(_pass_hat(gate, p["k"]))
    assert got[0]["agent"] == pytest.approx(100 * rows["exact"].mean())


def test_the_worst_twin_pair_is_chosen_against_the_gate(patient):
    out, printed, rows, gate, _ = patient
    pairs = []
    for (unit, seed), mine in rows[rows["twin_side"].notna()].groupby(["unit", "seed"], sort=False):
        theirs = gate[(gate["unit"] == unit) & (gate["seed"] == seed)]
        pairs.append((mine["gap"].mean() - theirs["gap"].mean(), unit, seed, mine["gap"].mean(), theirs["gap"].mean()))
    best = max(p[0] for p in pairs)
    excess, unit, seed, loss, gate_loss = next(p for p in pairs if p[0] == best)  # the first: corpus order, seed
    w = _card(out)["worst_pair"]
    assert (w["unit"], w["seed"]) == (unit, seed)
    assert (w["loss"], w["gate_loss"], w["excess"]) == pytest.approx((loss, gate_loss, excess))
    absolute = max(pairs, key=lambda p: p[3])
    assert absolute[4] > 0  # by absolute loss the pair is one the gate loses too (the complaint)
    assert w["excess"] >= absolute[3] - absolute[4]
    assert f"worst twin pair against the gate: {unit} seed {seed}, paired loss ${loss:.2f} (gate ${gate_loss:.2f}, " \
           f"{excess:+.2f})" in printed
    assert f"{unit} (tasks {unit}:settle settling, {unit}:fail failing), seed {seed}" in (out / "report.md").read_text()


# runs each drawing command the card prints in a subprocess (under mutmut's coverage run such a child, importing
# the mutated package from another folder, cannot find mutmut's configuration)
@pytest.mark.slow
def test_the_episodes_it_loses_most_against_the_gate_each_with_a_command_that_draws_it(patient, tmp_path):
    out, printed, rows, gate, _ = patient
    both = rows.merge(gate, on=["task_id", "seed"], suffixes=("", "_gate"))
    both["loss"] = both["gap"] - both["gap_gate"]
    expected = []
    for r in both.sort_values("loss", ascending=False, kind="mergesort").itertuples():
        if r.loss > 0.005 and r.task_id not in [e[0] for e in expected]:
            expected.append((r.task_id, r.seed, r.loss))
    ex = _card(out)["examples"]
    assert [(e["task_id"], e["seed"]) for e in ex] == [(t, s) for t, s, _ in expected[:3]]
    assert [e["loss_vs_gate"] for e in ex] == pytest.approx([x for _, _, x in expected[:3]])
    report = (out / "report.md").read_text()
    for e in ex:
        assert e["draw"] in report
        assert f"{e['task_id']} seed {e['seed']} {e['loss_vs_gate']:+.2f}" in printed
    proc = subprocess.run(shlex.split(ex[0]["draw"]), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / f"{ex[0]['task_id'].replace(':', '-')}_seed{ex[0]['seed']}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _card(out)["placeholders"] == []


# --- where the rows came from, the stamp -------------------------------------------------------------------------

def test_the_card_says_whether_the_rows_came_from_the_cache(tmp_path):
    run = fb.Run.make(n_tasks=9, seeds=range(1), policies=[*DEFAULT_POLICIES, NS["Declared"]], n_boot=50,
                      cache=tmp_path / "cache")
    first = card_of(run, "declared")
    assert first.facts["source"]["text"] == "played now" and first.facts["source"]["from_cache"] == 0
    fb.clear_caches()
    again = card_of(run, "declared")
    assert again.facts["source"]["text"] == "9 of 9 episodes from the cache (declared cache_id 'v1')"
    assert "- its episodes: 9 of 9 episodes from the cache (declared cache_id 'v1')\n" in again.markdown()
    assert again.as_json()["source"] == {"episodes": 9, "from_cache": 9, "played_now": 0, "cache_id": "v1",
                                         "text": "9 of 9 episodes from the cache (declared cache_id 'v1')"}


def test_a_model_s_source_counts_its_episodes_asked_resumed_and_replayed():
    """docs/card.md: a model's `source` holds asked_now, resumed and replayed; played_now is asked_now + resumed
    (never a replay); no cache_id; the text is the run's own account, with where its transcripts are."""
    rows = pd.DataFrame({"policy": ["m"] * 9 + [GATE] * 9})
    model = {"episodes": {"asked_now": 5, "resumed": 1, "replayed": 3}, "source": "5 asked now",
             "transcripts": "runs/m"}
    assert T.model_source(rows, "m", model) == {
        "episodes": 9, "from_cache": 0, "played_now": 6, "asked_now": 5, "resumed": 1, "replayed": 3,
        "cache_id": None, "text": "5 asked now (transcripts in runs/m)"}


def test_the_stamp_names_package_engine_and_commit(ship_it):
    out, _ = ship_it
    stamp = _card(out)["stamp"]
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                          text=True)
    top, head = proc.stdout.split() if proc.returncode == 0 else (None, None)
    # the repository's commit only where the package's folder is the repository's top (not a copy inside
    # another checkout, as mutmut's mutants/ is)
    commit = head if top is not None and Path(top).resolve() == ROOT.resolve() else None
    assert (stamp["package"], stamp["engine"], stamp["commit"]) == (fb.__version__, C.ENGINE_VERSION, commit)
    report = (out / "report.md").read_text()
    assert f"- package: {fb.__version__}\n" in report and f"- engine: {C.ENGINE_VERSION}\n" in report
    assert f"- commit: {commit or 'none (not a git checkout)'}\n" in report
    header = [ln for ln in (out / "rows.csv").read_text().splitlines() if ln.startswith("# ")]
    assert f"# package: {fb.__version__}" in header


def test_no_commit_outside_a_checkout(monkeypatch):
    def fails(*a, **k):
        raise OSError("no git")

    monkeypatch.setattr(subprocess, "run", fails)
    assert T.commit() is None
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "/elsewhere\nabc\n", ""))
    assert T.commit() is None  # the package inside some other repository


# --- card.json and its documentation -----------------------------------------------------------------------------

def test_card_json_is_documented_field_by_field(ship_it):
    out, _ = ship_it
    card = _card(out)
    doc = (ROOT / "docs" / "card.md").read_text()
    assert f"schema `{T.SCHEMA}`" in doc and card["schema"] == T.SCHEMA == "finbench-card/2"
    table = doc.split(f"## card.json, schema `{T.SCHEMA}`")[1].split("\n### ")[0]
    documented = re.findall(r"^\| `(\w+)` \|", table, flags=re.M)
    assert documented == list(card)
    for key in ("invalid_calls", "usage", "source"):
        row = next(ln for ln in table.splitlines() if ln.startswith(f"| `{key}` |"))
        inner = card[key] if key != "usage" else card[key]["agent"]
        for field in inner:
            assert f"`{field}`" in row, (key, field)
    json.loads((out / "card.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in card.json"))


def test_a_corpus_without_twin_pairs_has_null_pairs(agents, tmp_path):
    code, printed, err = _eval(f"{agents}:Patient", "--task-ids", "ord-0007", "--seeds", "1", "--n-jobs", "1",
                               "--no-cache", "--out", tmp_path / "card")
    assert code == 0, err
    card = _card(tmp_path / "card")
    assert card["worst_pair"] is None and card["twin_pairs"] is None
    assert card["stamp"]["task_ids"] == "ord-0007"


def test_the_help_states_the_threshold_the_card_uses():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["eval", "--help"]) == 0
    text = " ".join(out.getvalue().split())
    assert f"Invalid calls above {T.INVALID_WARN_PCT:g}% of the agent's calls head the card" in text
    assert "card.json (docs/card.md)" in text and (ROOT / "docs" / "card.md").is_file()
