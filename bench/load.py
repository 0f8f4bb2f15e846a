"""Load: simulated users against the one-machine runtime (``openagents dev`` in a child
process, on its default SQLite store, so the load generator does not share its interpreter),
against a baseline measured in the same run with the same client: a one-route FastAPI app doing
one SQLite read per request (``bench/sqlite_baseline.py``, uvicorn, another child process).

The client is ``bench/http1.py`` (asyncio streams, one keep-alive connection per user), cheap
enough that the servers, not the load generator, are what is measured. Three phases, every user
with its own session and no think time (every request times out after 30 s):

- **mixed** (``--duration``): each user loops over a status poll and a user message post.
  Reported: errors, latency percentiles per operation, and lost writes (every acknowledged
  message is read back after the phase).
- **status only** against the runtime and against the baseline, alternated in rounds of
  ``--compare-duration`` / 4 each, so machine load from elsewhere hits both alike: status
  throughput and its ratio to the baseline.
- **open loop** (``--open-duration``, runtime and baseline alternated in rounds): a fixed offered
  rate (``--rate`` status polls and ``--post-rate`` message posts a second, spread over the
  users' sessions), sent on schedule whatever the answers do (a new keep-alive connection when
  all of a user's are busy); each latency counts from the request's due time. Reported: p50/p99
  per operation and errors, for both, and each server's CPU per request. Goal: p99 <= 50 ms and
  0 errors at 100 + 10 req/s — the latency a team of real users sees, which the closed loop
  (Little's law: latency = users / throughput) cannot show.

Goals (docs/benchmarks.md): 0 errors, 0 lost, p99 <= 100 ms for status and post in the mixed
phase, status throughput >= 0.5x the baseline. Sessions are created without provisioning: this
measures the API and the store, not sandboxes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import PYTHON, ROOT, ms, runtime, say, scratch, summary
from bench.http1 import Connection

USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) openagents-bench"
P99_GOAL_MS = 100.0
THROUGHPUT_GOAL = 0.5
OPEN_P99_GOAL_MS = 50.0
KEEP_ALIVE_SECONDS = 4.0  # below uvicorn's timeout_keep_alive (5 s), as both servers run
ROUNDS = 2
IDLE_SECONDS = 3.0


@dataclass
class Target:
    """Where a phase sends its status polls (and, for the runtime, its posts)."""

    name: str
    base_url: str
    status_path: str
    pid: int


@dataclass
class Phase:
    timings: dict[str, list[float]]
    errors: Counter[str]
    acknowledged: Counter[str]
    elapsed: float
    server_cpu: float = 0.0  # seconds of CPU the server process used during the phase
    client_cpu: float = 0.0  # and this load generator

    def count(self, op: str) -> int:
        return len(self.timings.get(op, []))


async def _user(
    connection: Connection,
    target: Target,
    u: dict[str, str],
    ops: tuple[str, ...],
    deadline: float,
    user: int,
    phase: Phase,
) -> None:
    messages = f"/api/sessions/{u['session']}/chats/{u['chat']}/messages"
    status_id = u["session"] if target.name == "runtime" else u["baseline"]
    sequence = 0
    while time.monotonic() < deadline:
        for op in ops:
            began = time.perf_counter()
            try:
                if op == "status":
                    response = await connection.get(
                        target.status_path, params={"sessionId": status_id}
                    )
                else:
                    sequence += 1
                    body = {
                        "message": {
                            "id": f"load-{user}-{u['prefix']}-{sequence}",
                            "role": "user",
                            "parts": [{"type": "text", "text": f"message {sequence}"}],
                        }
                    }
                    response = await connection.post(messages, body)
            except Exception as exc:  # a transport failure is an error like a 5xx
                phase.errors[f"{op}: {type(exc).__name__}"] += 1
                continue
            if response.status_code >= 300:
                phase.errors[f"{op}: HTTP {response.status_code}"] += 1
                continue
            phase.timings[op].append(time.perf_counter() - began)
            if op == "message":
                phase.acknowledged[u["chat"]] += 1


async def _drive(
    target: Target, users: list[dict[str, str]], ops: tuple[str, ...], seconds: float
) -> Phase:
    phase = Phase({op: [] for op in ops}, Counter(), Counter(), 0.0)
    connections = [
        Connection(
            target.base_url, {"authorization": f"Bearer {u['token']}", "user-agent": USER_AGENT}
        )
        for u in users
    ]
    try:
        # one request per user first, so connection set-up is not timed
        health = "/api/health" if target.name == "runtime" else "/health"
        await asyncio.gather(*(c.get(health) for c in connections))
        server, mine = cpu_seconds(target.pid), time.process_time()
        began = time.monotonic()
        deadline = began + seconds
        await asyncio.gather(
            *(
                _user(c, target, u, ops, deadline, i, phase)
                for i, (c, u) in enumerate(zip(connections, users, strict=True))
            )
        )
        phase.elapsed = time.monotonic() - began
        phase.server_cpu = cpu_seconds(target.pid) - server
        phase.client_cpu = time.process_time() - mine
    finally:
        await asyncio.gather(*(c.close() for c in connections))
    return phase


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stored(base_url: str, users: list[dict[str, str]]) -> Counter[str]:
    import httpx

    found: Counter[str] = Counter()
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for u in users:
            cursor = None
            while True:
                query = {"limit": "500", **({"cursor": cursor} if cursor else {})}
                page = client.get(
                    f"/api/sessions/{u['session']}/chats/{u['chat']}/messages",
                    params=query,
                    headers={"authorization": f"Bearer {u['token']}", "user-agent": USER_AGENT},
                ).json()
                found[u["chat"]] += len(page["messages"])
                cursor = page["nextCursor"]
                if not cursor:
                    break
    return found


def _causes(log: Path) -> dict[str, int]:
    """Why the runtime answered errors: the store's messages in its log, counted."""
    found: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        if "store is unavailable" in line or "Unavailable" in line or "Traceback" in line:
            start = line.find("The session store")
            found[line[start : start + 160] if start >= 0 else line[:160]] += 1
    return dict(found.most_common(5))


