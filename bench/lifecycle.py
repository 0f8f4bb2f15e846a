"""Lifecycle precision and scale: N idle sessions on the one-machine runtime (``openagents dev``
in a child process, real sandboxes, the real lifecycle loop on moto's Step Functions) with a
short idle timeout. Each session is created without a repository (its sandbox starts with an
empty workspace), becomes active, waits, and hibernates.

Reported: lateness = (``sandbox.hibernating`` at - hibernateAfter), when the loop decided, and
(``sandbox.hibernated`` at - hibernateAfter), when the snapshot was verified and the sandbox
stopped; the runtime's resident memory and threads, and the sandboxes alive, sampled every
second while sessions wait, and once all have settled. hibernateAfter is lastActivityAt + the
idle timeout (activation sets both from one clock reading; hibernation clears only the first).

The loop is fed by provisioning, which starts sandboxes one at a time: with a short idle timeout
only some of the sessions wait at the same moment ("waiting at once").

Goal (issue 12): decided - hibernateAfter p99 <= 2 s at 500 idle sessions (``--sessions 500``).
Beside it: the runtime's growth per session, what one live sandbox costs (the runtime's
children's RSS over the sandboxd alive, at the sample with the most sandboxes: sandboxd, bwrap,
slirp4netns) and so how many would fit in the machine's memory at once."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import (
    Runtime,
    cmdline,
    descendants,
    proc_status,
    runtime,
    say,
    scratch,
    summary,
)

USERS = 10
TERMINAL = {"hibernated", "failed"}
P99_GOAL_SECONDS = 2.0


class Client:
    def __init__(self, rt: Runtime) -> None:
        import httpx

        self._http = httpx.Client(
            base_url=rt.base_url, timeout=60, headers={"user-agent": "Mozilla/5.0 bench"}
        )
        self._tokens = {f"idle-{u}": rt.token(f"idle-{u}") for u in range(USERS)}
        self.retried = 0
        self._lock = threading.Lock()

    def call(self, method: str, path: str, user: str, **kw: Any) -> Any:
        """One request; a 503 is retried after its Retry-After, as the API asks clients to."""
        headers = {"authorization": f"Bearer {self._tokens[user]}"}
        for _ in range(5):
            response = self._http.request(method, path, headers=headers, **kw)
            if response.status_code != 503:
                break
            self.retried += 1
            time.sleep(float(response.headers.get("retry-after", "1")))
        if response.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json()

    def close(self) -> None:
        self._http.close()


class Sampler(threading.Thread):
    """Samples the runtime's RSS and threads and its sandboxes every second."""

    def __init__(self, pid: int, max_rss_mib: float) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.max_rss_mib = max_rss_mib
        self.exceeded = threading.Event()
        self.samples: list[dict[str, float]] = []
        self.waiting = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(1.0):
            status = proc_status(self.pid)
            if not status:
                return
            children = descendants(self.pid)
            sandboxes = [pid for pid in children if is_sandboxd(cmdline(pid))]
            children_kib = sum(proc_status(pid).get("VmRSS", 0) for pid in children)
            if status.get("VmRSS", 0) / 1024 > self.max_rss_mib:
                self.exceeded.set()  # the benchmark stops before the machine runs out
            self.samples.append(
                {
                    "rssMiB": status.get("VmRSS", 0) / 1024,
                    "threads": status.get("Threads", 0),
                    "sandboxProcesses": len(sandboxes),
                    "childrenRssMiB": children_kib / 1024,
                    "waiting": self.waiting,
                }
            )

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def is_sandboxd(command: str) -> bool:
    """sandboxd itself (not the prlimit/bubblewrap processes around it)."""
    program = command.split(" ", 1)[0]
    return "python" in program and " -m sandboxd " in command


def _sessions_by_state(client: Client) -> dict[str, str]:
    states: dict[str, str] = {}
    for u in range(USERS):
        cursor = None
        while True:
            query = {"limit": "100", **({"cursor": cursor} if cursor else {})}
            page = client.call("GET", "/api/sessions", f"idle-{u}", params=query)
            for s in page["sessions"]:
                states[s["id"]] = s["lifecycleState"]
            cursor = page["nextCursor"]
            if not cursor:
                break
    return states


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def run(args: Any) -> dict[str, Any]:
    count = args.sessions
    env = {
        "OPENAGENTS_IDLE_TIMEOUT_SECONDS": str(args.idle_timeout),
        "OPENAGENTS_RATE_LIMIT_PER_MINUTE": "1000000",
        "OPENAGENTS_PROVISION_ON_CREATE": "true",
    }
    with scratch("lifecycle") as home, runtime(home / "home", env) as rt:
        client = Client(rt)
        try:
            return _measure(rt, client, count, args.idle_timeout, args.max_rss_gib * 1024)
        finally:
            client.close()


