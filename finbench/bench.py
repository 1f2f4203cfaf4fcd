"""`make bench`: episodes per second, this tree beside the previous release, in one run.

Three workloads over the corpus (321 tasks) x 5 seeds, grading included, no
episode cache, one process:

- `headline`: the nine policies (14,445 episodes), as `evaluate` plays them
  (the built-in policies take the fast path);
- `user`: the README's `Patient`, a user's class, so every call goes through
  `FinalityEnv.step` with its checks and copies (1,605 episodes);
- `public`: the nine behind a user-style wrapper, so the runner cannot tell
  them from outside code (the fast path's gain is headline / public).

Each measurement runs in a fresh process (imports and the corpus outside the
timing, every memo cold) and is timed in CPU seconds of that process, so load
from other processes moves it less than wall time would. The previous release
(`BASELINE`, a commit, extracted with `git archive` under `build/bench/`) is
measured by the same script in the same run, alternating with this tree, and
the ratio printed. Then the grader's µs per record. Not a timed test.

`python -m finbench.bench model` (`make bench-model`) measures a language model's episodes instead: Table V's
subset against the scripted model server at a latency, one connection beside many (`model_main`).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from finbench.grading import Contract, grade_trace

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "ebcbf77"
"""The previous release (1.0), by commit, so a fresh clone has it (a tag is not cloned by default).
Move it when a release is made."""
RELEASE_TO_PROTOTYPE = 0.69
"""Release 1.0's headline rate as a share of the private prototype's (of the same design), measured outside
the project (alternated fresh processes on a quiet host, 2026-12-07): what turns the ratio to release 1.0
printed here into a ratio to the prototype, which the project aims at."""
GOALS = {"headline": 1.6, "user": 0.8}
"""The goals (issue 46): the headline at 1.6x the prototype; `Patient` at 0.8 of the headline's rate."""
WORKLOADS = ("headline", "user", "public")

# One measurement, run by `python -c` under either tree: only the public API, which both share.
_WORKER = r'''
import sys, time
import finbench as fb
from finbench.bench import Public

class Patient:
    """The README's user policy."""
    name = "patient"
    def begin(self, brief):
        self.order = brief["order_id"]
    def act(self, obs):
        caps = (obs.get("result") or {}).get("captures", [])
        if any(c["status"] == "settled" for c in caps):
            return "ship", {"order_id": self.order}
        if obs["t"] > 590:
            return "escalate", {"order_id": self.order}
        return "probe_processor", {"order_id": self.order}

def public(name):
    def make():
        return Public(fb.get_policy(name))
    make.__name__ = name
    return fb.PolicyRef.of(make, label=name)

kind, n_tasks = sys.argv[1], int(sys.argv[2])
corpus = fb.make_corpus(n_tasks=n_tasks)
names = ["random", "optimistic", "eager", "majority_vote", "sop", "react", "reflection", "finality_gate",
         "finality_oracle"]
policies = {"headline": None, "user": [Patient], "public": [public(n) for n in names]}[kind]
evaluate = fb.evaluate
# imports that happen on first use (pandas' lazy parts) outside the timing: one episode of another corpus
evaluate(fb.make_corpus(n_tasks=1, master_seed=1), policies, seeds=[9], n_jobs=1, cache=False)
start = time.process_time()
n = len(evaluate(corpus, policies, seeds=range(5), n_jobs=1, cache=False))
print(n, time.process_time() - start)
'''


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