@contextlib.contextmanager
def baseline_server(home: Path, rows: int) -> Iterator[tuple[str, int]]:
    """``bench/sqlite_baseline.py`` as a child process on a free port; its URL and pid."""
    import httpx
    from openagents.local.dynamodb import free_port

    port = free_port()
    log = home / "baseline.log"
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own module
            [PYTHON, "-m", "bench.sqlite_baseline", "--db", str(home / "baseline.db"),
             "--port", str(port), "--rows", str(rows)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the baseline exited: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the baseline did not answer: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield base_url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _latency(phase: Phase) -> dict[str, dict[str, float]]:
    return {
        op: {k: (ms(v) if k != "n" else v) for k, v in summary(values).items()}
        for op, values in phase.timings.items()
    }


def _goal(value: float, goal: str, met: bool) -> dict[str, Any]:
    return {"value": value, "goal": goal, "met": met}


def run(args: Any) -> dict[str, Any]:
    import httpx

    compare = args.compare_duration if args.compare_duration is not None else args.duration
    env = {"OPENAGENTS_PROVISION_ON_CREATE": "false", "OPENAGENTS_RATE_LIMIT_PER_MINUTE": "100000"}
    with (
        scratch("load") as home,
        runtime(home / "home", env) as rt,
        baseline_server(home, args.users) as (baseline_url, baseline_pid),
    ):
        users = []
        with httpx.Client(base_url=rt.base_url, timeout=60) as client:
            for i in range(args.users):
                token = rt.token(f"load-{i}")
                created = client.post(
                    "/api/sessions",
                    json={"title": f"load {i}"},
                    headers={"authorization": f"Bearer {token}", "user-agent": USER_AGENT},
                )
                created.raise_for_status()
                body = created.json()
                users.append(
                    {
                        "token": token,
                        "session": body["session"]["id"],
                        "chat": body["chat"]["id"],
                        "baseline": f"s{i}",
                        "prefix": "m",
                    }
                )
        store = getattr(rt, "store", "sqlite")
        targets = {
            "runtime": Target("runtime", rt.base_url, "/api/sandbox/status", rt.pid),
            "baseline": Target("baseline", baseline_url, "/status", baseline_pid),
        }
        say(f"load: {args.users} users, status + post for {args.duration:.0f} s")
        mixed = asyncio.run(_drive(targets["runtime"], users, ("status", "message"), args.duration))
        stored = _stored(rt.base_url, users)
        causes = _causes(rt.log) if mixed.errors else {}
        idle_before = cpu_seconds(rt.pid)
        time.sleep(IDLE_SECONDS)  # what the runtime burns with no request (drain, timers)
        idle_share = (cpu_seconds(rt.pid) - idle_before) / IDLE_SECONDS
        say(f"load: status only, runtime vs baseline, {ROUNDS} rounds of {compare / 4:.1f} s each")
        status_only: dict[str, list[Phase]] = {"runtime": [], "baseline": []}
        for r in range(ROUNDS):
            order = ("baseline", "runtime") if r % 2 == 0 else ("runtime", "baseline")
            for name in order:
                status_only[name].append(
                    asyncio.run(_drive(targets[name], users, ("status",), compare / 4))
                )
        opened = None
        if args.open_duration > 0:
            say(f"load: open loop, {args.rate:g} status + {args.post_rate:g} posts a second, "
                f"{args.open_duration:.0f} s each for runtime and baseline")  # fmt: skip
            opened = open_loop(targets, users, args)
    result = _result(args, store, mixed, stored, causes, status_only)
    if opened is not None:
        result["openLoop"] = opened
    result["runtimeIdleCpuShare"] = round(idle_share, 3)
    result["load1"] = round(os.getloadavg()[0], 2)
    return result


def _result(
    args: Any,
    store: str,
    mixed: Phase,
    stored: Counter[str],
    causes: dict[str, int],
    status_only: dict[str, list[Phase]],
) -> dict[str, Any]:
    errors = mixed.errors
    total = sum(mixed.count(op) for op in mixed.timings) + sum(errors.values())
    lost = sum(max(0, n - stored[chat]) for chat, n in mixed.acknowledged.items())
    latency = _latency(mixed)
    throughput: dict[str, dict[str, Any]] = {}
    for name, phases in status_only.items():
        seconds = sum(p.elapsed for p in phases)
        done = sum(p.count("status") for p in phases)
        every = Phase({"status": [t for p in phases for t in p.timings["status"]]}, Counter(),
                      Counter(), seconds)  # fmt: skip
        server_cpu = sum(p.server_cpu for p in phases)
        client_cpu = sum(p.client_cpu for p in phases)
        throughput[name] = {
            "perSecond": round(done / seconds, 1) if seconds else 0.0,
            # CPU per request: what load from elsewhere on the machine does not change much
            "serverCpuMsPerRequest": round(server_cpu * 1000 / done, 3) if done else 0.0,
            "clientCpuMsPerRequest": round(client_cpu * 1000 / done, 3) if done else 0.0,
            "serverCpuShare": round(server_cpu / seconds, 2) if seconds else 0.0,
            "requests": done,
            "errors": sum(sum(p.errors.values()) for p in phases),
            "seconds": round(seconds, 1),
            "milliseconds": _latency(every)["status"],
        }
    base = throughput["baseline"]["perSecond"]
    ratio = round(throughput["runtime"]["perSecond"] / base, 3) if base else 0.0
    status_p99 = latency["status"].get("p99", 0.0)
    post_p99 = latency["message"].get("p99", 0.0)
    return {
        "store": store,
        "users": args.users,
        "seconds": round(mixed.elapsed, 1),
        "requests": total,
        "throughputPerSecond": round(total / mixed.elapsed, 1),
        "statusPerSecondMixed": round(mixed.count("status") / mixed.elapsed, 1),
        "serverCpuMsPerRequestMixed": round(mixed.server_cpu * 1000 / total, 3) if total else 0.0,
        "clientCpuMsPerRequestMixed": round(mixed.client_cpu * 1000 / total, 3) if total else 0.0,
        "errors": sum(errors.values()),
        "errorKinds": dict(errors),
        "errorCauses": causes,
        "messagesAcknowledged": sum(mixed.acknowledged.values()),
        "messagesLost": lost,
        "milliseconds": latency,
        "statusOnly": throughput,
        "statusThroughputRatio": ratio,
        "goals": {
            "errors": _goal(sum(errors.values()), "0", not errors),
            "lost": _goal(lost, "0", lost == 0),
            "statusP99Ms": _goal(status_p99, f"<= {P99_GOAL_MS:.0f} ms", status_p99 <= P99_GOAL_MS),
            "postP99Ms": _goal(post_p99, f"<= {P99_GOAL_MS:.0f} ms", post_p99 <= P99_GOAL_MS),
            "statusThroughputRatio": _goal(
                ratio, f">= {THROUGHPUT_GOAL}x baseline", ratio >= THROUGHPUT_GOAL
            ),
        },
    }


def _met(goal: dict[str, Any]) -> str:
    return f"goal {goal['goal']}: {'met' if goal['met'] else 'NOT met'}"


def rows(result: dict[str, Any]) -> list[list[str]]:
    goals = result.get("goals", {})
    table = [
        [
            f"load: {result['users']} users, {result['seconds']:.0f} s, status + post",
            f"{result['throughputPerSecond']} req/s",
            f"{result['requests']} requests, {result['errors']} errors"
            + (f" {result['errorKinds']}" if result["errors"] else "")
            + f"; {result['messagesAcknowledged']} messages acknowledged, "
            f"{result['messagesLost']} lost"
            + (f"; {_met(goals['errors'])}, lost {_met(goals['lost'])}" if goals else ""),
        ]
    ]
    for op in ("status", "message"):
        s = result["milliseconds"].get(op, {})
        goal = goals.get("statusP99Ms" if op == "status" else "postP99Ms")
        table.append(
            [
                f"load: {'status poll' if op == 'status' else 'message post'} latency",
                f"p50 {s.get('p50', 0):.1f} ms, p99 {s.get('p99', 0):.1f} ms",
                f"max {s.get('max', 0):.1f} ms, n={s.get('n', 0)}"
                + (f"; p99 {_met(goal)}" if goal else ""),
            ]
        )
    if "statusOnly" in result:
        rt, base = result["statusOnly"]["runtime"], result["statusOnly"]["baseline"]
        table.append(
            [
                "load: status only, runtime vs SQLite baseline",
                f"{rt['perSecond']} vs {base['perSecond']} req/s",
                f"{result['statusThroughputRatio']}x the one-route FastAPI+SQLite app "
                f"(p50 {rt['milliseconds'].get('p50', 0):.1f} vs "
                f"{base['milliseconds'].get('p50', 0):.1f} ms, p99 "
                f"{rt['milliseconds'].get('p99', 0):.1f} vs "
                f"{base['milliseconds'].get('p99', 0):.1f} ms; errors {rt['errors']}/"
                f"{base['errors']}); {_met(goals['statusThroughputRatio'])}",
            ]
        )
        table.append(
            [
                "load: CPU per status request, runtime vs baseline",
                f"{rt['serverCpuMsPerRequest']:.2f} vs {base['serverCpuMsPerRequest']:.2f} ms",
                f"server processes (the runtime used {rt['serverCpuShare']:.2f} cores, the "
                f"baseline {base['serverCpuShare']:.2f}); the load generator "
                f"{rt['clientCpuMsPerRequest']:.2f} / {base['clientCpuMsPerRequest']:.2f} ms; "
                f"the runtime idle {result.get('runtimeIdleCpuShare', 0):.2f} cores",
            ]
        )
    if "openLoop" in result:
        table.extend(open_rows(result["openLoop"]))
    return table


# ------------------------------------------------------------------ open loop


@dataclass
class OpenLoop:
    """One open-loop phase on one target: latencies from each request's scheduled time."""

    timings: dict[str, list[float]]
    errors: Counter[str]
    offered: Counter[str]
    elapsed: float = 0.0
    server_cpu: float = 0.0
    connections: int = 0  # the most connections the phase needed at once


class _Pool:
    """Keep-alive connections handed out one request at a time; a new one when all are busy
    (an open-loop client never waits for a free connection: that would close the loop). One
    idle for ``KEEP_ALIVE_SECONDS`` is not reused: uvicorn closes an idle connection after 5 s,
    and a request sent as it does would fail for the client's sake, not the server's (a
    browser retries those)."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self._base_url, self._headers = base_url, headers
        self._idle: list[tuple[Connection, float]] = []
        self.opened: list[Connection] = []

    def take(self) -> Connection:
        now = time.monotonic()
        while self._idle:
            connection, since = self._idle.pop()
            if now - since < KEEP_ALIVE_SECONDS:
                return connection
        connection = Connection(self._base_url, self._headers)
        self.opened.append(connection)
        return connection

    def give(self, connection: Connection) -> None:
        self._idle.append((connection, time.monotonic()))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.opened))


async def _offer(
    target: Target,
    users: list[dict[str, str]],
    rates: dict[str, float],
    seconds: float,
    prefix: str,
) -> OpenLoop:
    """Send ``rates[op]`` requests per second of each op for ``seconds``, whatever the answers
    do; each request's latency counts from when it was due, so a server falling behind shows
    in the percentiles (no coordinated omission)."""
    phase = OpenLoop({op: [] for op in rates}, Counter(), Counter())
    pools = [
        _Pool(target.base_url, {"authorization": f"Bearer {u['token']}", "user-agent": USER_AGENT})
        for u in users
    ]
    loop = asyncio.get_running_loop()
    in_flight: set[asyncio.Task[None]] = set()
    busy = 0

    async def one(op: str, n: int, due: float) -> None:
        nonlocal busy
        user = n % len(users)
        u, pool = users[user], pools[user]
        connection = pool.take()
        busy += 1
        phase.connections = max(phase.connections, busy)
        try:
            if op == "status":
                status_id = u["session"] if target.name == "runtime" else u["baseline"]
                response = await connection.get(target.status_path, params={"sessionId": status_id})
            else:
                body = {
                    "message": {
                        "id": f"open-{prefix}-{user}-{n}",
                        "role": "user",
                        "parts": [{"type": "text", "text": f"message {n}"}],
                    }
                }
                response = await connection.post(_post_path(target, u), body)
        except Exception as exc:  # a transport failure or a timeout is an error like a 5xx
            phase.errors[f"{op}: {type(exc).__name__}"] += 1
            return
        finally:
            busy -= 1
            pool.give(connection)
        if response.status_code >= 300:
            phase.errors[f"{op}: HTTP {response.status_code}"] += 1
            return
        phase.timings[op].append(loop.time() - due)

    async def arrivals(op: str, rate: float, began: float) -> None:
        for n in range(int(rate * seconds)):
            due = began + n / rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            phase.offered[op] += 1
            task = asyncio.create_task(one(op, n, due))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)

    try:
        health = "/api/health" if target.name == "runtime" else "/health"
        warm = [pool.take() for pool in pools]  # one connection per user set up, not timed
        await asyncio.gather(*(c.get(health) for c in warm))
        for pool, connection in zip(pools, warm, strict=True):
            pool.give(connection)
        server = cpu_seconds(target.pid)
        began = loop.time()
        await asyncio.gather(*(arrivals(op, rate, began) for op, rate in rates.items()))
        while in_flight:  # every request answered or timed out (the client's 30 s)
            await asyncio.wait(set(in_flight))
        phase.elapsed = loop.time() - began
        phase.server_cpu = cpu_seconds(target.pid) - server
    finally:
        await asyncio.gather(*(pool.close() for pool in pools))
    return phase


def _post_path(target: Target, u: dict[str, str]) -> str:
    if target.name == "runtime":
        return f"/api/sessions/{u['session']}/chats/{u['chat']}/messages"
    return f"/messages?sessionId={u['baseline']}"


def _open_result(phases: list[OpenLoop], rates: dict[str, float]) -> dict[str, Any]:
    timings = {op: [t for p in phases for t in p.timings[op]] for op in rates}
    errors: Counter[str] = Counter()
    offered: Counter[str] = Counter()
    for p in phases:
        errors.update(p.errors)
        offered.update(p.offered)
    answered = sum(len(v) for v in timings.values())
    cpu = sum(p.server_cpu for p in phases)
    seconds = sum(p.elapsed for p in phases)
    return {
        "offered": dict(offered),
        "errors": sum(errors.values()),
        "errorKinds": dict(errors),
        "seconds": round(seconds, 1),
        "milliseconds": {
            op: {k: (ms(v) if k != "n" else v) for k, v in summary(values).items()}
            for op, values in timings.items()
        },
        "serverCpuMsPerRequest": round(cpu * 1000 / answered, 3) if answered else 0.0,
        "serverCpuShare": round(cpu / seconds, 2) if seconds else 0.0,
        "connections": max((p.connections for p in phases), default=0),
    }


def open_loop(targets: dict[str, Target], users: list[dict[str, str]], args: Any) -> dict[str, Any]:
    """Runtime and baseline alternated in ``ROUNDS`` rounds of ``--open-duration`` / ROUNDS."""
    rates = {"status": float(args.rate), "message": float(args.post_rate)}
    seconds = args.open_duration / ROUNDS
    phases: dict[str, list[OpenLoop]] = {"runtime": [], "baseline": []}
    for r in range(ROUNDS):
        order = ("baseline", "runtime") if r % 2 == 0 else ("runtime", "baseline")
        for name in order:
            phases[name].append(
                asyncio.run(_offer(targets[name], users, rates, seconds, f"{name}{r}"))
            )
    result = {name: _open_result(p, rates) for name, p in phases.items()}
    worst = {op: result["runtime"]["milliseconds"][op].get("p99", 0.0) for op in rates}
    met = result["runtime"]["errors"] == 0 and all(v <= OPEN_P99_GOAL_MS for v in worst.values())
    return {
        "rates": rates,
        "secondsPerTarget": args.open_duration,
        **result,
        "goal": _goal(max(worst.values()), f"p99 <= {OPEN_P99_GOAL_MS:.0f} ms, 0 errors", met),
    }


def open_rows(result: dict[str, Any]) -> list[list[str]]:
    rates = result["rates"]
    table = []
    for op in ("status", "message"):
        rt = result["runtime"]["milliseconds"].get(op, {})
        base = result["baseline"]["milliseconds"].get(op, {})
        table.append(
            [
                f"load: open loop, {'status' if op == 'status' else 'post'} at "
                f"{rates[op]:.0f} req/s, runtime vs baseline",
                f"p50 {rt.get('p50', 0):.1f} vs {base.get('p50', 0):.1f} ms, "
                f"p99 {rt.get('p99', 0):.1f} vs {base.get('p99', 0):.1f} ms",
                f"max {rt.get('max', 0):.1f} vs {base.get('max', 0):.1f} ms, "
                f"n={rt.get('n', 0)}/{base.get('n', 0)}",
            ]
        )
    rt, base = result["runtime"], result["baseline"]
    table.append(
        [
            "load: open loop, errors and CPU per request",
            f"{rt['errors']} vs {base['errors']} errors",
            f"{rt['serverCpuMsPerRequest']:.2f} vs {base['serverCpuMsPerRequest']:.2f} ms CPU "
            f"a request ({rt['serverCpuShare']:.2f} vs {base['serverCpuShare']:.2f} cores), "
            f"{rt['connections']} vs {base['connections']} connections at most"
            + (f" {rt['errorKinds']}" if rt["errors"] else "")
            + f"; {_met(result['goal'])}",
        ]
    )
    return table