def _settle(
    client: Client,
    order: list[tuple[str, str]],
    sampler: Sampler,
    deadline: float,
) -> dict[str, str]:
    """Poll until every session hibernated (or failed), or the deadline."""
    states: dict[str, str] = {}
    last_report = 0.0
    count = len(order)
    while time.monotonic() < deadline and not sampler.exceeded.is_set():
        states = _sessions_by_state(client)
        sampler.waiting = sum(1 for s in states.values() if s == "active")
        done = sum(1 for s in states.values() if s in TERMINAL)
        if time.monotonic() - last_report > 15:
            say(f"lifecycle: {done}/{count} hibernated, {sampler.waiting} waiting")
            last_report = time.monotonic()
        if done == count:
            break
        time.sleep(0.5)
    return states


def _failures(client: Client, order: list[tuple[str, str]], states: dict[str, str]) -> list[str]:
    """What the failed sessions say (their lifecycleError), the first five."""
    failed = [(sid, user) for sid, user in order if states.get(sid) == "failed"][:5]
    return [
        str(client.call("GET", f"/api/sessions/{sid}", user)["session"]["lifecycleError"])
        for sid, user in failed
    ]


def _why(failures: list[str]) -> str:
    return f" ({'; '.join(failures)})" if failures else ""


def _lateness(
    client: Client, order: list[tuple[str, str]], idle: int
) -> tuple[list[float], list[float]]:
    """Seconds from hibernateAfter to the audit log's hibernating and hibernated entries.
    Activation sets lastActivityAt = now and hibernateAfter = now + idle timeout; hibernation
    clears hibernateAfter but keeps lastActivityAt, and nothing else moves it here."""
    start_late, done_late = [], []
    due: dict[str, int] = {}
    for sid, user in order:
        session = client.call("GET", f"/api/sessions/{sid}", user)["session"]
        if not session["lastActivityAt"]:
            continue
        due[sid] = _ms(session["lastActivityAt"]) + idle * 1000
        events = client.call("GET", f"/api/sessions/{sid}/events", user, params={"limit": "100"})
        times = {e["type"]: _ms(e["at"]) for e in events["events"]}
        if "sandbox.hibernating" in times:
            start_late.append((times["sandbox.hibernating"] - due[sid]) / 1000)
        if "sandbox.hibernated" in times:
            done_late.append((times["sandbox.hibernated"] - due[sid]) / 1000)
    return start_late, done_late


def _measure(
    rt: Runtime, client: Client, count: int, idle: int, max_rss_mib: float
) -> dict[str, Any]:
    time.sleep(2)  # the runtime's start-up sweep
    baseline = proc_status(rt.pid)
    sampler = Sampler(rt.pid, max_rss_mib)
    sampler.start()
    order: list[tuple[str, str]] = []
    say(f"lifecycle: creating {count} sessions (idle timeout {idle} s)")
    began = time.monotonic()

    def create(i: int) -> tuple[str, str] | None:
        if sampler.exceeded.is_set():
            return None
        user = f"idle-{i % USERS}"
        body = client.call("POST", "/api/sessions", user, json={"title": f"idle {i}"})
        return body["session"]["id"], user

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(create, i) for i in range(count)]
        for future in futures:
            created_one = future.result()
            if created_one is not None:
                order.append(created_one)
    aborted = sampler.exceeded.is_set()
    created = time.monotonic() - began
    states = _settle(client, order, sampler, began + 120 + count * 1.5)
    settled_status = proc_status(rt.pid)
    settled = time.monotonic() - began
    sampler.stop()
    say("lifecycle: reading the audit logs")
    start_late, done_late = _lateness(client, order, idle)
    peaks = {
        key: round(max((s[key] for s in sampler.samples), default=0), 1)
        for key in ("rssMiB", "threads", "sandboxProcesses", "childrenRssMiB", "waiting")
    }
    fullest = max(sampler.samples, key=lambda s: s["sandboxProcesses"], default=None)
    per_sandbox = (
        fullest["childrenRssMiB"] / fullest["sandboxProcesses"]
        if fullest and fullest["sandboxProcesses"]
        else 0.0
    )
    workspace = _workspace_bytes(rt.home)
    total_mib = _mem_total_mib()
    growth_kib = (
        (settled_status.get("VmRSS", 0) - baseline.get("VmRSS", 0)) / len(order) if order else 0.0
    )
    p99 = summary(start_late).get("p99", 0.0) if start_late else None
    return {
        "sessions": len(order),
        "requestedSessions": count,
        "abortedAtRssMiB": round(max_rss_mib) if aborted or sampler.exceeded.is_set() else None,
        "idleTimeoutSeconds": idle,
        "createdSeconds": round(created, 1),
        "settledSeconds": round(settled, 1),
        "hibernated": sum(1 for s in states.values() if s == "hibernated"),
        "failed": sum(1 for s in states.values() if s == "failed"),
        "failures": _failures(client, order, states),
        "measured": len(start_late),
        "retried503": client.retried,
        "latenessDecidedSeconds": {k: round(v, 3) for k, v in summary(start_late).items()},
        "latenessHibernatedSeconds": {k: round(v, 3) for k, v in summary(done_late).items()},
        "runtimeBaseline": {
            "rssMiB": round(baseline.get("VmRSS", 0) / 1024, 1),
            "threads": baseline.get("Threads", 0),
        },
        "runtimeSettled": {
            "rssMiB": round(settled_status.get("VmRSS", 0) / 1024, 1),
            "threads": settled_status.get("Threads", 0),
        },
        "peaks": peaks,
        "samples": len(sampler.samples),
        "runtimeGrowthKiBPerSession": round(growth_kib, 1),
        "perLiveSandboxMiB": round(per_sandbox, 1),
        "workspaceAllocatedBytesPerSession": round(workspace / len(order)) if order else 0,
        "memTotalMiB": round(total_mib),
        "liveSandboxesFit": int((total_mib - settled_status.get("VmRSS", 0) / 1024) / per_sandbox)
        if per_sandbox
        else None,
        "goal": {
            "value": p99,
            "goal": f"decided - hibernateAfter p99 <= {P99_GOAL_SECONDS:.0f} s at 500 sessions",
            "met": p99 is not None and p99 <= P99_GOAL_SECONDS and len(order) >= 500,
            "metAtThisSize": p99 is not None and p99 <= P99_GOAL_SECONDS,
        },
    }


