"""Rules of the corpus generator (finbench.sim.corpus, SPEC §6): the mix scaled by largest remainder,
the ids, streams and twin halves a generated corpus names, the per-archetype fields of a task, the
fingerprint and file digest, and the stratified subset. Expected values are worked out by hand from
the documented rules (SPEC's 321-task mix: constants.SINGLES and constants.PAIRS)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter

import numpy as np
import pytest

from finbench.sim import constants as C
from finbench.sim.corpus import (MAX_TASKS, Corpus, _unit_plan, fingerprint_of, load_corpus, make_corpus,
                                 make_task, stratified_subset)
from finbench.sim.task import CorpusError
from finbench.errors import FinbenchError

SMALL = make_corpus(n_tasks=30)


# --- the mix ----------------------------------------------------------------------------------

def test_thirty_tasks_take_the_mix_by_largest_remainder():
    """Shares n * 30 / 321; floors 4,3,3,1,1,0,2,2,1 singles and 2 + 1 pairs make 23 tasks; then one unit each
    by remainder, largest first, while it fits: duplicate (.80), partial (.80), pending_fail (.78), the
    unresolvable pair (.78, +2), lost (.74) reach 29; the pending pair (.43) does not fit; late (.40) makes 30."""
    by_arch = Counter(t.archetype for t in SMALL)
    assert by_arch == {"settled_clean": 4, "lost_settlement": 4, "stale_processor": 3,
                       "pending_settle": 1 + 2, "pending_fail": 2 + 2, "unresolvable": 0 + 2 * 2,
                       "duplicate_settlement": 3, "partial_ledger": 3, "late_chargeback": 2}
    assert len(SMALL) == 30 and len(SMALL.units) == 22 + 4 and len(SMALL.twin_pairs) == 4
    kinds = Counter(tuple(sorted({SMALL[i].archetype for i in u})) for u in SMALL.units if len(u) == 2)
    assert kinds == {("pending_fail", "pending_settle"): 2, ("unresolvable",): 2}


def test_the_default_size_is_spec_321_mix_exactly():
    """At 321 tasks the plan is SPEC's counts as they stand (no scaling); checked on the plan, not a corpus."""
    plan = _unit_plan(C.DEFAULT_TASKS)
    assert Counter(kind for kind, _ in plan) == {
        "settled_clean": 45, "lost_settlement": 40, "stale_processor": 36, "pending_settle": 14, "pending_fail": 19,
        "unresolvable": 2 + 19, "duplicate_settlement": 30, "partial_ledger": 30, "late_chargeback": 15,
        "pending": 26}
    assert sum(len(archs) for _, archs in plan) == 321
    assert ("pending", ("pending_settle", "pending_fail")) in plan
    assert plan.count(("unresolvable", ("unresolvable", "unresolvable"))) == 19
    assert plan.count(("unresolvable", ("unresolvable",))) == 2
    # the defaults by behaviour (mutation testing wraps the function, hiding __defaults__)
    default = make_corpus()
    assert (default.master_seed, len(default)) == (20260321, 321) and C.PUBLIC_SEED == 20260321


@pytest.mark.parametrize("n, singles", [
    (1, {"settled_clean": 1}),  # the largest share (45 / 321) first
    (2, {"settled_clean": 1, "lost_settlement": 1}),
    (3, {"settled_clean": 1, "lost_settlement": 1, "stale_processor": 1}),
])
def test_a_tiny_corpus_takes_the_largest_shares_first(n, singles):
    got = make_corpus(n_tasks=n)
    assert Counter(t.archetype for t in got) == singles and not got.twin_pairs


@pytest.mark.parametrize("n", [4, 5, 7, 11, 13, 29, 31, 60, 100, 320, 322])
def test_every_size_holds_exactly_n_tasks(n):
    assert len(make_corpus(n_tasks=n)) == n


# --- what a generated corpus names ---------------------------------------------------------------

