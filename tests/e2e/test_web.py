"""End to end: the built web app (web/dist) in Debian's Chromium, driven by Playwright
(tests/e2e/web_flow.mjs), against a real `openagents dev` started here with short lifecycle
timings. Screenshots of every step land in test-artifacts/e2e/."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openagents.local.dynamodb import free_port

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
FLOW = Path(__file__).with_name("web_flow.mjs")
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM = Path(os.environ.get("OPENAGENTS_E2E_CHROMIUM", "/usr/bin/chromium"))
SCRIPT = Path(__file__).with_name("agent-script.json")  # the scripted model's first turn
FLOW_TIMEOUT_SECONDS = 240


def _missing() -> str | None:
    needs = {
        "the built web app (make web)": WEB / "dist" / "index.html",
        "playwright-core (make web)": WEB / "node_modules" / "playwright-core",
        "Debian's chromium (apt-get install chromium)": CHROMIUM,
    }
    missing = [what for what, path in needs.items() if not path.exists()]
    if shutil.which("node") is None:
        missing.append("node")
    return ", ".join(missing) or None


@pytest.fixture
def prerequisites() -> None:
    missing = _missing()
    if missing is None:
        return
    if os.environ.get("CI"):  # CI must run it: make test builds the app, .ci/run installs chromium
        pytest.fail(f"e2e prerequisites missing: {missing}")
    pytest.skip(f"e2e prerequisites missing: {missing}")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """The scripted model's answers: a copy the flow rewrites between turns (read at every call)."""
    path = tmp_path / "agent-script.json"
    shutil.copyfile(SCRIPT, path)
    return path


@pytest.fixture
def server(tmp_path: Path, prerequisites: None, script: Path) -> Iterator[str]:
    """`openagents dev` on a free port with its own state folder; stopped with its children."""
    port = free_port()
    env = {
        **os.environ,
        "OPENAGENTS_MODE": "local",
        "OPENAGENTS_HOME": str(tmp_path / "home"),
        "OPENAGENTS_LOCAL_REPO_ROOTS": str(tmp_path),  # the repository fixture is made there
        "OPENAGENTS_PORT": str(port),
        "OPENAGENTS_IDLE_TIMEOUT_SECONDS": "15",  # the approval step waits less
        "OPENAGENTS_LIFECYCLE_MIN_SLEEP_SECONDS": "1",
        "OPENAGENTS_SCRIPTED_MODEL_FILE": str(script),
        "OPENAGENTS_MODELS": "scripted/default",
        # a price, so the Usage page shows the runs' cost
        "OPENAGENTS_MODEL_PRICES": '{"scripted/default": {"input": 3, "output": 15}}',
    }
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("openagents")), "dev"],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group (its sandboxes have their own)
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, process, log_path)
        yield url
    finally:
        _stop(process)
        # sandboxes outlive the server (their own sessions): hibernated, none left running
        down = [str(Path(sys.executable).with_name("openagents")), "down"]
        subprocess.run(down, env=env, capture_output=True, timeout=120, check=False)


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"openagents dev exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/api/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"openagents dev not healthy in 45 s:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A bare repository with one commit on main and e2e-base (the session's clone source)."""
    bare = tmp_path / "repo.git"
    work = tmp_path / "work"
    _git("init", "--quiet", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    _git("clone", "--quiet", str(bare), str(work), cwd=tmp_path)
    (work / "README.md").write_text("# e2e\n\nHello from the e2e repository.\n")
    (work / "src").mkdir()
    (work / "src" / "app.py").write_text('print("hello")\n')
    # a static site: the Preview tab's dev server (python3 -m http.server)
    (work / "index.html").write_text("<!doctype html><h1>Hello from the e2e preview</h1>\n")
    # a skill the composer offers after `/` (GET /api/sessions/{id}/skills reads its front matter)
    skill = work / ".agents" / "skills" / "e2e-greeter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: e2e-greeter\ndescription: Greets whoever runs the e2e test\n---\n\n"
        "Say hello to the person running the end-to-end test.\n"
    )
    identity = ["-c", "user.name=E2E", "-c", "user.email=e2e@example.com"]
    _git("add", ".", cwd=work)
    _git(*identity, "commit", "--quiet", "-m", "initial", cwd=work)
    _git("push", "--quiet", "origin", "HEAD:main", cwd=work)
    _git("push", "--quiet", "origin", "HEAD:e2e-base", cwd=work)  # a second branch to pick
    return bare


@pytest.mark.slow
def test_web_app_end_to_end(server: str, repository: Path, script: Path, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "E2E_BASE_URL": server,
        "E2E_REPO": str(repository),
        "E2E_ARTIFACTS": str(ARTIFACTS),
        "E2E_CHROMIUM": str(CHROMIUM),
        "E2E_SCRIPT": str(script),
    }
    started = time.monotonic()
    result = subprocess.run(
        ["node", str(FLOW)],
        env=env,
        capture_output=True,
        text=True,
        timeout=FLOW_TIMEOUT_SECONDS,
        check=False,
    )
    print(result.stdout)
    server_log = (tmp_path / "server.log").read_text(errors="replace")[-6000:]
    assert result.returncode == 0, (
        f"web flow failed:\n{result.stdout}\n{result.stderr}\nserver log (tail):\n{server_log}"
    )
    assert time.monotonic() - started < FLOW_TIMEOUT_SECONDS
