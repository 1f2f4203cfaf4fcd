"""`make bench-model`: a model's episodes against a server with a latency, one connection beside many.

Table V's subset (61 episodes of the 321-task corpus, seed 0) is played by `model_arm.run_model` against the
scripted model server (`finbench.agents.mock_server`, on 127.0.0.1) answering each request after `--latency`
seconds, once with one connection and once with `--connections` (fresh transcripts each time, one server, so
the two runs' transcripts can be compared byte for byte). It prints both walls, their ratio, the requests and
tokens, whether rows and transcripts are identical, and what that means per 1,000 episodes. A benchmark, not
a timed test: the walls depend on the host.

    make bench-model                                  # 0.25 s a request, 1 and 16 connections
    python -m finbench.bench_model --latency 2 --connections 32 --max-in-flight 8
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["main", "measure"]


def _files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


def measure(latency: float, connections: list[int], max_in_flight: int | None = None, size: int = 60) -> dict:
    """Walls, requests, tokens and the rows of Table V's subset at each number of connections."""
    from finbench.agents.llm_traffic import Usage
    from finbench.agents.mock_server import MockServer
    from finbench.experiments import model_arm
    from finbench.sim import constants as C

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m finbench.bench_model", description=__doc__.split("\n")[0])
    p.add_argument("--latency", type=float, default=0.25, help="seconds the server takes per request (0.25)")
    p.add_argument("--connections", type=int, default=16, help="the many connections, beside one (16)")
    p.add_argument("--max-in-flight", type=int, default=None, help="the server answers 429 above this many")
    args = p.parse_args(argv)
    res = measure(args.latency, [1, args.connections], args.max_in_flight)
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
    raise SystemExit(main())