def test_order_ids_count_from_ord_0001_in_corpus_order_and_twins_share_one():
    orders = list(dict.fromkeys(t.order_id for t in SMALL))
    assert orders == [f"ord-{i:04d}" for i in range(1, 27)]
    for t in SMALL:
        assert t.unit == t.order_id and t.stream == f"{C.PUBLIC_SEED}/{t.order_id}"
        assert t.other_order_id == f"{t.order_id}-prev"
        if t.twin_id is None:
            assert t.task_id == t.order_id and t.twin_side is None
        else:
            assert t.twin_id == f"twin-{t.order_id}" and t.task_id == f"{t.order_id}:{t.twin_side}"
    for settle, fail in SMALL.twin_pairs:
        assert (settle.twin_side, settle.outcome, fail.twin_side, fail.outcome) == \
            ("settle", "settled", "fail", "failed")
        assert SMALL.tasks.index(fail) == SMALL.tasks.index(settle) + 1  # settle half first
        # one unit's draws: the twins differ only in what the outcome decides
        same = ("order_value", "determined_at", "retry_delay", "other_order_value", "unit", "stream")
        assert all(getattr(settle, f) == getattr(fail, f) for f in same)


def test_the_master_seed_names_the_streams_and_moves_the_draws():
    other = make_corpus(master_seed=7, n_tasks=30)
    assert other.master_seed == 7 and all(t.stream == f"7/{t.order_id}" for t in other)
    assert other.fingerprint != SMALL.fingerprint
    assert make_corpus(master_seed=7, n_tasks=30).fingerprint == other.fingerprint  # deterministic
    # the same mix, shuffled otherwise
    assert Counter(t.archetype for t in other) == Counter(t.archetype for t in SMALL)


def test_a_twin_pairs_halves_are_the_pending_or_unresolvable_kinds():
    for settle, fail in SMALL.twin_pairs:
        assert (settle.archetype, fail.archetype) in {("pending_settle", "pending_fail"),
                                                      ("unresolvable", "unresolvable")}


# --- a task's fields by archetype --------------------------------------------------------------

def test_draws_stay_inside_the_archetype_intervals():
    made = [make_task(a, seed=s) for a in C.ARCHETYPES for s in range(20)]
    for t in [*SMALL, *made]:
        lo, hi = C.DETERMINATION[t.archetype]
        assert lo <= t.determined_at <= hi
        assert t.order_value in C.ORDER_VALUES and t.other_order_value in C.ORDER_VALUES
        assert 30 <= t.retry_delay <= 120
        assert (200 <= t.processor_lag <= 400) if t.archetype == "stale_processor" else t.processor_lag == 0
        assert (1 <= t.duplicate_gap <= 60) if t.archetype == "duplicate_settlement" else t.duplicate_gap == 0
        if t.archetype == "late_chargeback":
            assert 200 <= t.chargeback_at - t.determined_at <= 600
        else:
            assert t.chargeback_at is None


def test_the_draws_reach_the_ends_over_many_made_tasks():
    lags, gaps, cbs, dets, delays, values = set(), set(), set(), set(), set(), set()
    for seed in range(1500):
        s = make_task("stale_processor", seed=seed)
        d = make_task("duplicate_settlement", seed=seed)
        lc = make_task("late_chargeback", seed=seed)
        sc = make_task("settled_clean", seed=seed)
        lags.add(s.processor_lag)
        gaps.add(d.duplicate_gap)
        cbs.add(lc.chargeback_at - lc.determined_at)
        dets.add(sc.determined_at)
        delays.add(sc.retry_delay)
        values |= {sc.order_value, sc.other_order_value}
    assert min(lags) == 200 and max(lags) == 400
    assert min(gaps) == 1 and max(gaps) == 60
    assert min(cbs) == 200 and max(cbs) == 600
    assert min(dets) == 30 and max(dets) == 110
    assert min(delays) == 30 and max(delays) == 120
    assert values == set(C.ORDER_VALUES)  # every price, the first and the last included


