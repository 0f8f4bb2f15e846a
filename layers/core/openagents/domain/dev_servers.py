"""Which dev server a project runs, from its files (read from the sandbox: hostile input, parsed
with bounds): the package manager from the lock file, the framework from the dependencies and
scripts, or a Python app (Django, FastAPI/uvicorn, Flask), or a static site. Pure: the service
reads the files (``services/dev_servers.py``)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Collection
from dataclasses import dataclass

LOCKS = (
    ("bun.lockb", "bun"),
    ("bun.lock", "bun"),
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("package-lock.json", "npm"),
)
# framework -> (default port, the arguments that put it on a port, loopback-bound)
FRAMEWORKS: dict[str, tuple[int, str]] = {
    "next": (3000, "-p {port} -H 127.0.0.1"),
    "astro": (4321, "--port {port} --host 127.0.0.1"),
    "nuxt": (3000, "--port {port} --host 127.0.0.1"),
    "@remix-run/dev": (5173, "--port {port}"),
    "vite": (5173, "--port {port} --host 127.0.0.1 --strictPort"),
    "react-scripts": (3000, ""),  # PORT from the environment
}
PYTHON_PORT = 8000
MAX_MANIFEST_CHARS = 1 << 20
SCRIPT_NAMES = ("dev", "start", "serve")


class NoDevServer(ValueError):
    """Nothing in the folder says how to run it."""


@dataclass(frozen=True)
class DevServerPlan:
    command: str  # a shell command, run with PORT and HOST set
    port: int
    framework: str
    install: str | None = None  # run first when the dependencies are not installed


def package_manager(names: Collection[str]) -> str:
    return next((pm for lock, pm in LOCKS if lock in names), "npm")


def _run(pm: str, script: str, args: str) -> str:
    base = f"npm run {script}" if pm == "npm" else f"{pm} run {script}"
    if not args:
        return base
    return f"{base} -- {args}" if pm == "npm" else f"{base} {args}"


def node_plan(
    manifest_text: str, names: Collection[str], port: int | None, has_modules: bool
) -> DevServerPlan:
    if len(manifest_text) > MAX_MANIFEST_CHARS:
        raise NoDevServer("package.json is too large to read")
    try:
        manifest = json.loads(manifest_text)
    except ValueError:
        raise NoDevServer("package.json is not valid JSON") from None
    if not isinstance(manifest, dict):
        raise NoDevServer("package.json is not a JSON object")
    said = manifest.get("scripts")
    scripts: dict[str, object] = said if isinstance(said, dict) else {}
    deps: dict[str, object] = {}
    for key in ("dependencies", "devDependencies"):
        if isinstance(manifest.get(key), dict):
            deps.update(manifest[key])
    script = next((s for s in SCRIPT_NAMES if isinstance(scripts.get(s), str)), None)
    if script is None:
        raise NoDevServer("package.json has no dev, start or serve script")
    pm = package_manager(names)
    install = None if has_modules else f"{pm} install"
    framework = next((name for name in FRAMEWORKS if name in deps), "node")
    default, args = FRAMEWORKS.get(framework, (3000, ""))
    chosen = port or default
    return DevServerPlan(_run(pm, script, args.format(port=chosen)), chosen, framework, install)


def python_plan(names: Collection[str], requirements: str, port: int | None) -> DevServerPlan:
    chosen = port or PYTHON_PORT
    wanted = {m.lower() for m in re.findall(r"[A-Za-z][A-Za-z0-9_.-]*", requirements[:65536])}
    if "manage.py" in names:
        return DevServerPlan(f"python3 manage.py runserver 127.0.0.1:{chosen}", chosen, "django")
    if wanted & {"fastapi", "uvicorn"}:
        module = next((m for m in ("main", "app") if f"{m}.py" in names), None)
        if module is None:
            raise NoDevServer("a FastAPI project needs main.py or app.py")
        command = f"python3 -m uvicorn {module}:app --host 127.0.0.1 --port {chosen} --reload"
        return DevServerPlan(command, chosen, "fastapi")
    if "flask" in wanted:
        command = f"python3 -m flask run --host 127.0.0.1 --port {chosen} --debug"
        return DevServerPlan(command, chosen, "flask")
    if "index.html" in names:
        # HTTP/1.1: keep-alive, so the preview proxy's tunnel carries the next request too
        command = f"python3 -m http.server {chosen} --bind 127.0.0.1 --protocol HTTP/1.1"
        return DevServerPlan(command, chosen, "static")
    raise NoDevServer("no package.json, manage.py, Python app or index.html here")


def custom_plan(command: str, port: int | None) -> DevServerPlan:
    if not command.strip() or len(command) > 4096 or "\n" in command:
        raise NoDevServer("command must be one line of at most 4096 characters")
    chosen = port or 3000
    return DevServerPlan(command, chosen, "custom")


KEPT_DIR = ".git/openagents"  # in the workspace: kept by a snapshot, out of git status


def launch_script(plan: DevServerPlan, cwd: str, state_dir: str, name: str = "dev-server") -> str:
    """The shell that starts the plan detached (its own session and process group) and
    records it: the log, a state file the GET reads back (as untrusted as the rest), and a copy
    kept in the workspace's ``.git`` (a snapshot keeps it: a resume starts it again)."""
    record = shlex.quote(json.dumps({"command": plan.command, "port": plan.port, "cwd": cwd}))
    inner = (
        f"exec env PORT={plan.port} HOST=127.0.0.1 BROWSER=none sh -c {shlex.quote(plan.command)}"
    )
    return (
        f"mkdir -p {state_dir} && "
        f"{{ [ ! -d .git ] || {{ mkdir -p {KEPT_DIR} && "
        f"printf '%s' {record} > {KEPT_DIR}/{name}.json; }}; }} && "
        f"cd {shlex.quote(cwd)} && printf '%s' {record} > {state_dir}/{name}.json && "
        f"(setsid nohup sh -c {shlex.quote(inner)} > {state_dir}/{name}.log 2>&1 < /dev/null & "
        f"echo $! > {state_dir}/{name}.pid)"
    )


def kept_plan(said: str) -> tuple[DevServerPlan, str] | None:
    """The plan and folder a workspace's kept record names; None when it is not one."""
    try:
        record = json.loads(said[:16384])
        command, port, cwd = record["command"], record["port"], record["cwd"]
    except (ValueError, KeyError, TypeError):
        return None
    valid = isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536
    if not (valid and isinstance(command, str) and isinstance(cwd, str)) or len(cwd) > 4096:
        return None
    try:
        return custom_plan(command, port), cwd
    except NoDevServer:
        return None
