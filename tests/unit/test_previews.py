"""Previews' pure parts: sandboxd's /proc/net/tcp parser, the client's validation of /ports,
the signed grants, the preview host names, the link's landing path and our cookie's removal."""

from __future__ import annotations

import pytest
from openagents.auth.previews import Grant, Kind, host_label, parse_label, sign, verify
from openagents.domain.errors import InvalidInput
from openagents.sandbox.errors import SandboxError
from openagents.sandbox.ports import ListeningPort, parse_ports
from openagents.services.previews import check_path

from functions.api.preview import foreign, preview_target
from functions.api.preview_http import request_headers, strip_cookie
from functions.api.preview_ws import handshake_headers
from sandbox.sandboxd.ports import Listener, parse_proc_net_tcp

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000 100 0 0 10 0
   2: 0100007F:223D 0100007F:A0B2 01 00000000:00000000 00:00000000 00000000  1000        0 4444 1 0000 100 0 0 10 0
   3: garbage
"""  # noqa: E501
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1538 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5151 1 0000 100 0 0 10 0
"""  # noqa: E501
KEY = b"k" * 32


def test_the_proc_net_tcp_parser_reads_listening_sockets_only() -> None:
    assert parse_proc_net_tcp(TCP, ipv6=False) == [
        Listener(8765, "127.0.0.1", 4242),
        Listener(8080, "0.0.0.0", 4343),  # noqa: S104
    ]
    assert parse_proc_net_tcp(TCP6, ipv6=True) == [Listener(5432, "::1", 5151)]
    assert parse_proc_net_tcp("header only\n", ipv6=False) == []


def test_the_clients_ports_are_validated_and_capped() -> None:
    answer = {
        "ports": [
            {"port": 3000, "address": "127.0.0.1", "pid": 7, "command": "node\x1b[31m vite"},
            {"port": 70000, "address": "127.0.0.1"},
            {"port": True, "address": "127.0.0.1"},
            {"port": 5173, "address": "not an address"},
            {"port": 8000, "address": "::1", "pid": -1, "command": "x" * 10_000},
            "junk",
        ]
        + [{"port": 1, "address": "127.0.0.1"}] * 1000
    }
    found = parse_ports(answer)
    assert found[0] == ListeningPort(3000, "127.0.0.1", 7, "node[31m vite")
    assert found[1].port == 8000
    assert found[1].pid is None
    assert len(found[1].command or "") == 200
    assert len(found) == 256
    with pytest.raises(SandboxError):
        parse_ports({"ports": "nope"})


def test_a_grant_verifies_only_with_its_key_kind_and_time() -> None:
    grant = Grant(Kind.LINK, "Sess_Id-1", 3000, "alice", expires_at=1000)
    token = sign(KEY, grant)
    assert verify(KEY, token, Kind.LINK, now=999) == grant
    assert verify(KEY, token, Kind.LINK, now=1000) is None  # expired
    assert verify(KEY, token, Kind.COOKIE, now=999) is None  # a link is no cookie
    assert verify(b"x" * 32, token, Kind.LINK, now=999) is None
    body, mac = token.split(".")
    assert verify(KEY, f"{body}x.{mac}", Kind.LINK, now=999) is None
    assert verify(KEY, "a" * 2000, Kind.LINK, now=0) is None


def test_preview_hosts_name_a_case_sensitive_session_in_lower_case() -> None:
    label = host_label("jPIOW_95A7gZLv4Efy6ie", 5173)
    assert label == label.lower()
    assert len(label) <= 63
    assert parse_label(label) == ("jPIOW_95A7gZLv4Efy6ie", 5173)
    for other in ("5173-abc", "0-" + label[5:], "99999-" + label[5:], "api", label + "x"):
        assert parse_label(other) is None


def scope(host: bytes) -> dict[str, object]:
    return {"type": "http", "headers": [(b"host", host)]}


def test_only_exact_preview_hosts_are_the_proxys() -> None:
    label = host_label("s1", 8765).encode()
    assert preview_target(scope(label + b".localhost:8000")) == ("s1", 8765)
    assert preview_target(scope(label + b".localhost")) == ("s1", 8765)
    for other in (b"localhost:8000", b"127.0.0.1", label + b".evil.localhost", b"x." + label):
        assert preview_target(scope(other)) is None
    assert preview_target(scope(label + b".example.com")) is None
    two = {"type": "http", "headers": [(b"host", label + b".localhost")] * 2}
    assert preview_target(two) is None


@pytest.mark.parametrize("path", ["//evil.example", "https://evil.example", "x", "/\\evil", "/a b"])
def test_a_link_lands_on_a_relative_path_only(path: str) -> None:
    with pytest.raises(InvalidInput):
        check_path(path)


def test_our_cookie_never_reaches_the_sandbox() -> None:
    assert (
        strip_cookie(b"a=1; openagents_preview=secret; b=2", b"openagents_preview") == b"a=1; b=2"
    )
    headers = request_headers(
        [(b"host", b"x.localhost"), (b"cookie", b"openagents_preview=s"), (b"connection", b"k")],
        b"localhost:3000",
        b"openagents_preview",
    )
    # nothing hop-by-hop of the browser's: HTTP/1.1 keep-alive to the dev server (preview_pool)
    assert headers == [(b"host", b"localhost:3000")]
    assert check_path(None) == "/"


def test_another_pages_requests_are_foreign() -> None:
    host = b"8765-abc.localhost:8000"

    def made(kind: str = "http", **headers: str) -> dict[str, object]:
        pairs = [(b"host", host)] + [
            (k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()
        ]
        return {"type": kind, "headers": pairs}

    assert not foreign(made())  # a navigation typed in, or an old browser
    assert not foreign(made(origin="http://8765-abc.localhost:8000"))
    assert not foreign(made(sec_fetch_site="same-site", sec_fetch_mode="navigate"))  # the iframe
    assert foreign(made(origin="http://9000-other.localhost:8000"))  # another preview
    assert foreign(made(origin="null"))
    assert foreign(made(sec_fetch_site="same-site", sec_fetch_mode="no-cors"))
    assert foreign(made("websocket"))  # a browser's WebSocket always names its page
    assert not foreign(made("websocket", origin="http://8765-abc.localhost:8000"))


def test_a_websocket_handshake_carries_no_cookie_of_ours() -> None:
    headers = handshake_headers(
        [
            (b"host", b"x"),
            (b"cookie", b"openagents_preview=s; theirs=1"),
            (b"origin", b"http://8765-abc.localhost:8000"),
            (b"sec-websocket-key", b"k"),
            (b"user-agent", b"ua"),
        ],
        b"openagents_preview",
        b"http://localhost:8765",
    )
    assert headers == [
        (b"origin", b"http://localhost:8765"),
        (b"user-agent", b"ua"),
        (b"cookie", b"theirs=1"),
    ]
