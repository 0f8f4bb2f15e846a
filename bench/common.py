"""What every benchmark shares: statistics, a quiet stdout, moto, settings, the one-machine
runtime as a child process, and the botocore request counter."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

warnings.filterwarnings("ignore", message="No application metrics to publish")
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_NAMESPACE": "OpenAgentsBench",
}.items():
    os.environ.setdefault(_name, _value)


# ------------------------------------------------------------------ statistics


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary(values: list[float]) -> dict[str, float]:
    """min, p50, p90, p99, max and mean of ``values`` (same unit as given)."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": min(values),
        "p50": percentile(values, 0.50),
        "p90": percentile(values, 0.90),
        "p99": percentile(values, 0.99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# ------------------------------------------------------------------ output


class Quiet:
    """The app logs every request as JSON and flushes metrics to stdout (as Lambda does): a
    benchmark sends that to /dev/null and prints its table on the real stdout."""

    def __init__(self) -> None:
        self.out: TextIO = sys.stdout
        self._null: TextIO | None = None

    def __enter__(self) -> Quiet:
        self.out = sys.stdout
        self._null = open(os.devnull, "w")
        sys.stdout = self._null
        return self

    def __exit__(self, *_: object) -> None:
        sys.stdout = self.out
        if self._null is not None:
            self._null.close()


def say(message: str) -> None:
    """Progress on stderr: never mixed into the table."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_kib = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memoryGiB": round(memory_kib / 1024**2, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "load1": round(os.getloadavg()[0], 2),
    }


# ------------------------------------------------------------------ moto and settings


@dataclass
class Moto:
    endpoint: str
    stop: Callable[[], None]


@contextlib.contextmanager
def moto_server() -> Iterator[Moto]:
    """moto's server on a free 127.0.0.1 port, in this process (as the tests run it)."""
    import logging

    from moto.server import ThreadedMotoServer
    from openagents.local.dynamodb import free_port

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield Moto(f"http://127.0.0.1:{port}", server.stop)
    finally:
        server.stop()


def fresh_settings(endpoint: str, home: Path, **update: Any) -> Any:
    """Local-mode settings on a new table of their own (created here)."""
    from openagents.settings import Settings
    from openagents.store import items

    table = f"bench-{uuid.uuid4().hex[:10]}"
    values: dict[str, Any] = {
        "home": home,
        "table_name": table,
        "dynamodb_endpoint": endpoint,
        "rate_limit_per_minute": 100_000,
        "rate_limit_window_seconds": 3600,
        "provision_on_create": False,
    }
    values.update(update)
    settings = Settings(**values)
    items.bind(table, endpoint, settings.region)
    items.create_table()
    return settings


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for a benchmark, and put the previous ones back after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder, removed after the sandboxes launched under it are stopped (a sandbox
    outlives the process that launched it, and its socket folder is a mount)."""
    from tests.sandbox_sweep import sweep

    with tempfile.TemporaryDirectory(prefix=f"openagents-bench-{prefix}-") as folder:
        try:
            yield Path(folder)
        finally:
            sweep(Path(folder))


# ------------------------------------------------------------------ request counting

_tally: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar(
    "bench_tally", default=None
)
READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


def install_counter() -> None:
    """Count every AWS request (every botocore client: boto3's, and PynamoDB's own, which
    transactions use too) made in a context that ``counting()`` marks. Context variables
    follow a request into FastAPI's thread pool, and never into moto's server threads or the
    Step Functions interpreter, so only the API call itself is counted."""
    from botocore.client import BaseClient

    original = getattr(BaseClient, "_make_api_call")  # noqa: B009 - private, untyped
    if getattr(original, "_bench_counter", False):
        return

    def counted(self: Any, operation_name: str, api_params: Any) -> Any:
        tally = _tally.get()
        if tally is not None:
            tally[f"{self.meta.service_model.service_name}:{operation_name}"] += 1
        return original(self, operation_name, api_params)

    counted._bench_counter = True  # type: ignore[attr-defined]
    setattr(BaseClient, "_make_api_call", counted)  # noqa: B010 - private, untyped


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    tally: Counter[str] = Counter()
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        _tally.reset(token)


def classify(tally: Counter[str]) -> dict[str, Any]:
    reads = sum(n for key, n in tally.items() if key.split(":")[1] in READS)
    writes = sum(n for key, n in tally.items() if key.split(":")[1] in WRITES)
    other = sum(n for key, n in tally.items() if not key.startswith("dynamodb:"))
    return {"reads": reads, "writes": writes, "other": other, "calls": dict(sorted(tally.items()))}


# ------------------------------------------------------------------ the one-machine runtime


@dataclass
class Runtime:
    """``openagents dev`` as a child process (moto, the API, Step Functions, sandboxes)."""

    process: subprocess.Popen[bytes]
    base_url: str
    home: Path
    log: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def token(self, user: str, name: str | None = None) -> str:
        from openagents.auth.tokens import LocalTokens, load_or_create_secret

        secret = load_or_create_secret(self.home / "jwt-secret")
        return LocalTokens(secret, "openagents-local", "openagents").mint(
            user, name=name, ttl_seconds=7200
        )


@contextlib.contextmanager
def runtime(home: Path, env: dict[str, str], ready_timeout: float = 60) -> Iterator[Runtime]:
    """Start ``openagents dev`` on a free port with ``env`` added; stop it (SIGINT, then
    SIGTERM, then SIGKILL) on exit. Its stdout and stderr go to a log file in ``home``."""
    import httpx
    from openagents.local.dynamodb import free_port

    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = home / "runtime.log"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("OPENAGENTS_")}
    child_env = {
        **inherited,
        "OPENAGENTS_HOME": str(home),
        "OPENAGENTS_PORT": str(port),
        "OPENAGENTS_DUMP_INTERVAL_SECONDS": "3600",
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own CLI
            [str(Path(PYTHON).parent / "openagents"), "dev", "--port", str(port)],
            cwd=ROOT,
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"openagents dev exited: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base_url}/api/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"openagents dev did not answer: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield Runtime(process, base_url, home, log)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    import signal

    for sig, wait in ((signal.SIGINT, 20), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)


# ------------------------------------------------------------------ processes


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (KiB) and Threads of a live process; {} when it is gone."""
    values: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "Threads"):
                values[key] = int(rest.split()[0])
    return values


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (one pass over /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def dump_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