def test_outcomes_by_archetype_and_the_retry_outcome():
    """pending_fail fails; unresolvable flips a coin for the outcome and another for the retry; every
    other archetype settles, and its retry (a fresh capture) settles too."""
    seen_unres = set()
    for seed in range(60):
        assert make_task("pending_fail", seed=seed).outcome == "failed"
        assert make_task("pending_fail", seed=seed).retry_outcome == "settled"
        assert make_task("late_chargeback", seed=seed).outcome == "settled"
        assert make_task("pending_settle", seed=seed).retry_outcome == "settled"
        u = make_task("unresolvable", seed=seed)
        seen_unres.add((u.outcome, u.retry_outcome))
    assert seen_unres == {("settled", "settled"), ("settled", "failed"), ("failed", "settled"), ("failed", "failed")}


def test_make_task_names_one_order_per_seed_and_takes_overrides():
    t = make_task("late_chargeback", seed=12, determined_at=300, order_value=10.5)
    assert (t.task_id, t.order_id, t.unit, t.stream) == ("late_chargeback-12", "ord-0012", "ord-0012",
                                                         "task/late_chargeback/12")
    assert (t.determined_at, t.order_value, t.other_order_id) == (300, 10.5, "ord-0012-prev")
    assert t.twin_id is None and t.twin_side is None
    base = make_task("late_chargeback", seed=12)
    assert t.chargeback_at - 300 == base.chargeback_at - base.determined_at  # the delay is the same draw
    assert make_task("unresolvable", seed=3, outcome="failed").outcome == "failed"
    assert make_task("unresolvable", seed=3, outcome="settled").outcome == "settled"
    assert make_task("settled_clean", seed=0).order_id == "ord-0000"
    assert make_task("settled_clean", seed=10001).order_id == "ord-10001"


def test_make_task_streams_are_keyed_by_archetype_and_seed():
    assert make_task("pending_settle", seed=1) == make_task("pending_settle", seed=1)
    a, b = make_task("pending_settle", seed=1), make_task("pending_settle", seed=2)
    assert dataclasses.astuple(a)[3:] != dataclasses.astuple(b)[3:]


@pytest.mark.parametrize("kw, message", [
    ({"archetype": "bogus"}, "make_task: archetype"),
    ({"archetype": "pending_fail", "outcome": "settled"}, "make_task: outcome (of a pending_fail task)"),
    ({"archetype": "settled_clean", "determined_at": 29}, "make_task: determined_at (of a settled_clean task) "
                                                          "must be an integer in [30, 110], got 29"),
    ({"archetype": "settled_clean", "determined_at": 111}, "make_task: determined_at (of a settled_clean task) "
                                                           "must be an integer in [30, 110], got 111"),
    ({"archetype": "settled_clean", "order_value": 0.0}, "make_task: order_value"),
    ({"archetype": "settled_clean", "seed": -1}, "make_task: seed must be an integer >= 0, got -1"),
])
def test_make_task_checks_its_arguments(kw, message):
    with pytest.raises(FinbenchError) as info:
        make_task(**kw)
    assert str(info.value).startswith(message)


def test_make_task_takes_the_interval_ends():
    assert make_task("settled_clean", determined_at=30).determined_at == 30
    assert make_task("settled_clean", determined_at=110).determined_at == 110


@pytest.mark.parametrize("kw, message", [
    ({"n_tasks": 0}, "make_corpus: n_tasks must be an integer in [1, 100000], got 0"),
    ({"n_tasks": MAX_TASKS + 1}, "make_corpus: n_tasks must be an integer in [1, 100000], got 100001"),
    ({"master_seed": -1}, "make_corpus: master_seed must be an integer >= 0, got -1"),
])
def test_make_corpus_checks_its_arguments(kw, message):
    with pytest.raises(FinbenchError) as info:
        make_corpus(**kw)
    assert str(info.value).startswith(message)


# --- the corpus object -----------------------------------------------------------------------

