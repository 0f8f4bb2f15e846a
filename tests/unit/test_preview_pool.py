"""The preview proxy's kept tunnels (``functions/api/preview_pool.py``) and the HTTP/1.1
exchange that decides whether a tunnel is kept (``preview_http.forward``), against a stub dev
server on 127.0.0.1 behind the same tunnel interface (``Tunnel`` over a connected socket).

The stub is hostile on purpose: bytes past its answer, an answer without a length, garbage, a
connection it keeps open and never answers on, a kept connection it closes before answering.
No timer runs: the pool's clock is the test's, and every wait is on a condition."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from functions.api.preview_http import forward
from functions.api.preview_pool import Key, Tunnel, TunnelPool, replayable

KEY = Key("s1", 1, 3000, False)
CLOSE = b"close without a word"
HALF = b"#then half-close"
Answer = Callable[[bytes, int], Awaitable[bytes | None]]  # (request head, nth on its connection)


@dataclass
class Stub:
    """A dev server: ``answer`` says what to write for each request head (None: write nothing
    and keep the connection open); it records connections, heads, and ends of file seen."""

    answer: Answer
    port: int = 0
    connections: int = 0
    heads: list[bytes] = field(default_factory=list)
    closed_by_peer: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        nth = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                    self.heads.append(head)
                    self.changed.set()
                    await reader.readexactly(_length(head))
                except (asyncio.IncompleteReadError, ConnectionError):
                    self.closed_by_peer += 1
                    return
                nth += 1
                out = await self.answer(head, nth)
                if out is None:
                    if await reader.read(1) == b"":
                        self.closed_by_peer += 1
                    return
                if out == CLOSE:
                    writer.close()
                    return
                half = out.endswith(HALF)
                writer.write(out.removesuffix(HALF))
                await writer.drain()
                if half:  # its side ends, and it goes on reading: half-open
                    writer.write_eof()
                if out.endswith(b"#close"):
                    writer.close()
                    return
        finally:
            self.changed.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self.changed.clear()
            await self.changed.wait()


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class Client:
    """One ASGI request's receive and send: its body in pieces, then (when told) it leaves."""

    def __init__(
        self,
        method: str = "GET",
        body: list[bytes] | None = None,
        leave: bool = False,
        path: str = "/x",
    ) -> None:
        self.method, self.path = method, path
        self.pieces = list(body or [])
        self.sized = sum(len(p) for p in self.pieces)
        self.leave_now = leave
        self.left = asyncio.Event()
        self.sent: list[dict[str, Any]] = []

    @property
    def scope(self) -> dict[str, Any]:
        headers = [(b"host", b"3000-s1.localhost")]
        if self.pieces:
            headers.append((b"content-length", str(self.sized + 100).encode()))
        return {"type": "http", "method": self.method, "path": self.path,
                "raw_path": self.path.encode(),
                "query_string": b"", "headers": headers}  # fmt: skip

    async def receive(self) -> dict[str, Any]:
        if self.pieces:
            return {"type": "http.request", "body": self.pieces.pop(0), "more_body": True}
        if self.leave_now:
            return {"type": "http.disconnect"}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(dict(message))

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


async def _tunnel(stub: Stub) -> Tunnel:
    loop = asyncio.get_running_loop()
    _, tunnel = await loop.create_connection(Tunnel, "127.0.0.1", stub.port)
    return tunnel


async def _exchange(stub: Stub, pool: TunnelPool, client: Client, key: Key = KEY) -> bool:
    """What the proxy does: a kept tunnel for a replayable request, else a new one; forward;
    whether it was kept."""
    tunnel = pool.take(key) if replayable(client.scope) else None
    if tunnel is None:
        tunnel = await _tunnel(stub)
    return await forward(
        client.scope,
        client.receive,
        client.send,
        tunnel,
        b"localhost:3000",
        b"openagents_preview",
        lambda: _tunnel(stub),
        lambda kept: pool.give(key, kept),
    )