def _workspace_bytes(home: Path) -> int:
    """Disk the sandboxes' folders use (sparse volume images count what they allocated)."""
    total = 0
    for path in (home / "sandboxes").rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_blocks * 512
    return total


def _mem_total_mib() -> float:
    return int(Path("/proc/meminfo").read_text().split()[1]) / 1024


def rows(result: dict[str, Any]) -> list[list[str]]:
    d, h, p, b = (
        result["latenessDecidedSeconds"],
        result["latenessHibernatedSeconds"],
        result["peaks"],
        result["runtimeBaseline"],
    )
    n = result["sessions"]
    aborted = result.get("abortedAtRssMiB")
    note = (
        [
            [
                "lifecycle: STOPPED EARLY",
                f"{n} of {result['requestedSessions']} sessions",
                f"the runtime passed {aborted} MiB (--max-rss-gib); numbers below are partial",
            ]
        ]
        if aborted
        else []
    )
    goal = result.get("goal")
    verdict = ""
    if goal:
        verdict = f"; goal p99 <= {P99_GOAL_SECONDS:.0f} s: " + (
            "met" if goal["met"] else ("met at this size" if goal["metAtThisSize"] else "NOT met")
        )
    fit = (
        [
            [
                "lifecycle: memory per session and per live sandbox",
                f"{result['runtimeGrowthKiBPerSession']:.0f} KiB, "
                f"{result['perLiveSandboxMiB']:.1f} MiB",
                f"runtime growth per session; one sandbox's processes (sandboxd, bwrap, "
                f"slirp4netns); workspace {result['workspaceAllocatedBytesPerSession'] / 2**20:.1f}"
                f" MiB on disk per session; ~{result['liveSandboxesFit']} live sandboxes fit in "
                f"{result['memTotalMiB'] / 1024:.1f} GiB",
            ]
        ]
        if "perLiveSandboxMiB" in result
        else []
    )
    return [
        *note,
        [
            f"lifecycle: {n} sessions, decided - hibernateAfter",
            f"p99 {d.get('p99', 0):.2f} s",
            f"min {d.get('min', 0):.2f}, p50 {d.get('p50', 0):.2f}, p90 {d.get('p90', 0):.2f}, "
            f"max {d.get('max', 0):.2f} s (n={d.get('n', 0)}){verdict}",
        ],
        [
            f"lifecycle: {n} sessions, hibernated - hibernateAfter",
            f"p50 {h.get('p50', 0):.2f} s",
            f"min {h.get('min', 0):.2f}, p90 {h.get('p90', 0):.2f}, p99 {h.get('p99', 0):.2f}, "
            f"max {h.get('max', 0):.2f} s; {result['hibernated']} hibernated, "
            f"{result['failed']} failed{_why(result.get('failures', []))}, all settled in "
            f"{result['settledSeconds']} s; "
            f"{result.get('retried503', 0)} requests retried after a 503",
        ],
        [
            "lifecycle: runtime while waiting",
            f"{p['rssMiB']:.0f} MiB, {p['threads']:.0f} threads",
            f"peaks (baseline {b['rssMiB']:.0f} MiB, {b['threads']} threads; after settling "
            f"{result['runtimeSettled']['rssMiB']:.0f} MiB, "
            f"{result['runtimeSettled']['threads']} threads); "
            f"{p['waiting']:.0f} sessions waiting at once, {p['sandboxProcesses']:.0f} sandboxd "
            f"alive using {p['childrenRssMiB']:.0f} MiB",
        ],
        *fit,
    ]