def test_the_fingerprint_is_16_hex_of_sha256_over_the_canonical_json():
    tasks = SMALL.tasks[:3]
    canonical = json.dumps([t.to_dict() for t in tasks], sort_keys=True, separators=(",", ":")).encode()
    assert fingerprint_of(tasks) == hashlib.sha256(canonical).hexdigest()[:16]
    assert Corpus(tasks).fingerprint == fingerprint_of(tasks) and len(SMALL.fingerprint) == 16


def test_units_group_task_ids_in_corpus_order():
    units = SMALL.units
    assert sum(len(u) for u in units) == 30
    assert [i for u in units for i in u] == [t.task_id for t in SMALL]  # twins are adjacent
    for u in units:
        assert len({SMALL[i].unit for i in u}) == 1
        assert len(u) == (2 if SMALL[u[0]].twin_id else 1)


def test_a_corpus_is_a_sequence_by_id():
    assert list(SMALL) == list(SMALL.tasks) and len(SMALL) == 30
    first = SMALL.tasks[0]
    assert SMALL[first.task_id] is first
    with pytest.raises(KeyError) as info:
        SMALL["nope"]
    assert info.value.args == ("nope",)
    assert Corpus(list(SMALL.tasks[:2])).tasks == SMALL.tasks[:2]  # a list becomes a tuple
    assert isinstance(Corpus(list(SMALL.tasks[:2])).tasks, tuple)


@pytest.mark.parametrize("tasks", ["abc", b"abc", 5, None])
def test_tasks_must_be_a_sequence(tasks):
    with pytest.raises(CorpusError) as info:
        Corpus(tasks)
    assert str(info.value) == f"Corpus: tasks must be a sequence of Tasks, got {tasks!r}"  # names what it got


def test_task_ids_must_be_distinct():
    t = SMALL.tasks[0]
    with pytest.raises(CorpusError) as info:
        Corpus((SMALL.tasks[1], t, t))  # the repeated id, not the first one
    assert str(info.value) == f"Corpus: task ids must be distinct, got {t.task_id!r} twice"


def test_a_non_task_is_named_by_its_position():
    with pytest.raises(CorpusError) as info:
        Corpus((SMALL.tasks[0], "x"))
    assert str(info.value).startswith("Corpus: task 1 must be a Task")


def test_twin_pairs_must_be_whole():
    settle, _ = SMALL.twin_pairs[0]
    with pytest.raises(CorpusError) as info:
        Corpus((settle,)).twin_pairs
    assert str(info.value).startswith(f"Corpus: task {settle.task_id!r}: twin")


# --- the file ------------------------------------------------------------------------------------

def test_a_saved_corpus_is_a_digested_header_then_one_task_a_line(tmp_path):
    path = SMALL.save(tmp_path / "a" / "b" / "c.jsonl")  # missing folders are made
    text = path.read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    header = json.loads(lines[0])
    task_lines = [json.dumps(t.to_dict(), sort_keys=True) for t in SMALL]
    assert lines[1:] == task_lines and lines[0] == json.dumps(header, sort_keys=True)
    fields = {"kind": "finbench-corpus", "fingerprint": SMALL.fingerprint, "master_seed": C.PUBLIC_SEED,
              "n_tasks": 30}
    h = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    for line in task_lines:
        h.update(b"\n" + line.encode())
    assert header == {**fields, "digest": h.hexdigest()[:32]}
    back = load_corpus(path)
    assert back == SMALL and back.master_seed == C.PUBLIC_SEED


def test_a_header_edited_alone_fails_the_digest(tmp_path):
    path = SMALL.save(tmp_path / "c.jsonl")
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["master_seed"] = 1
    path.write_text("\n".join([json.dumps(header, sort_keys=True), *lines[1:]]) + "\n")
    with pytest.raises(CorpusError, match="the header's digest does not match"):
        load_corpus(path)


def test_blank_lines_are_skipped_when_loading(tmp_path):
    path = SMALL.save(tmp_path / "c.jsonl")
    path.write_text(path.read_text().replace("\n", "\n\n   \n"))
    assert load_corpus(path) == SMALL