def run(answer: Answer, body: Callable[[Stub, TunnelPool], Awaitable[None]]) -> None:
    async def main() -> None:
        stub = Stub(answer)
        server = await asyncio.start_server(stub.serve, "127.0.0.1", 0)
        stub.port = server.sockets[0].getsockname()[1]
        pool = TunnelPool(clock=lambda: 0.0, timer=False)
        try:
            await body(stub, pool)
        finally:
            pool.close()
            for writer in stub.writers:
                writer.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


async def answer_n(head: bytes, nth: int) -> bytes:
    return ok(b"answer %d" % nth)


def test_a_whole_keep_alive_exchange_keeps_its_tunnel_for_the_next_request() -> None:
    async def body(stub: Stub, pool: TunnelPool) -> None:
        for n in (1, 2, 3):
            client = Client()
            assert await _exchange(stub, pool, client)
            assert (client.status, client.body) == (200, b"answer %d" % n)
        assert stub.connections == 1
        assert pool.idle("s1") == 1
        assert b"connection: close" not in stub.heads[0].lower()  # keep-alive asked

    run(answer_n, body)


def test_a_kept_tunnel_serves_its_own_target_only() -> None:
    async def body(stub: Stub, pool: TunnelPool) -> None:
        await _exchange(stub, pool, Client())
        for other in (Key("s2", 1, 3000, False), Key("s1", 1, 3001, False),
                      Key("s1", 1, 3000, True)):  # fmt: skip
            assert pool.take(other) is None
        assert pool.idle() == 1
        # the sandbox's next generation: its tunnels never meet the old one's
        await _exchange(stub, pool, Client(), Key("s1", 2, 3000, False))
        assert stub.connections == 2
        assert pool.take(KEY) is None
        assert pool.idle("s1") == 1
        pool.drop("s1")  # the sandbox stopped or hibernated
        assert pool.idle() == 0
        await stub.until(lambda: stub.closed_by_peer == 2)

    run(answer_n, body)


def test_an_idle_tunnel_is_closed_on_the_pools_clock_and_the_pool_is_bounded() -> None:
    now = [0.0]

    async def body(stub: Stub, _: TunnelPool) -> None:
        pool = TunnelPool(clock=lambda: now[0], idle_seconds=4.0, per_sandbox=2, timer=False)
        tunnels = [await _tunnel(stub) for _ in range(3)]
        for tunnel in tunnels:
            pool.give(KEY, tunnel)
        assert pool.idle() == 2  # the oldest closed
        await stub.until(lambda: stub.closed_by_peer == 1)
        now[0] = 3.9
        pool.sweep()
        assert pool.idle() == 2
        now[0] = 4.0
        pool.sweep()
        assert pool.idle() == 0
        await stub.until(lambda: stub.closed_by_peer == 3)

    run(answer_n, body)


def test_bytes_past_an_answer_never_reach_the_next_request() -> None:
    smuggled = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL"
    answered = [0]

    async def answer(head: bytes, nth: int) -> bytes:
        answered[0] += 1
        if answered[0] == 1:
            return ok(b"first") + smuggled  # in the same write
        return ok(b"fresh %d" % nth)

    async def body(stub: Stub, pool: TunnelPool) -> None:
        first = Client()
        assert await _exchange(stub, pool, first) is False  # not kept
        assert first.body == b"first"
        second = Client()
        await _exchange(stub, pool, second)
        assert second.body == b"fresh 1"  # a new connection, its own answer
        assert stub.connections == 2
        # bytes the server writes later, while the tunnel waits: it is closed at once
        assert pool.idle() == 1
        stub.writers[-1].write(smuggled)
        await stub.until(lambda: stub.closed_by_peer == 2)
        assert pool.idle() == 0
        third = Client()
        await _exchange(stub, pool, third)
        assert third.body == b"fresh 1"
        assert b"EVIL" not in first.body + second.body + third.body

    run(answer, body)


