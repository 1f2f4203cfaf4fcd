"""The commands for a language model beside `eval --model`: `finbench mock-server` (a scripted model on
127.0.0.1) and `finbench inspect` (the package's Inspect task, exiting 1 when a sample is left unscored)."""
from __future__ import annotations

import argparse
import re
import sys

from finbench.commands import options as O
from finbench.errors import show
from finbench.eval_cli import EXIT_SOFTWARE, EXIT_USAGE, plain

def add_mock_server(commands) -> None:
    srv = commands.add_parser(
        "mock-server", help="serve a scripted model on 127.0.0.1 (OpenAI-compatible) to try the model path offline",
        description="Serve an OpenAI-compatible chat-completions endpoint on 127.0.0.1 that plays a careful "
                    "strategy from the conversation alone (probe, wait, ship when settled, one fresh-key retry after "
                    "a confirmed failure, escalate near the deadline: finbench.agents.mock_server). It stops by "
                    "itself after --idle-exit seconds without a request.")
    srv.add_argument("--port", type=int, default=8765, help="the port (default: 8765; 0: any free port)")
    srv.add_argument("--latency", type=float, default=0.25, metavar="SECONDS",
                     help="seconds before each answer (default: 0.25)")
    srv.add_argument("--max-in-flight", type=O.count, default=None, metavar="K",
                     help="answer 429 to a request that arrives while K are being answered (default: never)")
    srv.add_argument("--max-messages", type=O.count, default=None, metavar="N",
                     help="refuse a conversation of more than N messages with a context-length 400 (default: never)")
    srv.add_argument("--wording", choices=("vllm", "llamacpp"), default="vllm",
                     help="whose words the context-length 400 uses (default: vllm)")
    srv.add_argument("--no-usage", action="store_true", help="answers carry no token usage")
    srv.add_argument("--idle-exit", type=float, default=600.0, metavar="SECONDS",
                     help="stop after this long without a request (default: 600)")
    srv.add_argument("--model", default="careful", help="the model name it lists (any name is answered)")
    srv.set_defaults(func=_mock_server, parser=srv)


def _mock_server(args: argparse.Namespace) -> int:
    from finbench.agents.mock_server import main as serve  # lazy: `grade` loads no server

    return serve(args)


def add_inspect(commands) -> None:
    ins = commands.add_parser(
        "inspect", help="play the benchmark through Inspect AI and exit 1 if any sample is left unscored",
        description="Run the package's Inspect task (finbench/finbench: Table V's subset by default) with "
                    "inspect_ai.eval, as `inspect eval finbench/finbench` does, then exit 1 naming every sample left "
                    "without a score (a model error other than a context-length refusal, which closes and scores "
                    "its sample) and 0 when every sample was scored. docs/inspect.md.")
    ins.add_argument("--model", required=True, type=O.text, help="Inspect's model name, e.g. openai-api/local/llama3.1")
    ins.add_argument("--task", choices=("finbench", "table5"), default="finbench", help="the task (default: finbench)")
    ins.add_argument("-T", dest="task_args", action="append", default=[], metavar="NAME=VALUE",
                     help="a task argument, as Inspect takes it (YAML value): -T n_tasks=30 -T \"seeds=[0,1]\"")
    ins.add_argument("--max-connections", type=O.count, default=None, metavar="N",
                     help="requests in flight at once (Inspect's default: 10)")
    ins.add_argument("--limit", type=O.count, default=None, metavar="N", help="the first N samples only")
    ins.add_argument("--log-dir", default=None, metavar="DIR", help="where Inspect writes its log (default: ./logs)")
    ins.set_defaults(func=_inspect, parser=ins)


def _inspect(args: argparse.Namespace) -> int:
    import yaml  # lazy: as Inspect reads -T values

    task_args = {}
    for item in args.task_args:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            print(plain(f"finbench inspect: -T takes NAME=VALUE, got {show(item)}"), file=sys.stderr)
            return EXIT_USAGE
        task_args[name.strip()] = yaml.safe_load(value)
    try:
        from inspect_ai import eval as inspect_eval
    except ModuleNotFoundError as exc:
        print(f"finbench inspect: needs inspect-ai (pip install inspect-ai): {exc}", file=sys.stderr)
        return EXIT_SOFTWARE
    from finbench.running.inspect_task import unscored  # lazy: `grade` loads no simulator

    kw = {k: v for k, v in (("max_connections", args.max_connections), ("limit", args.limit),
                            ("log_dir", args.log_dir)) if v is not None}
    try:
        logs = inspect_eval(f"finbench/{args.task}", model=args.model, task_args=task_args, fail_on_error=False, **kw)
    except Exception as exc:  # noqa: BLE001 - Inspect's own refusal (no such model, a missing variable): one line
        words = " ".join(re.sub(r"\[/?[a-z ]+\]", "", str(exc)).split())  # Inspect's rich markup dropped
        print(plain(f"finbench inspect: Inspect could not run: {type(exc).__name__}: {words[:300]}"), file=sys.stderr)
        return EXIT_SOFTWARE
    missing = unscored(logs)
    scored = sum(1 for log in logs for s in (log.samples or []) if (s.scores or {}).get("finbench"))
    if missing:
        print(plain(f"finbench inspect: {len(missing)} unscored ({scored} samples scored): " + "; ".join(missing[:5])
                    + ("; ..." if len(missing) > 5 else "")), file=sys.stderr)
        return 1
    print(plain(f"finbench inspect: every sample scored ({scored})"))
    return 0
