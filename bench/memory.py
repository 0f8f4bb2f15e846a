"""Memory: what the one-machine runtime costs per session, and what an idle sandbox costs.

- **control plane**: ``openagents dev`` in a child process on its SQLite store, provisioning
  off (no sandboxes), ``--memory-sessions`` sessions created over HTTP (4 at a time) after a
  warm-up of 20; its VmRSS is read at 5 checkpoints. Growth per session = the least-squares
  slope of RSS over sessions created (and, beside it, (last - first) / N). Goal <= 200 KiB.
- **sandboxd**: ``--sandboxes`` real sandboxes from the local driver, confined as ``openagents
  dev`` confines them (bubblewrap, slirp4netns, cgroup, ext4 volume), left idle after one health
  probe; sandboxd's VmRSS (RssAnon/RssFile, and Pss from smaps_rollup: shared library pages
  divided among the processes that map them) from /proc, found below the driver's child pid.
  Goal <= 25 MiB VmRSS. Beside it, the helpers each sandbox adds (bwrap, slirp4netns) and the
  workspace volume's disk use.
- **where sandboxd's memory goes**: the sandbox's interpreter (``/usr/bin/python3``) measured
  outside the sandbox in fresh processes: bare; with sandboxd's standard-library imports (each
  alone, and all together); with the sandboxd package imported (from its compiled .pyc files);
  sandboxd serving, idle, run as every driver runs it (``python3 -P -m sandboxd``: from the
  .pyc files, ``ssl`` kept out: nothing in it uses ssl, ``http.server`` pulls it in through
  ``http.client``) and, beside it, with ssl allowed. ``-X importtime`` self times per
  top-level module.

From these, how many idle sandboxes fit in the machine's memory."""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import cmdline, descendants, proc_status, runtime, say, scratch

SESSION_GOAL_KIB = 200
SANDBOXD_GOAL_MIB = 25
SANDBOX_PYTHON = "/usr/bin/python3"
WARM_UP = 20
BREAKDOWN = (
    "interpreter",
    "stdlib imports",
    "sandboxd's own code",
    "serving (socket, threads, buffers)",
)
USERS = 10