def test_a_half_twin_file_names_the_line_of_the_task_at_fault(tmp_path):
    settle, _ = SMALL.twin_pairs[0]
    lone = Corpus((SMALL.tasks[0], settle) if SMALL.tasks[0] is not settle else (settle,), C.PUBLIC_SEED)
    path = tmp_path / "c.jsonl"
    # save writes any tasks; the twin check is load's
    lone.save(path)
    with pytest.raises(CorpusError) as info:
        load_corpus(path)
    line = 1 + 1 + lone.tasks.index(settle)
    assert str(info.value).startswith(f"{path}:{line}: task {settle.task_id!r}: twin")


# --- the stratified subset ------------------------------------------------------------------------

def test_the_subset_keeps_every_stratum_and_whole_twins_in_corpus_order():
    sub = stratified_subset(SMALL, size=10, seed=0)
    strata = {tuple(sorted({SMALL[i].archetype for i in u})) for u in SMALL.units}
    got = {tuple(sorted({sub[i].archetype for i in u})) for u in sub.units}
    assert got == strata
    ids = [t.task_id for t in sub]
    assert ids == [t.task_id for t in SMALL if t.task_id in set(ids)]
    assert all(len(u) == (2 if sub[u[0]].twin_id else 1) for u in sub.units)
    assert sub.master_seed == SMALL.master_seed


def test_the_subset_takes_units_in_proportion():
    """want = max(1, round(size * n_tasks / total / (n_tasks / units))) = max(1, round(size * units / total)):
    at size 30 of 30 tasks every unit; at size 1 one unit a stratum; at size 20, 2/3 of each stratum's units."""
    assert stratified_subset(SMALL, size=30).tasks == SMALL.tasks
    assert stratified_subset(SMALL, size=300).tasks == SMALL.tasks  # never more units than a stratum has
    one = stratified_subset(SMALL, size=1)
    n_strata = len({tuple(sorted({SMALL[i].archetype for i in u})) for u in SMALL.units})
    assert len(one.units) == n_strata == 10  # no unresolvable single at 30 tasks; its pairs are a stratum
    sub = stratified_subset(SMALL, size=20, seed=0)
    by = Counter(tuple(sorted({sub[i].archetype for i in u})) for u in sub.units)
    # units: settled_clean 4 -> round(2.67) = 3, lost 4 -> 3, stale 3 -> 2, pending_settle 1 -> round(.67) = 1,
    # pending_fail 2 -> round(1.33) = 1, duplicate 3 -> 2, partial 3 -> 2, late 2 -> 1;
    # the pending and unresolvable pairs: 2 units of 4 tasks -> round(20 * 4 / 30 / 2) = round(1.33) = 1
    assert by == {("settled_clean",): 3, ("lost_settlement",): 3, ("stale_processor",): 2,
                  ("pending_settle",): 1, ("pending_fail",): 1, ("duplicate_settlement",): 2,
                  ("partial_ledger",): 2, ("late_chargeback",): 1, ("pending_fail", "pending_settle"): 1,
                  ("unresolvable",): 1}
    assert len(sub) == 15 + 2 * 2


def test_the_subset_seed_picks_other_units():
    a = stratified_subset(SMALL, size=20, seed=0)
    b = stratified_subset(SMALL, size=20, seed=1)
    assert len(a) == len(b) and a.tasks != b.tasks
    assert stratified_subset(SMALL, size=20, seed=0) == a


@pytest.mark.parametrize("kw, message", [
    ({"size": 0}, "stratified_subset: size must be an integer >= 1, got 0"),
    ({"seed": -1}, "stratified_subset: seed must be an integer >= 0, got -1"),
])
def test_the_subset_checks_its_arguments(kw, message):
    with pytest.raises(FinbenchError) as info:
        stratified_subset(SMALL, **kw)
    assert str(info.value).startswith(message)


