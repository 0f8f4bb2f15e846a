"""Every escape of the security review, tried from inside a real local sandbox, refused.

The sandbox is hostile: each test runs the attacker's command through sandboxd's exec, as the
agent or a repository's scripts would. These tests need bubblewrap, slirp4netns, nftables and
root (CI installs and has them); on a machine without them they fail, loudly, instead of
skipping: an isolation test that does not run proves nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from openagents.sandbox.client import SandboxClient
from openagents.sandbox.confine import Cgroup, Limits, Machine
from openagents.sandbox.local import LocalDriver
from openagents.sandbox.port import (
    ExecResult,
    SandboxError,
    SandboxHandle,
    SandboxState,
    SnapshotRef,
)

from tests.support import sandbox_workspace

SANDBOXD = Path(__file__).resolve().parents[2] / "sandbox" / "sandboxd"
KEY = b"k" * 32
SMALL = Limits(
    memory_bytes=256 << 20,
    pids=64,
    disk_bytes=64 << 20,
    tmp_bytes=16 << 20,
)


@pytest.fixture(scope="module")
def machine() -> Machine:
    found = Machine.detect()
    missing = [
        name
        for name, present in (
            ("bubblewrap", found.bwrap),
            ("root", found.root),
            ("slirp4netns", found.slirp4netns),
            ("nftables", found.nft),
            ("nsenter", found.nsenter),
            ("setpriv", found.setpriv),
            ("mkfs.ext4", found.mkfs),
            ("cgroups with memory and pids", found.cgroups),
        )
        if not present
    ]
    assert not missing, f"sandbox isolation cannot run here: missing {missing}"
    return found


@pytest.fixture
def driver(machine: Machine, tmp_path: Path) -> Iterator[LocalDriver]:
    local = LocalDriver(tmp_path / "home", SANDBOXD, KEY, SandboxClient, limits=SMALL)
    yield local
    local.close()


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"host service"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def host_services() -> Iterator[dict[str, int]]:
    """What the control plane runs on the host: a loopback service (the API, the store) and
    one on every interface."""
    servers = {
        "loopback": ThreadingHTTPServer(("127.0.0.1", 0), _Hello),
        "any": ThreadingHTTPServer(("0.0.0.0", 0), _Hello),  # noqa: S104 - the point
    }
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {name: server.server_address[1] for name, server in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


def run(
    driver: LocalDriver, handle: SandboxHandle, command: str, timeout: float = 60
) -> ExecResult:
    client = SandboxClient(driver.endpoint(handle), driver.token(handle), timeout=timeout + 30)
    return client.exec(command, timeout_seconds=timeout)


def orphan_networks() -> list[int]:
    """slirp4netns processes whose sandbox is gone (they must exit with it)."""
    orphans = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not command[0].endswith(b"slirp4netns"):
            continue
        target = next((part for part in command if part.startswith(b"/proc/")), b"")
        if target and not Path(target.decode()).exists():
            orphans.append(int(entry.name))
    return orphans


def eventually_empty(probe: Callable[[], list[int]], seconds: float = 5) -> list[int]:
    deadline = time.monotonic() + seconds
    while (found := probe()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def host_addresses() -> list[str]:
    found = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    return [line.split()[3].split("/")[0] for line in found.splitlines()]


CONNECT = """python3 - <<'EOF'
import json, socket
results = {}
for host, port in %s:
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        results[f"{host}:{port}"] = s.recv(200).decode(errors="replace")
    except OSError as e:
        results[f"{host}:{port}"] = "refused: " + type(e).__name__
    finally:
        s.close()
