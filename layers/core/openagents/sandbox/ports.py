"""sandboxd's ports answers, read as the hostile input they are: ``GET /ports`` validated into
``ListeningPort`` values (bounded count and lengths), and the tunnel's ``101`` read with a
bounded read before the raw socket is handed on."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from openagents.sandbox.errors import SandboxError

MAX_PORTS = 256
MAX_COMMAND_CHARS = 200
MAX_HEAD_BYTES = 16 << 10
HEAD_READ_SECONDS = 10.0
MAX_PID = 1 << 22


@dataclass(frozen=True)
class ListeningPort:
    port: int
    address: str
    pid: int | None = None
    command: str | None = None


def _port(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
        return value
    return None


def _pid(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < MAX_PID:
        return value
    return None


def _text(entry: dict[str, Any]) -> str | None:
    command = entry.get("command")
    if not isinstance(command, str):
        return None
    return "".join(c for c in command[:MAX_COMMAND_CHARS] if c.isprintable())


def parse_ports(answer: dict[str, Any]) -> list[ListeningPort]:
    """The entries that are well formed (others dropped), at most ``MAX_PORTS``."""
    raw = answer.get("ports")
    if not isinstance(raw, list):
        raise SandboxError("sandbox request failed: GET /ports answered no port list")
    found: list[ListeningPort] = []
    for entry in raw[: MAX_PORTS * 4]:
        if not isinstance(entry, dict) or len(found) >= MAX_PORTS:
            continue
        port, address = _port(entry.get("port")), entry.get("address")
        if port is None or not isinstance(address, str) or len(address) > 64:
            continue
        try:
            shown = str(ipaddress.ip_address(address))
        except ValueError:
            continue
        found.append(ListeningPort(port, shown, _pid(entry.get("pid")), _text(entry)))
    return found


def tunnel_request(port: int, token: str, host: str) -> bytes:
    return (
        f"GET /ports/{port}/tunnel HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
    ).encode()


def read_head(sock: socket.socket, seconds: float = HEAD_READ_SECONDS) -> tuple[int, bytes, bytes]:
    """The status and the head of sandboxd's answer, and what came after the head; bounded in
    size and time (the sandbox may trickle or flood)."""
    deadline = time.monotonic() + seconds
    data = bytearray()
    while b"\r\n\r\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or len(data) > MAX_HEAD_BYTES:
            raise SandboxError("sandbox request failed: the tunnel's answer was too slow or large")
        sock.settimeout(remaining)
        chunk = sock.recv(4096)
        if not chunk:
            raise SandboxError("sandbox request failed: the tunnel closed before answering")
        data += chunk
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise SandboxError("sandbox request failed: the tunnel answered no HTTP status")
    return int(parts[1]), head, rest


def connect_endpoint(
    endpoint: str, connect_unix: Callable[[socket.socket, str], None], timeout: float
) -> tuple[socket.socket, str]:
    """A connected socket to sandboxd and the Host to send: the Unix socket (through the
    client's link-refusing connect) or the endpoint's TCP address."""
    parts = urlsplit(endpoint)
    if parts.scheme == "http+unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            connect_unix(sock, unquote(parts.netloc))
        except OSError:
            sock.close()
            raise
        return sock, "localhost"
    if parts.scheme != "http" or not parts.hostname:
        raise SandboxError(f"sandbox request failed: no tunnel over {parts.scheme}")
    port = parts.port or 80
    return socket.create_connection((parts.hostname, port), timeout=timeout), parts.netloc