def memory(pid: int | str = "self") -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, RssShmem (KiB) and Pss (KiB, smaps_rollup) of a process."""
    values: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads"):
                values[key] = int(rest.split()[0])
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                values["Pss"] = int(line.split()[1])
    return values


# ------------------------------------------------------------------ the control plane


def _control_plane(args: Any) -> dict[str, Any]:
    import httpx

    count = args.memory_sessions
    env = {"OPENAGENTS_PROVISION_ON_CREATE": "false", "OPENAGENTS_RATE_LIMIT_PER_MINUTE": "1000000"}
    with scratch("memory") as home, runtime(home / "home", env) as rt:
        tokens = [rt.token(f"mem-{u}") for u in range(USERS)]
        agent = {"user-agent": "Mozilla/5.0 bench"}

        def create(client: Any, i: int) -> None:
            headers = {"authorization": f"Bearer {tokens[i % USERS]}", **agent}
            created = client.post("/api/sessions", json={"title": f"mem {i}"}, headers=headers)
            created.raise_for_status()
            sid = created.json()["session"]["id"]
            status = client.get("/api/sandbox/status", params={"sessionId": sid}, headers=headers)
            status.raise_for_status()

        with httpx.Client(base_url=rt.base_url, timeout=60) as client:
            for i in range(WARM_UP):
                create(client, -1 - i)
            time.sleep(1)
            points = [(0, memory(rt.pid)["VmRSS"])]
            say(f"memory: creating {count} sessions (no sandboxes), RSS {points[0][1]} KiB")
            step = max(1, count // 5)
            with ThreadPoolExecutor(max_workers=4) as pool:
                done = 0
                while done < count:
                    batch = range(done, min(count, done + step))
                    list(pool.map(lambda i: create(client, i), batch))
                    done = batch[-1] + 1
                    points.append((done, memory(rt.pid)["VmRSS"]))
            time.sleep(1)
            settled = memory(rt.pid)
        database = sum(f.stat().st_size for f in (rt.home).glob("openagents.db*") if f.is_file())
    slope = _slope(points)
    overall = (points[-1][1] - points[0][1]) / count
    return {
        "sessions": count,
        "warmUpSessions": WARM_UP,
        "rssKiB": [{"sessions": n, "rssKiB": kib} for n, kib in points],
        "settled": settled,
        "growthKiBPerSession": round(slope, 1),
        "growthKiBPerSessionOverall": round(overall, 1),
        "databaseBytes": database,
        "goal": {
            "value": round(slope, 1),
            "goal": f"<= {SESSION_GOAL_KIB} KiB/session",
            "met": slope <= SESSION_GOAL_KIB,
        },
    }


def _slope(points: list[tuple[int, int]]) -> float:
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / var if var else 0.0


# ------------------------------------------------------------------ idle sandboxes


def is_sandboxd(command: str) -> bool:
    program = command.split(" ", 1)[0]
    return "python" in program and "sandboxd" in command


def _sandboxes(args: Any, home: Path) -> dict[str, Any]:
    from openagents.composition import local_driver
    from openagents.settings import Settings

    settings = Settings(home=home / "home")
    driver = local_driver(settings, b"k" * 32)
    handles = []
    try:
        began = time.monotonic()
        for i in range(args.sandboxes):
            handles.append(driver.start(f"bench-memory-{i}", 1))
        started = (time.monotonic() - began) / max(1, len(handles))
        time.sleep(2)
        for handle in handles:
            if driver.probe(handle).state.value != "running":
                raise RuntimeError(f"sandbox {handle.session_id} is not running")
        time.sleep(3)  # idle
        daemons, helpers = [], Counter[str]()
        helper_kib = 0
        mine = descendants(os.getpid())
        for pid in mine:
            command = cmdline(pid)
            if is_sandboxd(command):
                daemons.append(memory(pid))
            else:
                helpers[Path(command.split(" ", 1)[0]).name or "?"] += 1
                helper_kib += proc_status(pid).get("VmRSS", 0)
        disk = [
            _disk(settings.home / "sandboxes" / h.session_id / str(h.generation)) for h in handles
        ]
        confinement = driver.confinement
    finally:
        for handle in handles:
            with contextlib.suppress(Exception):
                driver.stop(handle)
        driver.close()
    if len(daemons) != len(handles):
        raise RuntimeError(f"found {len(daemons)} sandboxd for {len(handles)} sandboxes")
    per = {key: round(sum(d.get(key, 0) for d in daemons) / len(daemons)) for key in daemons[0]}
    helpers_per = helper_kib / len(handles)
    return {
        "sandboxes": len(handles),
        "startSeconds": round(started, 2),
        "confinement": confinement,
        "sandboxdKiB": per,
        "sandboxdEachVmRssKiB": [d.get("VmRSS", 0) for d in daemons],
        "helpersPerSandbox": {k: v / len(handles) for k, v in helpers.items()},
        "helpersKiBPerSandbox": round(helpers_per),
        "perSandboxKiB": round(per.get("VmRSS", 0) + helpers_per),
        "perSandboxPssKiB": round(per.get("Pss", 0) + helpers_per),
        "workspaceDisk": {
            "apparentBytes": max(d["apparent"] for d in disk),
            "allocatedBytes": round(sum(d["allocated"] for d in disk) / len(disk)),
        },
        "goal": {
            "value": round(per.get("VmRSS", 0) / 1024, 1),
            "goal": f"<= {SANDBOXD_GOAL_MIB} MiB VmRSS",
            "met": per.get("VmRSS", 0) <= SANDBOXD_GOAL_MIB * 1024,
        },
    }


def _disk(root: Path) -> dict[str, int]:
    apparent = allocated = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                info = path.stat()
                apparent += info.st_size
                allocated += info.st_blocks * 512
    return {"apparent": apparent, "allocated": allocated}


# ------------------------------------------------------------------ where it goes

_REPORT = (
    "\nimport sys\nprint(' '.join(l.split()[1] for l in open('/proc/self/status')"
    " if l.startswith(('VmRSS:', 'RssAnon:', 'RssFile:'))), flush=True)"
)


def _in_fresh(code: str, cwd: Path) -> dict[str, int]:
    """VmRSS/RssAnon/RssFile (KiB) of a fresh sandbox interpreter after running ``code``."""
    done = subprocess.run(  # noqa: S603 - the sandbox's interpreter, our code
        [SANDBOX_PYTHON, "-c", code + _REPORT], cwd=cwd, capture_output=True, text=True, check=True
    )
    rss, anon, file = (int(v) for v in done.stdout.split())
    return {"VmRSS": rss, "RssAnon": anon, "RssFile": file}


def _imports(package: Path) -> list[str]:
    """The standard-library modules sandboxd's modules import at their top level."""
    found: list[str] = []
    for source in sorted(package.glob("*.py")):
        for node in ast.parse(source.read_text()).body:
            if isinstance(node, ast.Import):
                found += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found += [node.module] if node.module != "__future__" else []
    return list(dict.fromkeys(found))