print(json.dumps(results))
EOF"""


def test_the_host_and_private_ranges_are_unreachable(
    driver: LocalDriver, host_services: dict[str, int]
) -> None:
    handle = driver.start("net", 1)
    targets = [("127.0.0.1", host_services["loopback"]), ("127.0.0.1", host_services["any"])]
    targets += [(address, host_services["any"]) for address in host_addresses()]
    targets += [
        ("10.0.2.2", host_services["loopback"]),  # slirp's gateway: the host's loopback if allowed
        ("10.0.2.2", host_services["any"]),
        ("169.254.169.254", 80),  # instance metadata
        ("10.255.255.1", 80),
        ("172.17.0.1", host_services["any"]),
        ("192.168.1.1", 80),
    ]
    result = run(driver, handle, CONNECT % json.dumps(targets))
    answers = json.loads(result.stdout)
    reached = {target: answer for target, answer in answers.items() if "host service" in answer}
    assert not reached, reached
    assert len(answers) == len({f"{h}:{p}" for h, p in targets})


def test_the_outbound_stack_is_configured_and_dns_points_at_it(driver: LocalDriver) -> None:
    handle = driver.start("dns", 1)
    routes = run(driver, handle, "ip -4 route; cat /etc/resolv.conf").stdout
    assert "default via 10.0.2.2 dev tap0" in routes
    assert "nameserver 10.0.2.3" in routes


def test_the_firewall_cannot_be_changed_from_inside(driver: LocalDriver) -> None:
    handle = driver.start("nft", 1)
    flushed = run(driver, handle, "nft flush ruleset; echo $?; unshare -Urn true; echo $?")
    codes = flushed.stdout.split()
    assert codes[0] != "0"  # no CAP_NET_ADMIN over its namespace
    assert codes[1] != "0"  # no new user namespace to gain one


def test_another_sandbox_and_its_socket_are_out_of_sight(driver: LocalDriver) -> None:
    victim = driver.start("victim", 1)
    run(driver, victim, "echo secret > mine.txt")
    attacker = driver.start("attacker", 1)
    victim_root = driver.endpoint(victim).split("://", 1)[1]
    looked = run(
        driver,
        attacker,
        f"ls {victim_root.replace('%2F', '/')} 2>&1; find / -name mine.txt 2>/dev/null; "
        "echo SOCKETS; find / -name sandboxd.sock 2>/dev/null; ps -eo comm | sort -u",
    )
    out = looked.stdout
    assert "mine.txt" not in out
    sockets = [line for line in out.split("SOCKETS", 1)[1].splitlines() if "sandboxd.sock" in line]
    assert sockets == ["/run/sandboxd/sandboxd.sock"]  # its own only
    processes = out.split("COMMAND", 1)[1].split()
    assert set(processes) <= {"bash", "bwrap", "ps", "python3", "sort"}  # its own pid namespace


def test_no_host_accounts_secrets_or_token_inside(driver: LocalDriver, tmp_path: Path) -> None:
    handle = driver.start("etc", 1)
    (tmp_path / "home" / "jwt-secret").write_text("state-folder-secret")
    looked = run(
        driver,
        handle,
        "id -u; cat /etc/shadow 2>&1; cat /etc/passwd; "
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n';"
        f" cat {tmp_path}/home/jwt-secret 2>&1; ls /root 2>&1; ls /work 2>&1",
    )
    out = looked.stdout
    assert out.splitlines()[0] == "1000"  # an unprivileged user
    assert "No such file" in out  # no /etc/shadow at all
    assert "state-folder-secret" not in out
    assert driver.token(handle) not in out  # the token came on a pipe, not the environment
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()}
    inside_users = {line.split(":")[0] for line in out.splitlines() if line.count(":") >= 6}
    assert inside_users <= {"root", "user", "nobody"}
    assert inside_users != host_users


def test_nothing_outside_the_workspace_is_writable(driver: LocalDriver, tmp_path: Path) -> None:
    handle = driver.start("write", 1)
    attempts = ["/usr/evil", "/etc/evil", "/opt/sandboxd/evil", "/evil", "/run/evil"]
    wrote = run(
        driver,
        handle,
        "; ".join(f"(echo x > {path}) 2>/dev/null && echo WROTE {path}" for path in attempts)
        + "; echo ok > inside.txt",
    )
    assert "WROTE" not in wrote.stdout, wrote
    assert (sandbox_workspace(handle.ref) / "inside.txt").read_text() == "ok\n"


def test_a_planted_pid_is_never_signalled(driver: LocalDriver) -> None:
    bystander = subprocess.Popen(["sleep", "60"])  # a host process
    try:
        real = driver.start("pid", 1)
        planted = SandboxHandle(
            driver="local", session_id="pid", generation=1, ref=str(bystander.pid)
        )
        assert driver.probe(planted).state is SandboxState.STOPPED
        driver.stop(planted)
        time.sleep(0.2)
        assert bystander.poll() is None  # still alive
        assert driver.probe(real).state is SandboxState.RUNNING
    finally:
        bystander.kill()
        bystander.wait()


def test_a_planted_endpoint_is_ignored(driver: LocalDriver, tmp_path: Path) -> None:
    handle = driver.start("endpoint", 1)
    planted = SandboxHandle(
        driver="local",
        session_id="endpoint",
        generation=1,
        ref=handle.ref,
        endpoint="http://127.0.0.1:1",
    )
    assert driver.endpoint(planted) == driver.endpoint(handle)
    assert driver.probe(planted).state is SandboxState.RUNNING


@pytest.mark.parametrize(
    "planted",
    ["{victim}", "../../{name}", "snap/../../{name}", "snap/1-20260101T000000000000Z.tar.zst/.."],
)
def test_a_planted_snapshot_id_never_reaches_a_host_file(
    driver: LocalDriver, tmp_path: Path, planted: str
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    ref = SnapshotRef(
        driver="local",
        id=planted.format(victim=victim, name=victim.name),
        session_id="snap",
        generation=1,
        size_bytes=1,
        sha256="0" * 64,
        created_at=datetime.now(UTC),
    )
    with pytest.raises(SandboxError, match="invalid snapshot id"):
        driver.delete_snapshot(ref)
    with pytest.raises(SandboxError, match="invalid snapshot id"):
        driver.start("snap", 2, from_snapshot=ref)
    assert victim.read_text() == "keep me"


def test_a_fork_bomb_stops_at_the_pids_limit(driver: LocalDriver) -> None:
    handle = driver.start("forks", 1)
    counted = run(
        driver,
        handle,
        """python3 - <<'EOF'