def test_a_tunnel_the_server_half_closes_after_its_answer_is_let_go() -> None:
    async def answer(head: bytes, nth: int) -> bytes:
        return ok(b"then silence") + HALF

    async def body(stub: Stub, pool: TunnelPool) -> None:
        client = Client()
        await _exchange(stub, pool, client)
        assert client.body == b"then silence"
        await stub.until(lambda: stub.closed_by_peer == 1)  # we closed our side too
        assert pool.idle() == 0
        again = Client()
        await _exchange(stub, pool, again)
        assert again.body == b"then silence"
        assert stub.connections == 2

    run(answer, body)


def test_an_answer_without_a_length_is_read_to_its_end_and_its_tunnel_closed() -> None:
    async def answer(head: bytes, nth: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\n\r\nno length#close"

    async def body(stub: Stub, pool: TunnelPool) -> None:
        client = Client()
        assert await _exchange(stub, pool, client) is False
        assert (client.status, client.body) == (200, b"no length#close")
        assert pool.idle() == 0

    run(answer, body)


def test_garbage_or_an_http_1_0_answer_is_never_kept() -> None:
    async def answer(head: bytes, nth: int) -> bytes:
        if head.startswith(b"GET /garbage "):
            return b"garbage\r\n\r\n"
        return b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async def body(stub: Stub, pool: TunnelPool) -> None:
        garbage, old = Client(path="/garbage"), Client(path="/old")
        assert await _exchange(stub, pool, garbage) is False
        assert garbage.status == 502
        assert await _exchange(stub, pool, old) is False
        assert (old.status, old.body) == (200, b"ok")
        assert pool.idle() == 0
        await stub.until(lambda: stub.closed_by_peer == 2)

    run(answer, body)


def test_a_body_the_client_abandons_closes_the_tunnel() -> None:
    async def answer(head: bytes, nth: int) -> bytes:
        return ok(b"served")

    async def body(stub: Stub, pool: TunnelPool) -> None:
        client = Client(method="POST", body=[b"a" * 10], leave=True)  # 110 announced, 10 sent
        assert await _exchange(stub, pool, client) is False
        assert pool.idle() == 0
        await stub.until(lambda: stub.closed_by_peer == 1)  # the server saw the body cut
        # a new request has its own tunnel and its own answer
        client = Client()
        assert await _exchange(stub, pool, client)
        assert client.body == b"served"
        assert stub.connections == 2

    run(answer, body)


def test_a_server_that_never_answers_is_let_go_when_its_client_leaves() -> None:
    async def answer(head: bytes, nth: int) -> bytes | None:
        return None  # reads the request, keeps the connection open, says nothing

    async def body(stub: Stub, pool: TunnelPool) -> None:
        client = Client()
        pending = asyncio.create_task(_exchange(stub, pool, client))
        await stub.until(lambda: len(stub.heads) == 1)
        client.left.set()
        assert await pending is False
        await stub.until(lambda: stub.closed_by_peer == 1)  # the proxy let go of it
        assert client.sent == []
        assert pool.idle() == 0

    run(answer, body)


def test_a_kept_tunnel_closed_before_answering_is_replaced_for_a_safe_request() -> None:
    async def answer(head: bytes, nth: int) -> bytes | None:
        if nth == 2:  # its keep-alive ran out just as the request came
            return CLOSE
        return ok(b"served")

    async def body(stub: Stub, pool: TunnelPool) -> None:
        await _exchange(stub, pool, Client())
        client = Client()
        assert await _exchange(stub, pool, client)
        assert (client.status, client.body) == (200, b"served")
        assert stub.connections == 2

    run(answer, body)


def test_only_safe_bodiless_requests_ride_a_kept_tunnel() -> None:
    base = {"type": "http", "headers": [(b"host", b"h")]}
    assert replayable({**base, "method": "GET"})
    assert not replayable({**base, "method": "POST"})
    sized = {**base, "method": "GET", "headers": [(b"content-length", b"3")]}
    assert not replayable(sized)
    assert not replayable({**base, "method": "GET", "headers": [(b"transfer-encoding", b"x")]})
