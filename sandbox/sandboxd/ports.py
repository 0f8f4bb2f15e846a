"""Listening ports: ``GET /ports`` (the TCP sockets in LISTEN state in the sandbox's own network
namespace, loopback-bound ones included, with the process holding each when it can be found)
and ``GET /ports/{port}/tunnel`` (an ``Upgrade: tcp`` answered ``101``, after which the
connection carries bytes both ways to ``127.0.0.1:port`` or ``[::1]:port`` in the sandbox: the
control plane's preview proxy rides it, so no port of the sandbox is ever opened on the host)."""

from __future__ import annotations

import os
import re
import socket
import struct
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ApiError, JsonObject, bad_request

if TYPE_CHECKING:
    from .app import App
    from .request import Request

LISTEN = "0A"
MAX_PORTS = 256
MAX_PIDS_SCANNED = 4096
MAX_COMMAND_CHARS = 200
TUNNEL_ROUTE = re.compile(r"/ports/([0-9]{1,5})/tunnel")
CONNECT_SECONDS = 5.0
SPLICE_BYTES = 64 << 10
PROC = Path("/proc")


@dataclass(frozen=True)
class Listener:
    port: int
    address: str
    inode: int


def _ipv4(hex_address: str) -> str:
    return socket.inet_ntop(socket.AF_INET, struct.pack("=I", int(hex_address, 16)))


def _ipv6(hex_address: str) -> str:
    words = [int(hex_address[i : i + 8], 16) for i in range(0, 32, 8)]
    return socket.inet_ntop(socket.AF_INET6, struct.pack("=4I", *words))


def parse_proc_net_tcp(text: str, ipv6: bool) -> list[Listener]:
    """The LISTEN sockets of a ``/proc/net/tcp`` (or ``tcp6``) table; malformed lines skipped.
    Addresses are words in host byte order, the port big-endian hex."""
    found: list[Listener] = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        address, _, port_hex = fields[1].partition(":")
        try:
            port = int(port_hex, 16)
            shown = _ipv6(address) if ipv6 else _ipv4(address)
            inode = int(fields[9])
        except (ValueError, struct.error, OSError):
            continue
        if len(address) != (32 if ipv6 else 8) or not 0 < port < 65536:
            continue
        found.append(Listener(port, shown, inode))
    return found


def listeners(proc: Path = PROC) -> list[Listener]:
    found: list[Listener] = []
    for name, ipv6 in (("tcp", False), ("tcp6", True)):
        with suppress(OSError):
            found += parse_proc_net_tcp((proc / "net" / name).read_text(), ipv6)
    return found


def socket_owners(inodes: set[int], proc: Path = PROC) -> dict[int, tuple[int, str]]:
    """Socket inode -> (pid, command line) for the processes we may look into (best effort)."""
    owners: dict[int, tuple[int, str]] = {}
    if not inodes:
        return owners
    with suppress(OSError):
        pids = [entry for entry in os.listdir(proc) if entry.isdigit()][:MAX_PIDS_SCANNED]
        for pid in pids:
            with suppress(OSError):
                for fd in os.listdir(proc / pid / "fd"):
                    target = os.readlink(proc / pid / "fd" / fd)
                    if not target.startswith("socket:["):
                        continue
                    inode = int(target[8:-1])
                    if inode in inodes and inode not in owners:
                        owners[inode] = (int(pid), _command(proc, pid))
    return owners


def _command(proc: Path, pid: str) -> str:
    with suppress(OSError):
        raw = (proc / pid / "cmdline").read_bytes()[: MAX_COMMAND_CHARS * 4]
        return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:MAX_COMMAND_CHARS]
    return ""


def list_ports(app: App, request: Request) -> JsonObject:
    found = listeners()
    owners = socket_owners({listener.inode for listener in found})
    seen: set[tuple[int, str]] = set()
    ports: list[JsonObject] = []
    for listener in sorted(found, key=lambda item: (item.port, item.address)):
        if (listener.port, listener.address) in seen or len(ports) >= MAX_PORTS:
            continue
        seen.add((listener.port, listener.address))
        entry: JsonObject = {"port": listener.port, "address": listener.address}
        if listener.inode in owners:
            entry["pid"], entry["command"] = owners[listener.inode]
        ports.append(entry)
    return {"ports": ports}


# ---------------------------------------------------------------------------- tunnel


def tunnel(app: App, request: Request) -> None:
    matched = TUNNEL_ROUTE.fullmatch(request.path)
    port = int(matched.group(1)) if matched else 0
    if not 0 < port < 65536:
        raise bad_request("port must be 1-65535", "invalid_port")
    wanted = (request.header("Upgrade") or "").strip().lower()
    if wanted != "tcp" or "upgrade" not in (request.header("Connection") or "").lower():
        raise ApiError(426, "upgrade_required", "send Connection: Upgrade and Upgrade: tcp")
    upstream = _connect(port)
    upgrade = request.upgrade
    try:
        upgrade.accept("tcp")
        splice(upgrade.connection, upstream, upgrade.read)
    finally:
        upstream.close()


def _connect(port: int) -> socket.socket:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_SECONDS)
        try:
            sock.connect((host, port))
        except OSError:
            sock.close()
            continue
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request's head goes now
        return sock
    raise ApiError(404, "port_not_listening", f"nothing listens on port {port}")


def splice(
    client: socket.socket, upstream: socket.socket, read_client: Callable[[int], bytes]
) -> None:
    """Copy both ways until both sides have ended; a side's end is passed on as a half-close.
    What the client sent ahead of our 101 sits in a buffer: ``read_client`` reads it first."""
    client.settimeout(None)
    if client.family in (socket.AF_INET, socket.AF_INET6):  # Fargate: the gateway's connection
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def to_client() -> None:
        _pump(_acking(upstream), client)

    thread = threading.Thread(target=to_client, name="tunnel", daemon=True)
    thread.start()
    _pump(read_client, upstream)
    thread.join()


def _acking(sock: socket.socket) -> Callable[[int], bytes]:
    """``sock.recv`` acknowledging at once (Linux's TCP_QUICKACK, which lasts one read): a dev
    server that writes its answer's head and body apart without TCP_NODELAY (Python's
    http.server with keep-alive) would otherwise wait on a delayed ACK (~40 ms) for the body."""
    quickack = getattr(socket, "TCP_QUICKACK", None)

    def read(size: int) -> bytes:
        if quickack is not None:
            with suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
        return sock.recv(size)

    return read


def _pump(read: Callable[[int], bytes], target: socket.socket) -> None:
    try:
        while data := read(SPLICE_BYTES):
            target.sendall(data)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            target.shutdown(socket.SHUT_WR)