import os, signal, time
children = []
try:
    for _ in range(1000):
        pid = os.fork()
        if pid == 0:
            time.sleep(30); os._exit(0)
        children.append(pid)
except OSError:
    pass
print(len(children))
for pid in children:
    os.kill(pid, signal.SIGKILL)
EOF""",
    )
    started = int(counted.stdout.strip())
    assert 0 < started < SMALL.pids
    assert run(driver, handle, "echo alive").stdout == "alive\n"  # the sandbox survives


def test_memory_is_capped_across_processes(driver: LocalDriver) -> None:
    handle = driver.start("memory", 1)
    each = 120  # MiB: one fits under the 256 MiB cap, three together do not
    hog = (
        f"python3 -c 'import time; b = bytearray({each} << 20); "
        'b[::4096] = b"x" * len(b[::4096]); time.sleep(4); print("done")\''
    )
    result = run(driver, handle, f"({hog}) & ({hog}) & ({hog}) & wait", timeout=60)
    assert result.stdout.count("done") < 3, result
    assert run(driver, handle, hog).stdout == "done\n"  # one alone is fine


def test_address_space_is_free_where_the_cgroup_caps_memory(driver: LocalDriver) -> None:
    """What V8 does at every Node start (~10 GiB of address space reserved for WebAssembly):
    a reservation that costs no memory succeeds far past the 256 MiB cap, and no per-process
    address-space limit is set; the memory itself stays capped (the test above)."""
    handle = driver.start("reserve", 1)
    # mmap(NULL, 8 GiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE), as V8 does
    reserve = (
        "python3 -c 'import ctypes; libc = ctypes.CDLL(None); libc.mmap.restype = ctypes.c_void_p; "
        "at = libc.mmap(None, ctypes.c_size_t(8 << 30), 0, 0x4022, -1, ctypes.c_long(0)); "
        'print("reserved" if at not in (None, 2**64 - 1) else "refused")\''
    )
    reserved = run(driver, handle, reserve)
    assert reserved.stdout == "reserved\n", reserved
    limits = run(driver, handle, "grep 'Max address space' /proc/self/limits").stdout
    assert limits.split()[3:5] == ["unlimited", "unlimited"], limits


def test_the_workspace_and_tmp_are_size_capped(driver: LocalDriver) -> None:
    handle = driver.start("disk", 1)
    workspace = run(driver, handle, "head -c 100M /dev/zero > big.bin; echo $?; df -k .")
    assert workspace.stdout.splitlines()[0] != "0"
    assert "No space left" in workspace.stderr
    tmp = run(driver, handle, "head -c 32M /dev/zero > /tmp/big.bin; echo $?")
    assert tmp.stdout.strip() != "0"
    assert "No space left" in tmp.stderr
    assert run(driver, handle, "rm big.bin /tmp/big.bin; echo fine > f").exit_code == 0


def test_a_stopped_sandbox_leaves_no_process(driver: LocalDriver, tmp_path: Path) -> None:
    handle = driver.start("stop", 1)
    client = SandboxClient(driver.endpoint(handle), driver.token(handle), timeout=30)
    client.exec("(sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 &", timeout_seconds=10)
    driver.stop(handle)
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", "sleep 30[01]"], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout
    assert "sandboxes/stop/1" not in Path("/proc/mounts").read_text()  # the volume is gone
    assert eventually_empty(orphan_networks) == []  # and its network stack
    with pytest.raises(SandboxError):
        client.health()


def test_a_sandbox_outlives_the_runtime_and_is_readopted(machine: Machine, tmp_path: Path) -> None:
    """kill -9 of the runtime leaves its sandbox running (own session, no parent-death
    signal); the next driver on the same home proves it is the one launched and adopts it, and
    its stop leaves no process, volume or network behind."""
    script = f"""