def measure(kind: str, tree: Path, n_tasks: int) -> tuple[int, float]:
    """(episodes, CPU seconds) of one workload in a fresh process importing `finbench` from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    out = subprocess.run([sys.executable, "-c", _WORKER, kind, str(n_tasks)], env=env, cwd=tree,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"bench: {kind} under {tree} failed:\n{out.stderr.strip()}")
    n, seconds = out.stdout.split()[-2:]
    return int(n), float(seconds)


def previous_release(tag: str = BASELINE) -> Path | None:
    """The tree of release `tag` under build/bench/<tag>/ (extracted once), or None if git or the tag is missing."""
    dest = ROOT / "build" / "bench" / tag
    if (dest / "finbench" / "__init__.py").exists():
        return dest
    try:
        blob = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", tag, "finbench"],
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    return dest


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
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["model"]:
        return model_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m finbench.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="measurements per workload and tree (default 3)")
    parser.add_argument("--tasks", type=int, default=321, help="corpus size (default 321)")
    parser.add_argument("--baseline", default=BASELINE, help=f"git commit or tag of the previous release (default {BASELINE}: release 1.0)")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    args = parser.parse_args(argv)

    trees = {"this tree": ROOT}
    if not args.no_baseline:
        prev = previous_release(args.baseline)
        if prev is None:
            print(f"note: no previous release to compare with (git tag {args.baseline!r} not found)")
        else:
            trees[args.baseline] = prev
    rates: dict = {(k, t): [] for k in WORKLOADS for t in trees}
    counts = {}
    for _ in range(args.repeats):
        for kind in WORKLOADS:
            for name, tree in trees.items():  # alternating: both trees see the same load
                n, seconds = measure(kind, tree, args.tasks)
                rates[kind, name].append(n / seconds)
                counts[kind] = n
    print(f"episodes per CPU second, one process, grading included, no cache ({args.tasks} tasks x 5 seeds; "
          f"median of {args.repeats}, each in a fresh process)")
    head = f"  {'workload (episodes)':<44}" + "".join(f"{name:>12}" for name in trees)
    print(head + ("       ratio" if len(trees) == 2 else ""))
    labels = {"headline": "headline: the nine policies", "user": "user policy (README's Patient)",
              "public": "the nine through the public step"}
    for kind in WORKLOADS:
        med = [statistics.median(rates[kind, t]) for t in trees]
        line = f"  {labels[kind] + f' ({counts[kind]:,})':<44}" + "".join(f"{m:>12,.0f}" for m in med)
        if len(med) == 2:
            line += f"{med[0] / med[1]:>11.2f}x"
        print(line)
    mine = {kind: statistics.median(rates[kind, "this tree"]) for kind in WORKLOADS}
    print(f"  fast path / public step (this tree): {mine['headline'] / mine['public']:.2f}x")
    if trees.get(BASELINE) is not None:
        ratio = mine["headline"] / statistics.median(rates["headline", BASELINE])
        print(f"  release 1.0 ({BASELINE}) ran at about {RELEASE_TO_PROTOTYPE} of the prototype (measured outside); by that"
              f" factor the headline is about {ratio * RELEASE_TO_PROTOTYPE:.2f}x the prototype (goal {GOALS['headline']}x)")
    print(f"  Patient / the nine (this tree): {mine['user'] / mine['headline']:.2f} (goal {GOALS['user']})")
    print("grader, n authorizations + n effects of another amount: "
          + ", ".join(f"{n:,} records {us:.1f} µs/record" for n, us in grader_scaling()))
    return 0


# --- `make bench-model`: a model's episodes at one connection and at many -------------------------------------

MODEL_DOC = "a model's episodes against a server with a latency, one connection beside many"

# Table V's subset (61 episodes of the 321-task corpus, seed 0) is played by `model_arm.run_model` against the
# scripted model server (`finbench.agents.mock_server`, on 127.0.0.1) answering each request after `--latency`
# seconds, once with one connection and once with `--connections` (fresh transcripts each time, one server, so
# the two runs' transcripts can be compared byte for byte). It prints both walls, their ratio, the requests and
# tokens, whether rows and transcripts are identical, and what that means per 1,000 episodes. A benchmark, not
# a timed test: the walls depend on the host.
#
#     make bench-model                                  # 0.25 s a request, 1 and 16 connections
#     python -m finbench.bench model --latency 2 --connections 32 --max-in-flight 8


def _files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


def measure_model(latency: float, connections: list[int], max_in_flight: int | None = None, size: int = 60) -> dict:
    """Walls, requests, tokens and the rows of Table V's subset at each number of connections."""
    from finbench.agents.llm_traffic import Usage  # lazy: `make bench` loads no model client
    from finbench.agents.mock_server import MockServer  # lazy: as above
    from finbench.experiments import model_arm  # lazy: as above
    from finbench.sim import constants as C  # lazy: as above

    run = model_arm.subset_run(C.PUBLIC_SEED, C.DEFAULT_TASKS, size, 0, seeds=[0], cache=False)
    out: dict = {"episodes": len(run.corpus), "runs": {}}
    scratch = Path(tempfile.mkdtemp(prefix="finbench-bench-model-"))
    try:
        with MockServer(latency=latency, max_in_flight=max_in_flight) as srv:
            for n in connections:
                usage, before = Usage(), srv.stats()
                started = time.perf_counter()
                rows = model_arm.run_model(run, "careful", srv.base_url, transcripts=scratch / str(n), progress=False,
                                           max_connections=n, usage=usage)
                wall = time.perf_counter() - started
                after = srv.stats()
                out["runs"][n] = {"wall": wall, "rows": rows, "files": _files(scratch / str(n)),
                                  "usage": usage.summary(), "received": after["requests"] - before["requests"],
                                  "limited": after["rate_limited"] - before["rate_limited"]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def model_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m finbench.bench model", description=MODEL_DOC)
    p.add_argument("--latency", type=float, default=0.25, help="seconds the server takes per request (0.25)")
    p.add_argument("--connections", type=int, default=16, help="the many connections, beside one (16)")
    p.add_argument("--max-in-flight", type=int, default=None, help="the server answers 429 above this many")
    args = p.parse_args(argv)
    res = measure_model(args.latency, [1, args.connections], args.max_in_flight)
    one, many = res["runs"][1], res["runs"][args.connections]
    same_rows = one["rows"].equals(many["rows"])
    same_files = one["files"] == many["files"]
    print(f"Table V's subset: {res['episodes']} episodes, the scripted model at {args.latency:g} s a request"
          + (f", 429 above {args.max_in_flight} in flight" if args.max_in_flight else ""))
    print(f"{'connections':>11}  {'wall s':>8}  {'requests':>8}  {'sent':>6}  {'429s':>5}  {'tokens in':>10}  "
          f"{'tokens out':>10}  {'latency median s':>16}")
    for n, r in res["runs"].items():
        u = r["usage"]
        print(f"{n:>11}  {r['wall']:>8.1f}  {u['requests']:>8,}  {r['received']:>6,}  {r['limited']:>5,}  "
              f"{u['input_tokens']:>10,}  {u['output_tokens']:>10,}  {u['latency_median_s'] or 0:>16.3f}")
    ratio = one["wall"] / many["wall"]
    print(f"ratio: {ratio:.1f}x faster with {args.connections} connections; rows identical: {same_rows}; "
          f"transcripts identical: {same_files} ({len(one['files'])} files)")
    per = 1000 / res["episodes"]
    print(f"per 1,000 episodes at {args.latency:g} s a request: about {one['wall'] * per / 60:.0f} min with one "
          f"connection, {many['wall'] * per / 60:.1f} min with {args.connections} "
          f"({one['usage']['requests'] * per:,.0f} requests)")
    return 0 if same_rows and same_files else 1


if __name__ == "__main__":
    sys.exit(main())