def _serving(argv: list[str], folder: Path, label: str) -> dict[str, int]:
    """Start sandboxd (outside any sandbox) on a Unix socket, let it idle, read its memory."""
    from openagents.sandbox.client import SandboxClient, unix_endpoint

    workspace = folder / f"ws-{label}"
    workspace.mkdir()
    socket = folder / f"{label}.sock"
    process = subprocess.Popen(  # noqa: S603 - the sandbox's interpreter, our daemon
        [*argv, "--workspace", str(workspace), "--unix", str(socket), "--token-stdin"],
        cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(folder)},
    )  # fmt: skip
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(b"bench-token\n")
        process.stdin.close()
        if b"ready" not in process.stdout.readline():
            raise RuntimeError(f"sandboxd ({label}) did not start")
        SandboxClient(unix_endpoint(str(socket)), "bench-token").health()
        time.sleep(2)
        return memory(process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _where(sandboxd: Path, home: Path) -> dict[str, Any]:
    folder = home / "where"
    folder.mkdir()
    shutil.copytree(sandboxd, folder / "sandboxd", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([SANDBOX_PYTHON, "-m", "compileall", "-q", "sandboxd"], cwd=folder, check=True)  # noqa: S603
    modules = _imports(sandboxd)
    bare = _in_fresh("pass", folder)
    alone = {m: _in_fresh(f"import {m}", folder)["VmRSS"] - bare["VmRSS"] for m in modules}
    block_ssl = "import sys; sys.modules['ssl'] = None\n"  # as sandboxd/__main__.py does
    every = _in_fresh(block_ssl + "\n".join(f"import {m}" for m in modules), folder)
    imported = _in_fresh(block_ssl + "import sandboxd.http", folder)
    imported_ssl = _in_fresh("import sandboxd.http", folder)
    # ssl imported first: __main__'s setdefault then keeps it
    with_ssl = "import ssl, sys; from sandboxd.__main__ import main; sys.exit(main(sys.argv[1:]))"
    serving = {
        "module": _serving([SANDBOX_PYTHON, "-P", "-m", "sandboxd"], folder, "module"),
        "withSsl": _serving([SANDBOX_PYTHON, "-c", with_ssl], folder, "ssl"),
    }
    times = subprocess.run(  # noqa: S603
        [SANDBOX_PYTHON, "-X", "importtime", "-c", block_ssl + "import sandboxd.http"],
        cwd=folder, capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    self_us: Counter[str] = Counter()
    for line in times.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].strip().startswith("import time:"):
            with contextlib.suppress(ValueError):
                name = parts[2].strip().split(".")[0]
                self_us[name] += int(parts[0].split(":")[1])
    module = serving["module"]["VmRSS"]
    return {
        "python": subprocess.run(  # noqa: S603
            [SANDBOX_PYTHON, "--version"], capture_output=True, text=True, check=True
        ).stdout.strip(),
        "bareKiB": bare,
        "importsAloneKiB": dict(sorted(alone.items(), key=lambda kv: -kv[1])[:8]),
        "allImportsKiB": every,
        "sandboxdImportedKiB": imported,
        "sandboxdImportedWithSslKiB": imported_ssl,
        "servingKiB": serving,
        "breakdownKiB": {
            "interpreter": bare["VmRSS"],
            "stdlib imports": every["VmRSS"] - bare["VmRSS"],
            "sandboxd's own code": imported["VmRSS"] - every["VmRSS"],
            "serving (socket, threads, buffers)": module - imported["VmRSS"],
        },
        "importSelfMs": {k: round(v / 1000, 1) for k, v in self_us.most_common(8)},
    }


# ------------------------------------------------------------------ together


def run(args: Any) -> dict[str, Any]:
    from openagents.settings import Settings

    say(f"memory: the control plane, {args.memory_sessions} sessions")
    control = _control_plane(args)
    with scratch("memory-sandboxes") as home:
        say(f"memory: {args.sandboxes} idle sandboxes")
        sandboxes = _sandboxes(args, home)
        say("memory: where sandboxd's memory goes")
        where = _where(Settings().sandboxd_path, home)
    total_kib = int(Path("/proc/meminfo").read_text().split()[1])
    per = sandboxes["perSandboxKiB"]
    base_kib = control["rssKiB"][0]["rssKiB"]
    fit = int((total_kib - base_kib) / (per + control["growthKiBPerSession"])) if per else 0
    return {
        "controlPlane": control,
        "sandboxd": sandboxes,
        "where": where,
        "fit": {
            "memTotalKiB": total_kib,
            "perIdleSandboxKiB": per,
            "idleSandboxesFit": fit,
            "for500GiB": round(500 * (per + control["growthKiBPerSession"]) / 1024**2, 2),
            "workspaceAllocatedBytes": sandboxes["workspaceDisk"]["allocatedBytes"],
        },
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    c, s, w, f = result["controlPlane"], result["sandboxd"], result["where"], result["fit"]
    kib = s["sandboxdKiB"]
    b = w["breakdownKiB"]
    serving = w["servingKiB"]
    heaviest = sorted(w["importsAloneKiB"].items(), key=lambda kv: -kv[1])
    return [
        [
            f"memory: control plane, {c['sessions']} sessions (SQLite, no sandboxes)",
            f"{c['growthKiBPerSession']:.0f} KiB/session",
            f"RSS {c['rssKiB'][0]['rssKiB'] / 1024:.0f} -> {c['rssKiB'][-1]['rssKiB'] / 1024:.0f}"
            f" MiB (slope; overall {c['growthKiBPerSessionOverall']:.0f} KiB/session); "
            f"database {c['databaseBytes'] / 1e6:.1f} MB; goal {c['goal']['goal']}: "
            f"{'met' if c['goal']['met'] else 'NOT met'}",
        ],
        [
            f"memory: idle sandboxd ({s['sandboxes']} confined sandboxes)",
            f"{kib.get('VmRSS', 0) / 1024:.1f} MiB VmRSS",
            f"RssAnon {kib.get('RssAnon', 0) / 1024:.1f}, "
            f"RssFile {kib.get('RssFile', 0) / 1024:.1f}, "
            f"Pss {kib.get('Pss', 0) / 1024:.1f} MiB; goal {s['goal']['goal']}: "
            f"{'met' if s['goal']['met'] else 'NOT met'}",
        ],
        [
            "memory: sandboxd, where it goes",
            f"{sum(b.values()) / 1024:.1f} MiB",
            "; ".join(f"{k} {b[k] / 1024:.1f}" for k in BREAKDOWN if k in b)
            + f" MiB ({w['python']}); imports alone: "
            + ", ".join(f"{k} {v / 1024:.1f}" for k, v in heaviest[:4])
            + " MiB",
        ],
        [
            "memory: sandboxd idle, as run (-P -m sandboxd) vs with ssl",
            f"{serving['module']['VmRSS'] / 1024:.1f} MiB",
            f"with ssl imported {serving['withSsl']['VmRSS'] / 1024:.1f} MiB (outside the sandbox)",
        ],
        [
            "memory: per idle sandbox, all processes",
            f"{s['perSandboxKiB'] / 1024:.1f} MiB",
            f"sandboxd + {s['helpersKiBPerSandbox'] / 1024:.1f} MiB of helpers "
            + ", ".join(f"{k} x{v:g}" for k, v in s["helpersPerSandbox"].items())
            + f"; workspace volume {s['workspaceDisk']['allocatedBytes'] / 2**20:.1f} MiB on disk "
            f"(sparse {s['workspaceDisk']['apparentBytes'] / 2**30:.0f} GiB)",
        ],
        [
            "memory: idle sandboxes that fit",
            f"{f['idleSandboxesFit']} in {f['memTotalKiB'] / 1024**2:.1f} GiB",
            f"500 need {f['for500GiB']} GiB (sandbox + its session in the control plane)",
        ],
    ]