import time
from pathlib import Path
from openagents.sandbox.client import SandboxClient
from openagents.sandbox.local import LocalDriver
home, sandboxd = Path({str(tmp_path / "home")!r}), Path({str(SANDBOXD)!r})
driver = LocalDriver(home, sandboxd, b"k" * 32, SandboxClient)
handle = driver.start("orphan", 1)
client = SandboxClient(driver.endpoint(handle), driver.token(handle))
client.exec("nohup sleep 302 >/dev/null 2>&1 &")
print(handle.model_dump_json(), flush=True)
time.sleep(60)
"""
    runtime = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert runtime.stdout is not None
    handle = SandboxHandle.model_validate_json(runtime.stdout.readline())
    os.kill(runtime.pid, signal.SIGKILL)
    runtime.wait()
    assert Path(f"/proc/{handle.ref}").exists(), "the sandbox died with the runtime"
    adopter = LocalDriver(tmp_path / "home", SANDBOXD, KEY, SandboxClient, limits=SMALL)
    try:
        assert adopter.probe(handle).state is SandboxState.RUNNING
        assert adopter.running() == [handle]
        client = SandboxClient(adopter.endpoint(handle), adopter.token(handle))
        assert client.exec("pgrep -x sleep").stdout.strip()  # its processes kept running
        adopter.stop(handle)
    finally:
        adopter.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-f", "sleep 302"], capture_output=True, text=True)
        if not left.stdout.strip():
            break
        time.sleep(0.2)
    assert not left.stdout.strip(), "the adopted sandbox outlived its stop"
    assert "sandboxes/orphan/1" not in Path("/proc/mounts").read_text()  # its volume too
    assert eventually_empty(orphan_networks) == []  # and its network stack


def test_sandboxd_listens_on_no_tcp_port(driver: LocalDriver) -> None:
    handle = driver.start("tcp", 1)
    listening = run(driver, handle, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null").stdout
    states = [
        line.split()[3] for line in listening.splitlines()[1:] if line.strip() and "sl" not in line
    ]
    assert "0A" not in states  # nothing in LISTEN inside
    assert handle.endpoint is not None
    assert handle.endpoint.startswith("http+unix://")


# An impostor: code in the sandbox replaces sandboxd on its socket (the folder is the sandbox's)
# and answers every request with a body that never ends: a flood, a trickle, or an error flood.
IMPOSTOR = r"""cat > /tmp/impostor.py <<'PY'
import os, socket, sys, threading, time
path, mode = "/run/sandboxd/sandboxd.sock", sys.argv[1]
os.unlink(path)
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(8)
open("/tmp/impostor.ready", "w").close()
status = b"500 Internal Server Error" if mode == "error" else b"200 OK"
def serve(conn):
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n\r\n")
    try:
        while True:
            if mode == "trickle":
                conn.sendall(b" ")
                time.sleep(0.2)
            else:
                conn.sendall(b"[" * 65536)
    except OSError:
        pass
while True:
    threading.Thread(target=serve, args=(server.accept()[0],), daemon=True).start()
