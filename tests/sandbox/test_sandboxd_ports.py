"""sandboxd's ports and tunnels, the real daemon (unconfined: it shares this test's network)
driven through SandboxClient: a listening socket is listed with its process, a tunnel carries
bytes both ways and passes a half-close on, and a port nothing listens on is refused first."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest
from openagents.sandbox.client import SandboxClient, SandboxRequestError

from tests.sandbox.conftest import RunningSandbox, raw_call


@pytest.fixture
def echo() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers what it got, upper-cased, once the client ends."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_a_listening_port_is_listed_with_its_process(client: SandboxClient, echo: int) -> None:
    found = {p.port: p for p in client.ports()}
    assert found[echo].address == "127.0.0.1"
    assert found[echo].pid == os.getpid()


def test_a_tunnel_carries_bytes_both_ways(client: SandboxClient, echo: int) -> None:
    tunnel = client.open_tunnel(echo)
    with tunnel:
        tunnel.sendall(b"hello " * 100_000)
        tunnel.shutdown(socket.SHUT_WR)  # passed on: the server answers once it sees the end
        answer = b""
        while chunk := tunnel.recv(65536):
            answer += chunk
    assert answer == b"HELLO " * 100_000


def test_a_port_nothing_listens_on_is_refused_before_the_upgrade(
    client: SandboxClient, sandbox: RunningSandbox
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        idle = probe.getsockname()[1]  # bound, never listening
        with pytest.raises(SandboxRequestError) as refused:
            client.open_tunnel(idle)
    assert (refused.value.status, refused.value.code) == (404, "port_not_listening")
    auth = {"Authorization": f"Bearer {sandbox.token}"}
    assert raw_call(sandbox.endpoint, "GET", f"/ports/{idle}/tunnel", headers=auth)[0] == 426
    assert raw_call(sandbox.endpoint, "GET", "/ports/0/tunnel", headers=auth)[0] == 400
