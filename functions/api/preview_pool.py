"""Idle preview tunnels kept for the next request: opening one through sandboxd costs most of
what a preview adds to a request (a connect, the upgrade, sandboxd's connect inside the
sandbox), so an HTTP/1.1 exchange that ended cleanly with keep-alive leaves its tunnel here.

A tunnel is kept only for the very target it was opened for (``Key``: the session, the
sandbox's generation, the port, and whether a stranger of a public preview or the owner asked)
and never shared between two: a new generation, a sandbox that stops (its tunnels reach end of
file, or the session is found not running) or an idle time past ``IDLE_SECONDS`` on the pool's
clock closes it. While it waits it reads: any byte or end of file from the sandbox then closes
it at once (a server that speaks unasked is never heard by the next request). At most
``MAX_PER_SANDBOX`` wait per generation and ``MAX_TOTAL`` in all; more are closed."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

IDLE_SECONDS = 4.0  # under the usual keep-alive of dev servers (Node: 5 s), so theirs rarely wins
MAX_PER_SANDBOX = 6  # a browser's connections to one host
MAX_TOTAL = 256
READ_LIMIT = 256 << 10  # buffered from the sandbox before its reading is paused


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def bodiless(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """A request that carries no body (so it may be sent again, whole, from its head)."""
    for name, value in headers:
        name = name.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return False
    return True


def replayable(scope: Mapping[str, Any]) -> bool:
    """A safe request without a body: sent again on a new tunnel if a kept one was closed by
    the dev server before it answered, so the only kind a kept tunnel carries."""
    return scope["method"] in SAFE_METHODS and bodiless(scope["headers"])


class Key(NamedTuple):
    session_id: str
    generation: int
    port: int
    public: bool


class Tunnel(asyncio.Protocol):
    """One tunnel's bytes as an asyncio protocol: reads buffered (bounded, then paused), writes
    with the transport's flow control, and what happens while it waits in the pool seen."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._eof = False
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._paused = False
        self.on_idle_input: Callable[[Tunnel], None] | None = None  # set while pooled
        self.reused = False  # served a request before

    # -- the protocol's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._readable.set()
        if len(self._buffer) > READ_LIMIT and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._idle_input()

    def eof_received(self) -> bool:
        self._eof = True
        self._readable.set()
        self._idle_input()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._readable.set()
        self._writable.set()
        self._idle_input()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def _idle_input(self) -> None:
        if self.on_idle_input is not None:
            self.on_idle_input(self)

    # -- what the proxy uses
    @property
    def clean(self) -> bool:
        """Open, nothing unread, no end of file: fit to carry another request."""
        transport = self.transport
        return (
            transport is not None
            and not transport.is_closing()
            and not self._eof
            and not self._buffer
        )

    async def read(self, limit: int) -> bytes:
        """Up to ``limit`` bytes; ``b""`` at end of file."""
        while not self._buffer and not self._eof:
            self._readable.clear()
            await self._readable.wait()
        data = bytes(self._buffer[:limit])
        del self._buffer[:limit]
        if self._paused and len(self._buffer) <= READ_LIMIT // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    def write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the tunnel is closed")
        self.transport.write(data)

    async def drain(self) -> None:
        await self._writable.wait()
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the tunnel is closed")

    def close(self) -> None:
        self.on_idle_input = None
        if self.transport is not None:
            self.transport.close()


async def wrap(sock: socket.socket) -> Tunnel:
    """``sock`` (a tunnel sandboxd opened) under the running loop."""
    loop = asyncio.get_running_loop()
    _, tunnel = await loop.create_connection(Tunnel, sock=sock)
    return tunnel


class TunnelPool:
    """Idle tunnels by ``Key``, on one event loop (the server's). ``clock``: monotonic seconds,
    injectable; ``sweep`` closes the expired, and runs on every take and give and from a timer
    the pool sets on its loop while it holds any."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        idle_seconds: float = IDLE_SECONDS,
        per_sandbox: int = MAX_PER_SANDBOX,
        total: int = MAX_TOTAL,
        timer: bool = True,
    ) -> None:
        self._clock = clock
        self._idle = idle_seconds
        self._per_sandbox = per_sandbox
        self._total = total
        self._timer = timer
        self._handle: asyncio.TimerHandle | None = None
        # insertion order: the oldest first, across keys
        self._idle_since: OrderedDict[Tunnel, tuple[Key, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._idle_since)

    def idle(self, session_id: str | None = None) -> int:
        """How many wait (for one session, or in all)."""
        kept = list(self._idle_since.values())  # read from another thread too (tests)
        return sum(1 for key, _ in kept if session_id in (None, key[0]))

    def take(self, key: Key) -> Tunnel | None:
        """The most recently kept clean tunnel of ``key``, or None."""
        self.sweep()
        for tunnel in reversed(self._idle_since):
            if self._idle_since[tunnel][0] != key:
                continue
            del self._idle_since[tunnel]
            tunnel.on_idle_input = None
            if tunnel.clean:
                tunnel.reused = True
                return tunnel
            tunnel.close()
        return None

    def give(self, key: Key, tunnel: Tunnel) -> None:
        """Keep ``tunnel`` (it carried a whole exchange and may carry another) for ``key``."""
        self.sweep()
        if not tunnel.clean:
            tunnel.close()
            return
        stale = [t for t, (k, _) in self._idle_since.items() if k[0] == key[0] and k[1] != key[1]]
        for old in stale:  # a new generation: the old sandbox's are of no use
            self._discard(old)
        same = [t for t, (k, _) in self._idle_since.items() if k[:2] == key[:2]]
        if len(same) >= self._per_sandbox:
            self._discard(same[0])
        if len(self._idle_since) >= self._total:
            self._discard(next(iter(self._idle_since)))
        tunnel.on_idle_input = self._discard
        self._idle_since[tunnel] = (key, self._clock())
        self._arm()

    def drop(self, session_id: str) -> None:
        """Close the session's idle tunnels (its sandbox is not running)."""
        for tunnel in [t for t, (k, _) in self._idle_since.items() if k[0] == session_id]:
            self._discard(tunnel)

    def sweep(self) -> None:
        now = self._clock()
        expired = [t for t, (_, at) in self._idle_since.items() if now - at >= self._idle]
        for tunnel in expired:
            self._discard(tunnel)

    def close(self) -> None:
        for tunnel in list(self._idle_since):
            self._discard(tunnel)

    def _discard(self, tunnel: Tunnel) -> None:
        self._idle_since.pop(tunnel, None)
        tunnel.close()

    def _arm(self) -> None:
        if not self._timer or (self._handle is not None and not self._handle.cancelled()):
            return
        with contextlib.suppress(RuntimeError):  # no running loop: the next take sweeps
            loop = asyncio.get_running_loop()
            self._handle = loop.call_later(self._idle, self._tick)

    def _tick(self) -> None:
        self._handle = None
        self.sweep()
        if self._idle_since:
            self._arm()