PY
setsid python3 /tmp/impostor.py %s </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do [ -e /tmp/impostor.ready ] && break; sleep 0.05; done
ls /tmp/impostor.ready"""


@pytest.mark.parametrize(
    ("mode", "said"),
    [("flood", "answered more than"), ("trickle", "was still answering"), ("error", "500")],
)
def test_an_impostor_sandboxd_cannot_exhaust_the_control_plane(
    driver: LocalDriver, mode: str, said: str
) -> None:
    handle = driver.start(f"impostor-{mode}", 1)
    assert run(driver, handle, IMPOSTOR % mode).exit_code == 0
    client = SandboxClient(driver.endpoint(handle), driver.token(handle), timeout=3)
    failures: list[BaseException] = []

    def call() -> None:
        try:
            client.git_status()
        except BaseException as failure:  # the test inspects it
            failures.append(failure)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(120)  # liveness: without the caps a flood never ends (or exhausts memory)
    assert not caller.is_alive(), "the control plane is still reading the impostor's answer"
    (failure,) = failures
    assert isinstance(failure, SandboxError), failure
    assert said in str(failure)
    assert driver.probe(handle).state is not SandboxState.RUNNING  # answered too: a sick sandbox


def test_an_impostor_snapshot_cannot_fill_the_host_disk(
    driver: LocalDriver, tmp_path: Path
) -> None:
    handle = driver.start("impostor-snapshot", 1)
    assert run(driver, handle, IMPOSTOR % "flood").exit_code == 0
    with pytest.raises(SandboxError, match="snapshot refused: the sandbox sent more than"):
        driver.snapshot(handle)  # an endless "archive": refused past what the workspace holds
    snapshots = tmp_path / "home" / "snapshots"
    assert snapshots.is_dir()  # the driver's snapshot store, where the partial archive went
    assert [p for p in snapshots.rglob("*") if p.is_file()] == []  # nothing kept, no partial


def test_a_link_planted_in_place_of_the_socket_is_refused(
    driver: LocalDriver, tmp_path: Path
) -> None:
    """The socket folder is the sandbox's: it moves sandboxd's socket aside and links a root
    host socket in its place. The control plane refuses to connect (no request, no token)."""
    served: list[str] = []

    class Host(_Hello):
        def do_GET(self) -> None:
            served.append(self.path)
            super().do_GET()

    host = socketserver.ThreadingUnixStreamServer(str(tmp_path / "host.sock"), Host)
    threading.Thread(target=host.serve_forever, daemon=True).start()
    handle = driver.start("planted-link", 1)
    planted = run(
        driver,
        handle,
        f"cd /run/sandboxd && mv sandboxd.sock real.sock && ln -s {tmp_path}/host.sock "
        "sandboxd.sock && ls -l",
    )
    assert planted.exit_code == 0, planted
    client = SandboxClient(driver.endpoint(handle), driver.token(handle), timeout=5)
    try:
        with pytest.raises(SandboxError, match="is a symbolic link, not sandboxd's socket"):
            client.health()
    finally:
        host.shutdown()
        host.server_close()
    assert served == []  # the host socket saw nothing: no relay, no bearer token


def mounted_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` in this (the host's) mount namespace."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point == str(path) or point.startswith(f"{path}/"):
            found.append(point)
    return found


def test_the_socket_folder_cannot_fill_the_host_disk(driver: LocalDriver, tmp_path: Path) -> None:
    """``/run/sandboxd`` is a 1 MiB tmpfs of its own, not a folder of the host's disk: a 200 MB
    write stops at ENOSPC, and the stop takes the mount and what was written with it."""
    handle = driver.start("fill-run", 1)
    run_folder = tmp_path / "home" / "sandboxes" / "fill-run" / "1" / "run"
    assert mounted_under(run_folder) == [str(run_folder)]
    filled = run(
        driver,
        handle,
        "dd if=/dev/zero of=/run/sandboxd/fill bs=1M count=200; echo rc=$?; "
        "for i in $(seq 100); do : > /run/sandboxd/f$i || break; done; echo files=$i",
    )
    assert "No space left on device" in filled.stderr, filled
    assert "rc=0" not in filled.stdout, filled
    held = sum(f.stat().st_size for f in run_folder.iterdir() if f.is_file())
    assert held <= 1 << 20, held  # the host holds at most the cap, in memory
    assert int(filled.stdout.split("files=")[1]) < 100  # and a few inodes
    # the control plane still reaches its socket there (owned by the sandbox, no link)
    assert run(driver, handle, "echo alive").stdout == "alive\n"
    driver.stop(handle)
    assert mounted_under(run_folder) == []
    assert list(run_folder.iterdir()) == []  # nothing of it on the host's disk


def test_the_restart_sweep_unmounts_a_dead_generations_socket_folder(
    driver: LocalDriver, machine: Machine, tmp_path: Path
) -> None:
    """A generation that died without a stop (killed by hand, a crash) keeps no mount: the next
    server's sweep (``running``) takes it, as ``reboot`` does for the generation it replaces."""
    handle = driver.start("dead-run", 1)
    run_folder = tmp_path / "home" / "sandboxes" / "dead-run" / "1" / "run"
    assert mounted_under(run_folder) == [str(run_folder)]
    os.kill(int(handle.ref), signal.SIGKILL)  # the keeper: the whole sandbox goes
    deadline = time.monotonic() + 30
    while driver.probe(handle).state is not SandboxState.STOPPED:
        assert time.monotonic() < deadline, "the killed sandbox still runs"
        time.sleep(0.1)
    later = LocalDriver(tmp_path / "home", SANDBOXD, KEY, SandboxClient, limits=SMALL)
    try:
        assert later.running() == []
        assert mounted_under(run_folder) == []
        rebooted = later.reboot(handle, 2)
        assert rebooted is not None
        assert mounted_under(run_folder.parent.parent / "2" / "run") != []
        later.stop(rebooted)
        assert mounted_under(tmp_path / "home") == []
    finally:
        later.close()