def test_the_subset_defaults_to_60_tasks_drawn_with_seed_0():
    """One stratum of 100 single units: want = round(size * 100 / 100) units, so exactly `size` tasks."""
    hundred = Corpus(tuple(make_task("settled_clean", seed=s) for s in range(100)))
    default = stratified_subset(hundred)
    assert len(default) == 60
    assert default == stratified_subset(hundred, size=60, seed=0) != stratified_subset(hundred, size=60, seed=1)
    assert len(stratified_subset(hundred, size=61)) == 61


def test_the_subset_draws_from_a_generator_keyed_by_seed_and_model_arm():
    """Reproducible across releases (Table V's subset): the units of a stratum are
    `default_rng(SeedSequence([seed, salt])).choice(units, want, replace=False)`, salt the first 4 bytes of
    SHA-256("model_arm") read big-endian; one stratum here, so one draw."""
    hundred = Corpus(tuple(make_task("settled_clean", seed=s) for s in range(100)))
    salt = int.from_bytes(hashlib.sha256(b"model_arm").digest()[:4], "big")
    for seed in (0, 3):
        rng = np.random.default_rng(np.random.SeedSequence([seed, salt]))
        picked = sorted(rng.choice(100, size=25, replace=False))
        want = [hundred.tasks[i].task_id for i in picked]
        assert [t.task_id for t in stratified_subset(hundred, size=25, seed=seed)] == want


def _plan_sizes_wrong(sizes) -> list[int]:
    from finbench.sim.corpus import _unit_counts

    def tasks(n):
        kinds, counts = _unit_counts(n)
        return sum(c * len(arch) for (_, arch, _), c in zip(kinds, counts))

    return [n for n in sizes if tasks(n) != n]


def test_the_unit_plan_holds_exactly_n_tasks_for_every_size_a_corpus_may_have():
    """The largest-remainder pass alone lands on n_tasks for every size from 1 to MAX_TASKS (a pair that does
    not fit never leaves a slot), and the plan holds what the counts say."""
    from finbench.sim.corpus import MAX_TASKS, _unit_plan

    assert _plan_sizes_wrong(range(1, MAX_TASKS + 1)) == []
    assert [sum(len(arch) for _, arch in _unit_plan(n)) for n in (1, 30, 321, 1000)] == [1, 30, 321, 1000]


# --- load_corpus's refusals name what they found -----------------------------------------------------------------

def _saved(tmp_path):
    path = tmp_path / "c.jsonl"
    make_corpus(n_tasks=30).save(path)
    return path, path.read_text().splitlines()


def test_load_corpus_names_a_path_that_is_not_one():
    with pytest.raises(CorpusError, match=r"^load_corpus: path must be a file path, got 12$"):
        load_corpus(12)


def test_a_content_fingerprint_that_does_not_match_names_both(tmp_path):
    path, lines = _saved(tmp_path)
    head = json.loads(lines[0])
    head["fingerprint"] = "0" * len(head["fingerprint"])
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    with pytest.raises(CorpusError, match=rf"does not match the header's '{'0' * len(head['fingerprint'])}': the "
                                          r"file was edited or truncated; regenerate it$"):
        load_corpus(path)


def test_an_edited_header_says_to_regenerate_the_file(tmp_path):
    path, lines = _saved(tmp_path)
    head = json.loads(lines[0])
    head["master_seed"] = head["master_seed"] + 1
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    with pytest.raises(CorpusError, match=r"the header's digest does not match its fields and tasks \(was the header "
                                          r"edited, e.g. master_seed or n_tasks\?\); regenerate the file$"):
        load_corpus(path)


def test_make_task_draws_are_keyed_by_archetype_and_seed():
    """Two archetypes at one seed draw from their own streams: a stale processor's lag is its own draw."""
    from finbench.sim.corpus import _draw_unit, make_task
    from finbench.sim.rng import generator

    want = _draw_unit(generator("make-task", "stale_processor", 4), "stale_processor")["processor_lag"]
    assert make_task("stale_processor", seed=4).processor_lag == want
    other = _draw_unit(generator("make-task", 4), "stale_processor")["processor_lag"]
    assert want != other  # the key's archetype matters for this draw (else the check above could not fail)
