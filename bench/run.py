"""``python -m bench.run [BENCHMARK ...] [--quick] [options]``: run benchmarks, print a table,
write ``bench/results.json``. With no name, every benchmark runs, in the order listed."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.common import Quiet, dump_json, machine, say

BENCHMARKS: dict[str, str] = {
    "requests": "bench.requests",
    "overhead": "bench.overhead",
    "coldstart": "bench.coldstart",
    "snapshot": "bench.snapshot",
    "resume": "bench.resume",
    "lifecycle": "bench.lifecycle",
    "load": "bench.load",
    "memory": "bench.memory",
    "agent": "bench.agent",
    "checkpoint": "bench.checkpoint",
    "scale": "bench.scale",
    "previews": "bench.previews",
    "messages": "bench.messages",
}
RESULTS = Path(__file__).resolve().parent / "results.json"


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    cli.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], metavar="BENCHMARK",
                     help=f"any of: {', '.join(BENCHMARKS)} (default: all)")  # fmt: skip
    cli.add_argument("--quick", action="store_true", help="small profiles (a minute or two)")
    cli.add_argument("--samples", type=int, help="overhead: requests per path (1000; quick 200)")
    cli.add_argument("--runs", type=int, help="coldstart: fresh interpreters per module (7; 3)")
    cli.add_argument("--workspace-mb", type=int,
                     help="snapshot, checkpoint: workspace size (300; quick 30)")  # fmt: skip
    cli.add_argument("--files", type=int,
                     help="snapshot, checkpoint: source files (20000; quick 2000)")  # fmt: skip
    cli.add_argument("--resume-mb", type=int, help="resume: workspace size (50; quick 10)")
    cli.add_argument("--cycles", type=int, help="resume: pause/resume cycles (3; quick 2)")
    cli.add_argument("--sessions", type=int, help="lifecycle: idle sessions (100; quick 30)")
    cli.add_argument("--idle-timeout", type=int, default=10, help="lifecycle: seconds (10)")
    cli.add_argument("--max-rss-gib", type=float, default=6.0,
                     help="lifecycle: stop when the runtime's memory passes this (6)")  # fmt: skip
    cli.add_argument("--users", type=int, help="load: simulated users (50; quick 20)")
    cli.add_argument("--duration", type=float, help="load: seconds, status + post (60; quick 10)")
    cli.add_argument(
        "--compare-duration", type=float, help="load: seconds, status only vs the baseline"
    )
    cli.add_argument("--rate", type=float, default=100.0,
                     help="load: open loop, status polls a second (100)")  # fmt: skip
    cli.add_argument("--post-rate", type=float, default=10.0,
                     help="load: open loop, message posts a second (10)")  # fmt: skip
    cli.add_argument("--open-duration", type=float,
                     help="load: open loop, seconds a target, 0 skips (60; quick 10)")  # fmt: skip
    cli.add_argument("--memory-sessions", type=int, help="memory: sessions (500; quick 200)")
    cli.add_argument("--sandboxes", type=int, help="memory: idle sandboxes (4; quick 2)")
    cli.add_argument("--steps", type=int, help="agent: todo_write steps in one turn (50; quick 10)")
    cli.add_argument("--output", type=Path, default=RESULTS, help="results file")
    cli.add_argument("--show", action="store_true", help="print the stored results; run nothing")
    return cli


def defaults(args: argparse.Namespace) -> argparse.Namespace:
    quick = args.quick
    for name, full, small in (
        ("samples", 1000, 200),
        ("runs", 7, 3),
        ("workspace_mb", 300, 30),
        ("files", 20_000, 2_000),
        ("resume_mb", 50, 10),
        ("cycles", 3, 2),
        ("sessions", 100, 30),
        ("users", 50, 20),
        ("duration", 60.0, 10.0),
        ("open_duration", 60.0, 10.0),
        ("memory_sessions", 500, 200),
        ("sandboxes", 4, 2),
        ("steps", 50, 10),
    ):
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    return args


def table(rows: list[list[str]], out: Any) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    header = ["benchmark", "result", "detail"]
    print(f"{header[0]:<{widths[0]}}  {header[1]:<{widths[1]}}  {header[2]}", file=out)
    print(f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * 30}", file=out)
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}", file=out)


def show(stored: dict[str, Any], names: list[str]) -> int:
    rows: list[list[str]] = []
    for name in names:
        entry = stored["benchmarks"].get(name)
        if entry is None:
            rows.append([name, "not run", ""])
            continue
        module: ModuleType = importlib.import_module(BENCHMARKS[name])
        rows.extend(module.rows(entry["result"]))
        rows.append(
            [
                f"  ({name})",
                f"{entry['seconds']} s",
                f"{entry['at']}, load {entry['machine']['load1']}",
            ]
        )
    table(rows, sys.stdout)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = defaults(parser().parse_args(argv))
    names = args.names or list(BENCHMARKS)
    stored: dict[str, Any] = {}
    if args.output.exists():
        try:
            stored = json.loads(args.output.read_text())
        except ValueError:
            stored = {}
    stored.setdefault("benchmarks", {})
    if args.show:
        return show(stored, names)
    rows: list[list[str]] = []
    failed = []
    started = time.monotonic()
    with Quiet() as quiet:
        for name in names:
            module: ModuleType = importlib.import_module(BENCHMARKS[name])
            say(f"{name}: started")
            began = time.monotonic()
            try:
                result = module.run(args)
            except Exception:
                traceback.print_exc(file=sys.stderr)
                failed.append(name)
                rows.append([name, "FAILED", "see the traceback above"])
                continue
            seconds = round(time.monotonic() - began, 1)
            say(f"{name}: done in {seconds} s")
            stored["benchmarks"][name] = {
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                "quick": args.quick,
                "seconds": seconds,
                "machine": machine(),
                "result": result,
            }
            rows.extend(module.rows(result))
            dump_json(args.output, stored)
        out = quiet.out
    print(f"\nOpen Agents benchmarks on {machine()['cpu']} ({machine()['cores']} cores)"
          f"{' [quick]' if args.quick else ''}", file=out)  # fmt: skip
    table(rows, out)
    print(f"\n{len(names)} benchmarks in {time.monotonic() - started:.0f} s; "
          f"results in {args.output}", file=out)  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