# A fork bomb that left the command's process group: every process ignores SIGTERM, moves to a
# session of its own and keeps forking; at the pids limit each retries as soon as a slot frees.
BOMB = """setsid python3 - bomb-marker >/dev/null 2>&1 </dev/null <<'BOMB' &
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        time.sleep(0.01)
BOMB
echo started"""


def pids_folder(machine: Machine, name: str) -> Path:
    folders = [f for f in Cgroup.named(machine, name).folders if (f / "pids.current").exists()]
    assert folders, f"no pids cgroup for {name}"
    return folders[0]


def wait_until(check: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def bombs_on_host() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if b"bomb-marker" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def set_off_a_bomb(driver: LocalDriver, machine: Machine, handle: SandboxHandle) -> Path:
    """The bomb, started detached; returns once it holds every pid the sandbox may have."""
    with contextlib.suppress(SandboxError):  # the answer may itself be starved of a thread
        run(driver, handle, BOMB, timeout=20)
    folder = pids_folder(machine, f"{handle.session_id}-{handle.generation}")
    limit = int((folder / "pids.max").read_text())
    wait_until(
        lambda: int((folder / "pids.current").read_text()) >= limit,
        "the bomb never reached the pids limit",
    )
    return folder


def test_kill_commands_brings_a_fork_bombed_sandbox_back(
    driver: LocalDriver, machine: Machine
) -> None:
    """A detached fork bomb at the pids limit wedges the sandbox (no command can start); the
    driver's kill_commands (the cgroup frozen, every process but the keeper, bubblewrap, the
    namespace's init and sandboxd killed, thawed) brings it back with its workspace: exec
    works, and a snapshot verifies."""
    handle = driver.start("bomb", 1)
    assert run(driver, handle, "echo keep me > kept.txt").exit_code == 0
    machinery = set(Cgroup.named(machine, "bomb-1").procs())  # keeper, bwrap, init, sandboxd
    folder = set_off_a_bomb(driver, machine, handle)
    try:
        said = run(driver, handle, "echo alive", timeout=5).stdout
    except SandboxError as exc:  # no thread, no fork: it cannot even answer
        said = str(exc)
    assert said != "alive\n", said
    killed = driver.kill_commands(handle)
    assert killed >= SMALL.pids // 2, killed
    assert bombs_on_host() == []
    assert machinery <= set(Cgroup.named(machine, "bomb-1").procs())  # the machinery kept
    assert run(driver, handle, "cat kept.txt").stdout == "keep me\n"
    assert int((folder / "pids.current").read_text()) < SMALL.pids // 2
    snapshot = driver.snapshot(handle)  # verified against sandboxd's manifest
    assert snapshot.sha256
    assert snapshot.manifest["fileCount"] >= 1
    assert driver.kill_commands(handle) == 0  # nothing left to kill


def test_stop_kills_a_fork_bomb_and_leaves_no_cgroup(driver: LocalDriver, machine: Machine) -> None:
    handle = driver.start("bomb-stop", 1)
    set_off_a_bomb(driver, machine, handle)
    driver.stop(handle)
    assert bombs_on_host() == []
    assert Cgroup.named(machine, "bomb-stop-1").folders == []  # killed to the last, removed
