"""Where the API's CPU goes: ``openagents dev`` (as the load benchmark runs it: SQLite store,
provisioning off) under a closed loop of one operation, sampled by py-spy; prints the top
self-time table (leaf frames, the idle threads' waits left out) and the inclusive time of the
frames named by ``--focus``.

    python -m bench.profile_api [--op status|message] [--users 10] [--seconds 20]
        [--py-spy PATH] [--top 25] [--keep FILE]

py-spy is not a dependency of the project: install it into the venv (``pip install py-spy``)
or pass its path. Not part of ``make bench`` (a profile, not a figure)."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import ROOT, runtime, say, scratch
from bench.load import USER_AGENT, Target, _drive

IDLE = ("select", "poll", "epoll", "wait", "acquire", "_worker", "sleep", "accept", "recv")


def _users(rt: Any, n: int) -> list[dict[str, str]]:
    import httpx

    users = []
    with httpx.Client(base_url=rt.base_url, timeout=60) as client:
        for i in range(n):
            token = rt.token(f"profile-{i}")
            body = client.post(
                "/api/sessions",
                json={"title": f"profile {i}"},
                headers={"authorization": f"Bearer {token}", "user-agent": USER_AGENT},
            ).json()
            users.append({"token": token, "session": body["session"]["id"],
                          "chat": body["chat"]["id"], "baseline": "", "prefix": "p"})  # fmt: skip
    return users


def _frame(entry: str) -> str:
    """``fn (path:line)`` -> ``fn (package/file.py)``."""
    name, _, where = entry.partition(" (")
    path = where.rsplit(":", 1)[0].rstrip(")")
    for marker in ("site-packages/", "layers/core/", str(ROOT) + "/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})"


def table(collapsed: Path, top: int, focus: list[str]) -> str:
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f for f in stack.split(";") if " (" in f]
        if not frames:
            continue
        leaf = _frame(frames[-1])
        if any(leaf.startswith(w) for w in IDLE) and "sqlite" not in leaf:
            continue  # a thread waiting is not CPU (py-spy --idle is off, but GIL waits show)
        n = int(count)
        total += n
        self_time[leaf] += n
        for f in {_frame(x) for x in frames}:
            if any(key in f for key in focus):
                inclusive[f] += n
    lines = [f"{total} samples on CPU", "", "| self % | frame |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | `{f}` |" for f, n in self_time.most_common(top)]
    if inclusive:
        lines += ["", "| inclusive % | frame |", "|---:|---|"]
        lines += [f"| {100 * n / total:.1f} | `{f}` |" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    cli = argparse.ArgumentParser(prog="python -m bench.profile_api")
    cli.add_argument("--op", choices=("status", "message"), default="status")
    cli.add_argument("--users", type=int, default=10)
    cli.add_argument("--seconds", type=float, default=20)
    cli.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    cli.add_argument("--top", type=int, default=25)
    cli.add_argument("--keep", type=Path, help="write py-spy's collapsed stacks here")
    cli.add_argument("--focus", nargs="*", default=["verify", "identity", "serialize",
                     "Observe", "run_in_threadpool", "sandbox_status", "post_message",
                     "jsonable_encoder", "_prepare_response_content", "validate"])  # fmt: skip
    args = cli.parse_args(argv)
    env = {"OPENAGENTS_PROVISION_ON_CREATE": "false", "OPENAGENTS_RATE_LIMIT_PER_MINUTE": "100000"}
    with scratch("profile") as home, runtime(home / "home", env) as rt:
        users = _users(rt, args.users)
        target = Target("runtime", rt.base_url, "/api/sandbox/status", rt.pid)
        out = home / "profile.txt"
        spy = subprocess.Popen(  # noqa: S603 - a profiler the caller named
            [args.py_spy, "record", "--pid", str(rt.pid), "--format", "raw", "--rate", "250",
             "--nonblocking", "--gil", "--output", str(out),
             "--duration", str(int(args.seconds) + 1)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(1)  # py-spy attached
        ops = ("status",) if args.op == "status" else ("message",)
        phase = asyncio.run(_drive(target, users, ops, args.seconds))
        spy.wait(timeout=120)
        say(f"profile: {phase.count(ops[0])} requests in {phase.elapsed:.1f} s, "
            f"{phase.server_cpu * 1000 / max(1, phase.count(ops[0])):.2f} ms CPU each")  # fmt: skip
        print(table(out, args.top, args.focus))
        if args.keep:
            args.keep.write_text(out.read_text())


if __name__ == "__main__":
    main()
