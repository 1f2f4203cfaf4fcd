"""`make bench`: episodes per second for the headline evaluation, fast path against public path.

The headline evaluation is 321 tasks x 5 seeds x 9 policies = 14,445 episodes,
grading included, no episode cache, one process. It runs twice per repeat:

- fast path: the package's own policies, driven without defensive copies or
  re-validation (what `evaluate` does for them);
- public path: the same policies wrapped as a user's agent would be, so every
  call goes through `FinalityEnv.step` with its checks and copies.

Before each measurement every memo in the package is cleared (fault schedules,
reference positions, keyed draws, grades), so nothing is reused between them.
Prints min and median over the repeats, and the ratio. Not a timed test.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from finbench.agents.registry import DEFAULT_POLICIES, PolicyRef, get_policy
from finbench.grading import Contract, grade_trace
from finbench.running.episode import clear_memos as clear_engine
from finbench.running.evaluation import evaluate
from finbench.running.run import clear_memo
from finbench.sim.corpus import make_corpus


class Public:
    """A built-in policy behind a user-style wrapper: the runner cannot tell it from outside code."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.privileged = getattr(inner, "privileged", False)

    def begin(self, brief, resolution=None):
        if self.privileged:
            self.inner.begin(brief, resolution)
        else:
            self.inner.begin(brief)

    def act(self, obs):
        return self.inner.act(obs)


def clear_memos() -> int:
    """Clear every memo in the package (`functools` caches and the engine's own); returns how many caches."""
    n = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("finbench.") or module is None:
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == name:
                value.cache_clear()
                n += 1

    clear_engine()  # plain-dict memos too (outcomes, grades, worlds)
    clear_memo()
    return n


def _public_refs():
    return [PolicyRef.of(_Factory(name), label=name) for name in DEFAULT_POLICIES]


class _Factory:
    def __init__(self, name):
        self.name = name
        self.__name__ = name

    def __call__(self):
        return Public(get_policy(self.name))


def measure(corpus, policies, seeds) -> tuple[int, float]:
    clear_memos()
    start = time.perf_counter()
    n = len(evaluate(corpus, policies, seeds=seeds, n_jobs=1, cache=False))
    return n, time.perf_counter() - start


def grader_scaling(sizes=(1_000, 8_000, 64_000)) -> list[tuple[int, float]]:
    """(records, µs per record) grading a trace of n authorizations and n effects of another amount:
    the worst case for finding an earlier authorization (each effect looks and finds none)."""
    out = []
    for n in sizes:
        recs = [{"kind": "log_meta", "complete": True}]
        recs += [{"seq": i, "kind": "authorize", "order": "A", "amount": 50} for i in range(1, n + 1)]
        recs += [{"seq": n + i, "kind": "effect", "op": "refund", "order": "A", "amount": 49, "key": f"k{i}",
                  "receipt": f"r{i}", "new_effect": True} for i in range(1, n + 1)]
        start = time.perf_counter()
        grade_trace(recs, Contract("A", 50))
        out.append((2 * n, (time.perf_counter() - start) / (2 * n) * 1e6))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m finbench.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="measurements per path (default 5)")
    parser.add_argument("--tasks", type=int, default=321, help="corpus size (default 321)")
    args = parser.parse_args(argv)

    corpus = make_corpus(n_tasks=args.tasks)
    seeds = range(5)
    rates: dict[str, list[float]] = {"fast": [], "public": []}
    n = 0
    for _ in range(args.repeats):
        for path, policies in (("fast", None), ("public", _public_refs())):
            n, s = measure(corpus, policies, seeds)
            rates[path].append(n / s)
    print(f"headline evaluation: {n:,} episodes ({len(corpus)} tasks x 5 seeds x 9 policies), grading included, "
          f"no cache, one process, {args.repeats} repeats")
    for path, r in rates.items():
        print(f"  {path:<7} min {min(r):>8,.0f}  median {statistics.median(r):>8,.0f} episodes/s")
    ratio = statistics.median(rates["fast"]) / statistics.median(rates["public"])
    print(f"  fast / public (medians): {ratio:.2f}x")
    print("grader, n authorizations + n effects of another amount: "
          + ", ".join(f"{n:,} records {us:.1f} µs/record" for n, us in grader_scaling()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
