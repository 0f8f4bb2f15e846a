"""How the one-machine driver confines a sandbox: what this machine can do, the sandbox's own
``/etc``, its host uid, its cgroups, its size-capped workspace volume and its network.

Everything here runs on the host, as the control plane, and never reads what a sandbox wrote:
paths come from the driver's own folders, never from the store or the workspace.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import itertools
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SANDBOX_UID = 1000  # the unprivileged user inside every sandbox
FIRST_HOST_UID = 200_000  # host uids for sandboxes: FIRST_HOST_UID + n, one per sandbox
HOST_UID_COUNT = 60_000
UID_COUNTER = Path("/var/lib/openagents/sandbox-uids")  # machine-wide: homes never share a uid
SLIRP_DNS = "10.0.2.3"  # slirp4netns's resolver (it forwards to the host's)
SUBPROCESS_TIMEOUT_SECONDS = 30
FREEZE_SECONDS = 5  # a cgroup that does not freeze in this long is killed thawed, round by round
KILL_SECONDS = 30  # how long killing a sandbox's processes may take, all rounds together

# Outbound traffic leaves through the user-mode stack, never to the host, its on-link subnets
# or a private range. DNS is UDP only: slirp relays TCP to 10.0.2.3:53 to the host's resolver
# as a plain stream (arbitrary bytes to a private address), so TCP there is refused with the
# rest of 10.0.0.0/8.
NFT_RULES = f"""
table inet openagents {{
  chain output {{
    type filter hook output priority 0; policy accept;
    oifname "lo" accept
    ip daddr {SLIRP_DNS} udp dport 53 accept
    ip daddr {{ 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16,
               172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3 }} reject
    ip6 daddr {{ ::/128, ::1/128, ::ffff:0:0/96, fc00::/7, fe80::/10, ff00::/8 }} reject
    meta l4proto != {{ tcp, udp, icmp, icmpv6 }} drop
  }}
}}
"""

PASSWD = (
    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
    f"user:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox user:/tmp:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = f"root:x:0:\nuser:x:{SANDBOX_UID}:\nnogroup:x:65534:\n"
HOSTS = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n"
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"
# Copied from the host: the dynamic linker's cache, alternatives, CA certificates, time zone.
HOST_ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates.conf",
    "localtime",
    "os-release",
    "mime.types",
)


@dataclass(frozen=True)
class Limits:
    """Whole-sandbox limits (memory and pids through cgroups where the machine allows), plus
    per-process rlimits that always apply."""

    memory_bytes: int = 4 * 1024**3
    pids: int = 512
    disk_bytes: int = 10 * 1024**3
    tmp_bytes: int = 1024**3
    file_size_bytes: int = 2 * 1024**3
    cpu_seconds: int = 5 * 3600
    open_files: int = 4096


@dataclass(frozen=True)
class Machine:
    """What this machine offers for confinement, found once when the driver starts."""

    bwrap: str | None
    root: bool
    slirp4netns: str | None
    nft: str | None
    nsenter: str | None
    setpriv: str | None
    mkfs: str | None
    cgroup_v1: dict[str, Path]  # controller -> this process's cgroup folder
    cgroup_v2: Path | None  # a folder where memory and pids can be enabled for children

    @classmethod
    def detect(cls) -> Machine:
        root = os.geteuid() == 0
        return cls(
            bwrap=shutil.which("bwrap"),
            root=root,
            slirp4netns=shutil.which("slirp4netns"),
            nft=shutil.which("nft") or _sbin("nft"),
            nsenter=shutil.which("nsenter"),
            setpriv=shutil.which("setpriv"),
            mkfs=(shutil.which("mkfs.ext4") or _sbin("mkfs.ext4")) if root else None,
            cgroup_v1=_cgroup_v1() if root else {},
            cgroup_v2=_cgroup_v2() if root else None,
        )

    @property
    def outbound_network(self) -> bool:
        return bool(self.bwrap and self.root and self.slirp4netns and self.nft and self.nsenter)

    @property
    def cgroups(self) -> str | None:
        if self.cgroup_v2 is not None:
            return "cgroup-v2"
        if {"memory", "pids"} <= self.cgroup_v1.keys():
            return "cgroup-v1"
        return None


def _sbin(name: str) -> str | None:
    for folder in ("/usr/sbin", "/sbin"):
        if os.access(f"{folder}/{name}", os.X_OK):
            return f"{folder}/{name}"
    return None


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path
    return found


def _cgroup_v1() -> dict[str, Path]:
    own = _own_cgroups()
    folders: dict[str, Path] = {}
    for controller in ("memory", "pids", "freezer"):  # the freezer where the machine has it
        mount = Path("/sys/fs/cgroup") / controller
        if controller in own and (mount / "cgroup.procs").exists():
            folders[controller] = mount / own[controller].lstrip("/")
    return folders


def _cgroup_v2() -> Path | None:
    """A v2 folder whose children may use memory and pids: our own cgroup when it delegates
    them (systemd's Delegate=yes, or a container's root cgroup), else none."""
    mount = Path("/sys/fs/cgroup")
    if not (mount / "cgroup.controllers").exists():
        return None
    own = mount / _own_cgroups().get("", "/").lstrip("/")
    base = own / "openagents-sandboxes"
    try:
        base.mkdir(exist_ok=True)
        subtree = base / "cgroup.subtree_control"
        subtree.write_text("+memory +pids")
        if not {"memory", "pids"} <= set(subtree.read_text().split()):
            return None
    except OSError:
        return None
    return base


# ---------------------------------------------------------------------------- /etc


def build_etc(folder: Path, resolv_conf: str) -> Path:
    """The sandbox's own ``/etc``: an unprivileged user, its resolver, CA certificates — none of
    the host's accounts, shadow file or secrets. Built once per driver, mounted read-only."""
    staging = folder.with_name(folder.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, text in (
        ("passwd", PASSWD),
        ("group", GROUP),
        ("hosts", HOSTS),
        ("hostname", "sandbox\n"),
        ("nsswitch.conf", NSSWITCH),
        ("resolv.conf", resolv_conf),
        # A local repository is mounted read-only, owned by a host uid the sandbox does not map:
        # git may read it. System scope: git 2.39's upload-pack ignores -c safe.directory.
        ("gitconfig", "[safe]\n\tdirectory = *\n"),
    ):
        (staging / name).write_text(text)
    for name in HOST_ETC:
        source = Path("/etc") / name
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if source.is_dir() and not source.is_symlink():
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target, follow_symlinks=False)
    for path in [staging, *staging.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


def resolv_conf(outbound: bool) -> str:
    return f"nameserver {SLIRP_DNS}\noptions timeout:2 attempts:2\n" if outbound else ""


# ---------------------------------------------------------------------------- host uids


def host_uid(root: Path, counter: Path = UID_COUNTER) -> int:
    """The host uid of one sandbox generation, stable across its restarts (kept in its own
    folder, outside the workspace), distinct from every other sandbox's on this machine, of
    whichever state folder (one counter per machine, under a lock)."""
    recorded = root / "uid"
    if recorded.exists():
        return int(recorded.read_text())
    counter.parent.mkdir(parents=True, exist_ok=True)
    with counter.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        last = int(handle.read().strip() or -1)
        following = (last + 1) % HOST_UID_COUNT
        handle.seek(0)
        handle.truncate()
        handle.write(str(following))
        handle.flush()
        os.fsync(handle.fileno())
    uid = FIRST_HOST_UID + following
    recorded.write_text(str(uid))
    return uid


# ---------------------------------------------------------------------------- cgroups


class Cgroup:
    """One sandbox's memory and pids cgroups (v2, or v1's two hierarchies)."""

    def __init__(self, machine: Machine, name: str, limits: Limits) -> None:
        self.folders: list[Path] = []
        if machine.cgroup_v2 is not None:
            folder = machine.cgroup_v2 / name
            folder.mkdir(exist_ok=True)
            (folder / "memory.max").write_text(str(limits.memory_bytes))
            with contextlib.suppress(OSError):
                (folder / "memory.swap.max").write_text("0")
            (folder / "pids.max").write_text(str(limits.pids))
            self.folders = [folder]
        elif machine.cgroups == "cgroup-v1":
            memory = machine.cgroup_v1["memory"] / "openagents" / name
            pids = machine.cgroup_v1["pids"] / "openagents" / name
            freezer = machine.cgroup_v1.get("freezer")
            frozen = [freezer / "openagents" / name] if freezer is not None else []
            for folder in (memory, pids, *frozen):
                folder.mkdir(parents=True, exist_ok=True)
            (memory / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            with contextlib.suppress(OSError):  # only with swap accounting
                (memory / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
            (pids / "pids.max").write_text(str(limits.pids))
            self.folders = [memory, pids, *frozen]

    @property
    def caps_memory(self) -> bool:
        """Its memory limit is set (a machine without cgroups makes none)."""
        return bool(self.folders)

    @classmethod
    def named(cls, machine: Machine, name: str) -> Cgroup:
        """The cgroups of that name this machine has now (none made): a generation's own."""
        if machine.cgroup_v2 is not None:
            candidates = [machine.cgroup_v2 / name]
        elif machine.cgroups == "cgroup-v1":
            candidates = [
                machine.cgroup_v1[c] / "openagents" / name
                for c in ("memory", "pids", "freezer")
                if c in machine.cgroup_v1
            ]
        else:
            candidates = []
        return cls.existing(tuple(str(folder) for folder in candidates if folder.is_dir()))

    @classmethod
    def existing(cls, folders: tuple[str, ...]) -> Cgroup:
        """The cgroups a previous server made for a sandbox it launched (re-adoption)."""
        cgroup = cls.__new__(cls)
        cgroup.folders = [Path(folder) for folder in folders]
        return cgroup

    def join(self) -> None:
        """In the child, before exec: this process and all it starts belong to the cgroups."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def procs(self) -> dict[int, int]:
        """Every living process in its folders: pid -> start time (a reused pid has another)."""
        found: dict[int, int] = {}
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                for pid in map(int, (folder / "cgroup.procs").read_text().split()):
                    started = living_start_time(pid)
                    if started is not None:
                        found[pid] = started
        return found

    def _freezer(self) -> tuple[Path, str, str] | None:
        """Its freezer control, the frozen and the thawed word: v2's ``cgroup.freeze``, or the
        v1 freezer hierarchy's ``freezer.state`` (none in a record made before it was used)."""
        for folder in self.folders:
            if (folder / "cgroup.freeze").exists():
                return folder / "cgroup.freeze", "1", "0"
            if (folder / "freezer.state").exists():
                return folder / "freezer.state", "FROZEN", "THAWED"
        return None

    def freeze(self) -> bool:
        """Freeze every process in it (none runs, none forks) and wait until the kernel says
        so; False without a freezer, or when it did not freeze within FREEZE_SECONDS."""
        freezer = self._freezer()
        if freezer is None:
            return False
        control, frozen, _ = freezer
        deadline = time.monotonic() + FREEZE_SECONDS
        try:
            control.write_text(frozen)
            while not self._frozen(control):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
        except OSError:
            return False
        return True

    @staticmethod
    def _frozen(control: Path) -> bool:
        if control.name == "cgroup.freeze":
            return "frozen 1" in (control.parent / "cgroup.events").read_text().splitlines()
        return control.read_text().strip() == "FROZEN"

    def thaw(self) -> None:
        freezer = self._freezer()
        if freezer is not None:
            control, _, thawed = freezer
            with contextlib.suppress(OSError):
                control.write_text(thawed)

    def remove(self) -> None:
        """Kill everything left in it (v2's ``cgroup.kill``; else frozen, killed, thawed, in
        rounds until it is empty), then remove it (best effort: a busy cgroup stays)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                if (folder / "cgroup.kill").exists():
                    (folder / "cgroup.kill").write_text("1")
        kill_all(self.procs, lambda _: set(), self)
        for folder in self.folders:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def living_start_time(pid: int) -> int | None:
    """A process's start time (/proc/<pid>/stat field 22), None once it exited (a zombie too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            return None
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def kill_all(
    members: Callable[[], dict[int, int]],
    spared: Callable[[dict[int, int]], set[int]],
    cgroup: Cgroup | None,
) -> int:
    """SIGKILL every process ``members`` lists (pid -> start time) but those ``spared`` keeps,
    until none is left: the cgroup frozen meanwhile when it has a freezer (a fork bomb cannot
    fork while it is killed), else round after round (each kill also stops that process's
    forks). Each signal goes through a pidfd to the very process listed (its start time
    checked), never to a pid reused meanwhile. Returns how many were killed."""
    killed: set[tuple[int, int]] = set()
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        if cgroup is not None:
            cgroup.freeze()  # best effort: without a freezer, the rounds below
        try:
            found = members()
            keep = spared(found)
            victims = {(pid, started) for pid, started in found.items() if pid not in keep}
            for pid, started in victims:
                _kill_exactly(pid, started)
            killed |= victims
        finally:
            if cgroup is not None:
                cgroup.thaw()
        if not victims:
            return len(killed)
        while any(living_start_time(pid) == started for pid, started in victims):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if time.monotonic() > deadline:
            log.warning("processes still alive after %ss of killing", KILL_SECONDS)
            return len(killed)
        # one more look: empty (frozen, nothing could fork meanwhile), or those born meanwhile


def _kill_exactly(pid: int, started: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if living_start_time(pid) == started:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- workspace volume


def workspace_image(machine: Machine, root: Path, uid: int, size_bytes: int) -> Path | None:
    """The workspace volume: a sparse ext4 image of ``size_bytes`` (a hard disk cap, as an EBS
    volume has), owned inside by the sandbox's uid, when this machine can make one. The launcher
    loop-mounts it in the sandbox's own mount namespace, so the mount never outlives the
    sandbox, even when the runtime is killed."""
    if machine.mkfs is None:
        return None
    image = root / "workspace.img"
    if not image.exists():
        partial = image.with_suffix(".partial")
        with partial.open("wb") as handle:
            handle.truncate(size_bytes)
        _run(
            [
                machine.mkfs,
                "-q",
                "-F",
                "-m",
                "0",
                "-E",
                f"lazy_itable_init=1,lazy_journal_init=1,root_owner={uid}:{uid}",
                str(partial),
            ]
        )
        partial.rename(image)
    return image


def workspace_folder(root: Path, uid: int, owned: bool) -> Path:
    """The workspace as a plain folder (no volume on this machine)."""
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    _own(workspace, uid, owned)
    return workspace


# sandboxd's socket folder: a tmpfs of its own on the host (the control plane connects there),
# bound at /run/sandboxd. Only a socket lives in it: a sandbox that writes there fills 1 MiB
# (and 64 inodes) of memory, never the host's disk, and the mount goes when the generation stops.
RUN_TMPFS_BYTES = 1 << 20
RUN_TMPFS_INODES = 64


def mount_run(run: Path, uid: int) -> None:
    """Mount the generation's ``run`` folder as a tiny tmpfs (0700, owned by the sandbox's host
    uid, as the plain folder was), in the host's mount namespace: the control plane reaches the
    socket there, and a re-adopted sandbox keeps its mount. Root only."""
    if run.is_symlink() or not run.is_dir():
        raise SubprocessFailed(f"{run} is not the driver's own folder")
    unmount_run(run)  # a launch that never stopped (a server killed mid-launch)
    options = (
        f"size={RUN_TMPFS_BYTES},nr_inodes={RUN_TMPFS_INODES},mode=0700,uid={uid},gid={uid},"
        "nosuid,nodev,noexec"
    )
    _run([_tool("mount"), "-t", "tmpfs", "-o", options, "openagents-run", str(run)])


def unmount_run(run: Path) -> None:
    """Unmount the ``run`` tmpfs (every one stacked there), if mounted; what the sandbox wrote
    there goes with it. A no-op where nothing is mounted (a machine without root)."""
    for _ in range(8):
        if run.is_symlink() or not os.path.ismount(run):
            return
        try:
            _run([_tool("umount"), "--lazy", str(run)])
        except (SubprocessFailed, OSError, subprocess.SubprocessError) as exc:
            log.warning("could not unmount %s: %s", run, exc)
            return


def _tool(name: str) -> str:
    return shutil.which(name) or _sbin(name) or f"/bin/{name}"


def reset_workspace(root: Path) -> None:
    """Drop a half-restored workspace (the image and the folder)."""
    (root / "workspace.img").unlink(missing_ok=True)
    shutil.rmtree(root / "workspace", ignore_errors=True)


def _own(path: Path, uid: int, root: bool) -> None:
    if root:
        os.chown(path, uid, uid)


# ---------------------------------------------------------------------------- network


def firewall(machine: Machine, pid: int) -> None:
    """Refuse the host (every address it has) and private ranges from inside the sandbox's
    network namespace. Set from the host as root: the sandbox has no capability over its
    namespace and cannot undo it."""
    assert machine.nsenter is not None
    assert machine.nft is not None
    rules = NFT_RULES
    v4, v6 = host_addresses()
    if v4:
        rules += f"add rule inet openagents output ip daddr {{ {', '.join(v4)} }} reject\n"
    if v6:
        rules += f"add rule inet openagents output ip6 daddr {{ {', '.join(v6)} }} reject\n"
    nets4, nets6 = connected_subnets(_read("/proc/net/route"), _read("/proc/net/ipv6_route"))
    # a rule each: a subnet holds the host's own address, and one set may not overlap itself
    rules += "".join(f"add rule inet openagents output ip daddr {net} reject\n" for net in nets4)
    rules += "".join(f"add rule inet openagents output ip6 daddr {net} reject\n" for net in nets6)
    _run([machine.nsenter, "-t", str(pid), "-n", machine.nft, "-f", "-"], stdin=rules)


def host_addresses() -> tuple[list[str], list[str]]:
    """This host's own IPv4 and IPv6 addresses (its public ones too: a service bound to
    0.0.0.0 answers on them), read from /proc."""
    v4: set[str] = set()
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for previous, line in itertools.pairwise(lines):
            if "/32 host LOCAL" in line:
                v4.add(previous.split()[-1])
    v6: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0]
            v6.add(":".join(raw[i : i + 4] for i in range(0, 32, 4)))
    return sorted(v4), sorted(v6)


def connected_subnets(route: str, ipv6_route: str) -> tuple[list[str], list[str]]:
    """The host's on-link subnets (routes with no gateway, the default route aside), from the
    texts of ``/proc/net/route`` and ``/proc/net/ipv6_route``: a neighbour on a public or
    TEST-NET subnet the host is connected to is no more the sandbox's to reach than the host."""
    v4: set[str] = set()
    for line in route.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[0] == "lo" or int(fields[2], 16) != 0:
            continue
        mask = int(fields[7], 16)
        if mask == 0:
            continue
        network = ipaddress.IPv4Address(int(fields[1], 16).to_bytes(4, "little"))
        prefix = ipaddress.IPv4Address(mask.to_bytes(4, "little"))
        v4.add(str(ipaddress.IPv4Network(f"{network}/{prefix}", strict=False)))
    v6: set[str] = set()
    for line in ipv6_route.splitlines():
        fields = line.split()
        if len(fields) < 10 or fields[9] == "lo" or int(fields[4], 16) != 0:
            continue
        length = int(fields[1], 16)
        if not 0 < length < 128:
            continue
        address = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
        if address.is_multicast:
            continue
        v6.add(str(ipaddress.IPv6Network(f"{address}/{length}", strict=False)))
    return sorted(v4), sorted(v6)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def user_mode_network(
    machine: Machine, pid: int, log_path: Path, lifeline: int
) -> subprocess.Popen[bytes]:
    """slirp4netns on the sandbox's namespace: outbound TCP/UDP through host sockets, no route to
    the host's loopback, itself sandboxed (its own mount namespace, seccomp). It exits when
    ``lifeline`` (a pipe whose write end only the sandbox's processes hold) reads EOF."""
    assert machine.slirp4netns is not None
    ready_read, ready_write = os.pipe()
    log_file = log_path.open("ab")
    try:
        process = subprocess.Popen(  # noqa: S603 - argv from our own values
            [
                machine.slirp4netns,
                "--configure",
                "--mtu=65520",
                "--disable-host-loopback",
                "--enable-sandbox",
                "--enable-seccomp",
                f"--ready-fd={ready_write}",
                f"--exit-fd={lifeline}",
                "--netns-type=path",
                f"/proc/{pid}/ns/net",
                "tap0",
            ],
            pass_fds=(ready_write, lifeline),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,  # outlives the server, as its sandbox does
        )
        os.close(ready_write)
        ready_write = -1
        ready = os.read(ready_read, 1)
    finally:
        log_file.close()
        if ready_write >= 0:
            os.close(ready_write)
        os.close(ready_read)
    if ready != b"1":
        process.kill()
        process.wait()
        tail = log_path.read_text(errors="replace")[-500:].strip()
        raise SubprocessFailed(f"slirp4netns did not configure the sandbox's network: {tail}")
    return process


class SubprocessFailed(Exception):
    pass


def _run(argv: list[str], stdin: str | None = None) -> None:
    completed = subprocess.run(  # noqa: S603 - argv from our own values
        argv,
        input=stdin.encode() if stdin is not None else None,
        capture_output=True,
        timeout=SUBPROCESS_TIMEOUT_SECONDS,
        check=False,
    )
    if completed.returncode != 0:
        detail = completed.stderr.decode(errors="replace").strip()
        raise SubprocessFailed(f"{Path(argv[0]).name} failed: {detail[-500:]}")
