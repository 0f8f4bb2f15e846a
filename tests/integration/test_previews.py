"""Previews end to end in a real confined sandbox: a server started inside (loopback-bound) is
listed by /ports and reached through the preview proxy on ``<port>-<session>.localhost`` with
the owner's cookie; without it the proxy answers 401 and the sandbox never sees the request."""

from __future__ import annotations

import hashlib
import socket
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from openagents.composition import Container
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState
from openagents.sandbox.port import ExecResult
from openagents.services import dev_servers
from openagents.services.sessions import NewSession
from openagents.settings import Settings
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from functions.api.preview import COOKIE
from tests.support import HttpApi, make_origin, provisioning_runtime, serve_app, wait_active

ALICE = Identity(user_id="alice", username="alice")
PORT = 8765
BIG_BYTES = 50_000_000
SERVE = (
    f"cd /tmp/site && setsid nohup python3 -m http.server {PORT} --bind 127.0.0.1 "
    ">/tmp/h.log 2>&1 < /dev/null &"
)


class Live:
    def __init__(
        self, base: str, api: HttpApi, container: Container, session_id: str, app: Any = None
    ) -> None:
        self.base, self.api, self.container, self.session_id = base, api, container, session_id
        self.app = app
        self.client = httpx.Client(base_url=base, timeout=60)

    def run(self, command: str) -> ExecResult:
        result = self.container.sandbox_tools.exec(
            ALICE, self.session_id, command=command, timeout_seconds=60
        )
        assert result.exit_code == 0, result
        return result

    def host(self, port: int = PORT) -> str:
        return self.container.previews.site.host(self.session_id, port).split(":")[0]

    def preview(self, path: str, cookie: str | None, port: int = PORT) -> httpx.Response:
        headers = {"host": self.host(port)}
        if cookie is not None:
            headers["cookie"] = f"other=1; {COOKIE}={cookie}"
        return self.client.get(path, headers=headers)

    def cookie(self, user: str = "alice", port: int = PORT) -> str:
        made = self.api.post(
            f"/api/sessions/{self.session_id}/ports/{port}/preview", {"path": "/a.txt"}, user=user
        )
        assert made.status == 200, made.body
        url = urlsplit(made.body["url"])
        assert url.hostname == self.host(port)
        assert url.path == "/__preview/auth"
        redeemed = self.client.get(
            f"{url.path}?{url.query}", headers={"host": self.host(port)}, follow_redirects=False
        )
        assert redeemed.status_code == 302, redeemed.text
        assert redeemed.headers["location"] == parse_qs(url.query)["path"][0] == "/a.txt"
        set_cookie = redeemed.headers["set-cookie"]
        assert "HttpOnly" in set_cookie
        assert "SameSite=Lax" in set_cookie
        assert "domain" not in set_cookie.lower()
        return set_cookie.split(";", 1)[0].split("=", 1)[1]

    def access_log(self) -> str:
        return str(self.run("cat /tmp/h.log").stdout)


def wait_listed(live: Live, port: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = live.api.get(f"/api/sessions/{live.session_id}/ports")
        assert listed.status == 200, listed.body
        found = [p for p in listed.body["ports"] if p["port"] == port]
        if found:
            return dict(found[0])
        time.sleep(0.1)
    raise AssertionError(f"port {port} never listed")


@pytest.fixture
def live(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Live]:
    with (
        provisioning_runtime(settings, moto_endpoint, monkeypatch) as running,
        serve_app(running) as (base, app),
    ):
        container: Container = app.state.container()
        origin = str(make_origin(tmp_path))
        session, _ = container.sessions.create(ALICE, NewSession(repo_url=origin))
        wait_active(container, ALICE, session.id)
        yield Live(base, HttpApi(running, base), container, session.id, app)


def test_a_sandbox_server_is_previewed_only_with_its_owners_cookie(live: Live) -> None:
    live.run(f"mkdir -p /tmp/site && printf 'hello preview' > /tmp/site/a.txt && {SERVE}")
    listed = wait_listed(live, PORT)
    assert listed["address"] == "127.0.0.1"
    assert "http.server" in (listed.get("command") or "")
    assert listed["previewHost"].startswith(f"{PORT}-")

    # without a cookie (or with a forged one): 401, and the server never saw a request
    assert live.preview("/a.txt", None).status_code == 401
    assert live.preview("/a.txt", "forged.token").status_code == 401
    assert "a.txt" not in live.access_log()

    # another user: 404 for the link; the owner's link for another port: refused
    assert (
        live.api.post(
            f"/api/sessions/{live.session_id}/ports/{PORT}/preview", {}, user="bob"
        ).status
        == 404
    )
    assert live.api.get(f"/api/sessions/{live.session_id}/ports", user="bob").status == 404
    nothing = live.api.post(f"/api/sessions/{live.session_id}/ports/9/preview", {})
    assert (nothing.status, nothing.body["code"]) == (404, "port_not_listening")
    bad = live.api.post(f"/api/sessions/{live.session_id}/ports/70000/preview", {})
    assert (bad.status, bad.body["field"]) == (422, "port")

    cookie = live.cookie()
    before = live.container.sessions.get(ALICE, live.session_id).last_activity_at
    fetched = live.preview("/a.txt", cookie)
    assert fetched.status_code == 200, fetched.text
    after = live.container.sessions.get(ALICE, live.session_id).last_activity_at
    assert after is not None
    assert before is None or after > before  # a preview in use keeps its sandbox awake
    assert fetched.content == b"hello preview"
    assert live.preview("/a.txt", cookie, port=PORT + 1).status_code == 401  # host-bound
    logged = live.access_log()
    assert "GET /a.txt" in logged

    # what reached the sandbox: the Host the dev server expects, and none of our cookie
    live.run(
        "cat > /tmp/echo.py <<'EOF'\n"
        "import http.server\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        body = str(self.headers).encode()\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers(); self.wfile.write(body)\n"
        "http.server.HTTPServer(('127.0.0.1', 8766), H).serve_forever()\n"
        "EOF\n"
        "setsid nohup python3 /tmp/echo.py >/dev/null 2>&1 < /dev/null &"
    )
    wait_listed(live, PORT + 1)
    seen = live.preview("/", live.cookie(port=PORT + 1), port=PORT + 1).text.lower()
    assert "host: localhost:8766" in seen
    assert COOKIE not in seen
    assert "other=1" in seen


def test_a_large_download_streams_without_growing_the_proxys_memory(live: Live) -> None:
    live.run(
        f"mkdir -p /tmp/site && head -c {BIG_BYTES} /dev/urandom > /tmp/site/big.bin && "
        "sha256sum /tmp/site/big.bin > /tmp/site/big.sum && " + SERVE
    )
    wait_listed(live, PORT)
    expected = live.run("cut -d' ' -f1 /tmp/site/big.sum").stdout.strip()
    cookie = live.cookie()
    headers = {"host": live.host(), "cookie": f"{COOKIE}={cookie}"}
    digest, received = hashlib.sha256(), 0
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        started = time.monotonic()
        with live.client.stream("GET", "/big.bin", headers=headers) as response:
            assert response.status_code == 200
            for chunk in response.iter_raw(1 << 16):
                digest.update(chunk)
                received += len(chunk)
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received == BIG_BYTES
    assert digest.hexdigest() == expected
    grown = peak - base
    print(
        f"\n50 MB through the preview: {elapsed:.2f} s, peak traced growth {grown / 2**20:.2f} MiB"
    )
    assert grown < 8 << 20, f"the proxy held {grown} bytes"

    # latency: the same small file through the preview, against fetching it inside the sandbox
    live.run("printf 'x' > /tmp/site/x.txt")
    times = []
    for _ in range(50):
        started = time.perf_counter()
        assert live.client.get("/x.txt", headers=headers).content == b"x"
        times.append(time.perf_counter() - started)
    inside = live.run(
        "python3 - <<'EOF'\n"
        "import time, urllib.request, statistics\n"
        "t = []\n"
        "for _ in range(50):\n"
        "    s = time.perf_counter()\n"
        f"    urllib.request.urlopen('http://127.0.0.1:{PORT}/x.txt').read()\n"
        "    t.append(time.perf_counter() - s)\n"
        "print(statistics.median(t))\n"
        "EOF"
    ).stdout
    print(
        f"p50 through the preview {statistics.median(times) * 1000:.2f} ms, "
        f"inside the sandbox {float(inside) * 1000:.2f} ms"
    )


# a WebSocket echo server with the standard library only: the handshake, then each text frame
# (client frames are masked) answered unmasked, upper-cased; a close answered with a close
WS_ECHO = """
import asyncio, base64, hashlib, struct
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
async def serve(reader, writer):
    head = await reader.readuntil(b"\\r\\n\\r\\n")
    lines = head.split(b"\\r\\n")
    key = [l.split(b":", 1)[1].strip() for l in lines if l.lower().startswith(b"sec-websocket-key")]
    accept = base64.b64encode(hashlib.sha1(key[0] + GUID).digest())
    writer.write(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n"
                 b"Connection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + b"\\r\\n\\r\\n")
    while True:
        b1, b2 = await reader.readexactly(2)
        size = b2 & 127
        if size == 126: size = struct.unpack(">H", await reader.readexactly(2))[0]
        elif size == 127: size = struct.unpack(">Q", await reader.readexactly(8))[0]
        mask = await reader.readexactly(4)
        data = bytes(c ^ mask[i % 4] for i, c in enumerate(await reader.readexactly(size)))
        if b1 & 15 == 8:
            writer.write(b"\\x88\\x02" + data[:2]); await writer.drain(); writer.close(); return
        out = data.upper()
        n = len(out)
        if n < 126: head = bytes([0x81, n])
        elif n < 65536: head = bytes([0x81, 126]) + struct.pack(">H", n)
        else: head = bytes([0x81, 127]) + struct.pack(">Q", n)
        writer.write(head + out); await writer.drain()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 8767)
    await server.serve_forever()
asyncio.run(main())
"""


def ws_events(sock: socket.socket, ws: WSConnection) -> list[object]:
    data = sock.recv(65536)
    ws.receive_data(data or None)
    events: list[object] = list(ws.events())
    if not data:  # the peer closed: fail, never spin on recv
        raise AssertionError(f"the WebSocket's connection closed: {events}")
    return events


def ws_connect(
    live: Live, cookie: str | None, origin: str | None
) -> tuple[socket.socket, WSConnection, object]:
    base = urlsplit(live.base)
    sock = socket.create_connection((base.hostname or "", base.port or 80), timeout=30)
    ws = WSConnection(ConnectionType.CLIENT)
    host = f"{live.host(8767)}:{base.port}"
    headers = [(b"cookie", f"{COOKIE}={cookie}".encode())] if cookie else []
    if origin:
        headers.append((b"origin", origin.replace("HOST", host).encode()))
    sock.sendall(ws.send(Request(host=host, target="/hmr?x=1", extra_headers=headers)))
    while True:
        for event in ws_events(sock, ws):
            if isinstance(event, AcceptConnection | RejectConnection):
                return sock, ws, event


def test_a_websocket_is_relayed_to_the_sandbox_with_the_cookie_only(live: Live) -> None:
    live.run(
        f"cat > /tmp/ws.py <<'EOF'\n{WS_ECHO}\nEOF\n"
        "setsid nohup python3 /tmp/ws.py >/tmp/ws.log 2>&1 < /dev/null &"
    )
    wait_listed(live, 8767)
    cookie = live.cookie(port=8767)
    for refused in ((None, "http://HOST"), (cookie, "http://evil.localhost:8000"), (cookie, None)):
        sock, _, answer = ws_connect(live, *refused)
        sock.close()
        assert isinstance(answer, RejectConnection), refused
    sock, ws, answer = ws_connect(live, cookie, "http://HOST")
    assert isinstance(answer, AcceptConnection)
    with sock:
        started = time.perf_counter()
        for text in ("hello", "x" * 70_000):
            sock.sendall(ws.send(Message(data=text)))
            got = ""
            while len(got) < len(text):
                for event in ws_events(sock, ws):
                    if isinstance(event, Ping):
                        continue
                    assert isinstance(event, TextMessage), event
                    got += event.data
            assert got == text.upper()
        print(f"\nWebSocket round trips: {(time.perf_counter() - started) * 1000:.1f} ms")
        sock.sendall(ws.send(CloseConnection(code=1000)))
        closing = ws_events(sock, ws)  # the close frame back (a closed connection fails)
        assert isinstance(closing[0], CloseConnection), closing
        assert closing[0].code == 1000, closing


def wait_state(live: Live, state: LifecycleState) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        current = live.container.sessions.get(ALICE, live.session_id).lifecycle_state
        assert current is not LifecycleState.FAILED
        if current is state:
            return
        time.sleep(0.1)
    raise AssertionError(f"never {state}")


def test_a_hibernated_preview_says_so_and_answers_again_after_resume(live: Live) -> None:
    serve_workspace = f"cd site && {SERVE.split('&& ', 1)[1]}"  # /tmp does not survive a pause
    live.run(f"mkdir -p site && printf 'kept' > site/a.txt && {serve_workspace}")
    wait_listed(live, PORT)
    cookie = live.cookie()
    assert live.preview("/a.txt", cookie).content == b"kept"

    assert live.api.post("/api/sandbox/snapshot", {"sessionId": live.session_id}).status < 300
    wait_state(live, LifecycleState.HIBERNATED)
    page = live.client.get(
        "/a.txt",
        headers={"host": live.host(), "cookie": f"{COOKIE}={cookie}", "accept": "text/html"},
    )
    assert page.status_code == 409
    assert f"/sessions/{live.session_id}" in page.text
    assert "Resume" in page.text
    refused = live.api.post(f"/api/sessions/{live.session_id}/ports/{PORT}/preview", {})
    assert (refused.status, refused.body["code"]) == (409, "sandbox_not_running")

    assert live.api.put("/api/sandbox/snapshot", {"sessionId": live.session_id}).status < 300
    wait_state(live, LifecycleState.ACTIVE)
    # the workspace came back; the server is started again (dev servers do not come back yet)
    live.run(serve_workspace)
    wait_listed(live, PORT)
    assert live.preview("/a.txt", cookie).content == b"kept"  # the same cookie, the same URL


SERVER_JS = (
    "require('http').createServer((q, s) => s.end('from node ' + process.env.PORT))"
    ".listen(Number(process.env.PORT), process.env.HOST)"
)


def test_a_dev_server_is_detected_launched_previewed_and_stopped(live: Live) -> None:
    live.run(
        "mkdir -p app/node_modules empty && cd app && "
        """printf '{"scripts": {"dev": "node server.js"}}' > package.json && """
        f"cat > server.js <<'EOF'\n{SERVER_JS}\nEOF"
    )
    route = f"/api/sessions/{live.session_id}/dev-server"
    started = time.monotonic()
    made = live.api.post(route, {"path": "app"})
    assert made.status == 200, made.body
    print(f"\ndev-server to listening: {(time.monotonic() - started) * 1000:.0f} ms")
    assert made.body["port"] == 3000
    assert made.body["command"] == "npm run dev"
    assert made.body["framework"] == "node"
    url = urlsplit(made.body["url"])
    host = url.hostname or ""
    redeemed = live.client.get(f"{url.path}?{url.query}", headers={"host": host})
    assert redeemed.status_code == 302
    cookie = redeemed.headers["set-cookie"].split(";", 1)[0]
    page = live.client.get("/", headers={"host": host, "cookie": cookie})
    assert page.text == "from node 3000"

    # pause and resume: the dev server comes back by itself, on the same preview URL
    assert live.api.post("/api/sandbox/snapshot", {"sessionId": live.session_id}).status < 300
    wait_state(live, LifecycleState.HIBERNATED)
    assert live.api.put("/api/sandbox/snapshot", {"sessionId": live.session_id}).status < 300
    wait_state(live, LifecycleState.ACTIVE)
    wait_listed(live, 3000)
    page = live.client.get("/", headers={"host": host, "cookie": cookie})
    assert page.text == "from node 3000"

    again = live.api.post(route, {"path": "app"})
    assert (again.status, again.body["code"]) == (409, "port_in_use")
    nothing = live.api.post(route, {"path": "empty"})
    assert (nothing.status, nothing.body["code"]) == (400, "no_dev_server_found")
    assert live.api.get(route).body["running"] is True
    assert live.api.get(route, user="bob").status == 404

    stopped = live.api.delete(route)
    assert stopped.status == 200, stopped.body
    assert stopped.body["running"] is False
    ports = live.api.get(f"/api/sessions/{live.session_id}/ports").body["ports"]
    assert 3000 not in [p["port"] for p in ports]
    assert live.api.get(route).status == 404

    # the editor: code-server is not installed here, and the answer says how to get it
    editor = live.api.post(f"/api/sessions/{live.session_id}/code-editor", {})
    assert (editor.status, editor.body["code"]) == (400, "code_server_missing")
    assert "npm install -g code-server" in editor.body["error"]
    assert live.api.get(f"/api/sessions/{live.session_id}/code-editor").status == 404


def test_a_dev_server_slower_than_a_request_is_answered_starting_then_reported(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST answers 202 ``starting`` when the port does not listen within the bound (here 0:
    at once); GET says ``starting`` while its process lives, then ``running``; one that exits
    first is ``exited`` with its log's tail."""
    monkeypatch.setattr(dev_servers, "RESPOND_SECONDS", 0.0)
    live.run("mkdir -p slow && printf 'slow but here' > slow/index.html")
    route = f"/api/sessions/{live.session_id}/dev-server"
    gated = "while [ ! -f go ]; do sleep 0.05; done; exec python3 -m http.server $PORT --bind $HOST"
    made = live.api.post(route, {"path": "slow", "command": gated, "port": 8790})
    assert made.status == 202, made.body
    assert (made.body["status"], made.body["running"], made.body["url"]) == (
        "starting",
        False,
        None,
    )
    assert live.api.get(route).body["status"] == "starting"
    assert live.api.get(route, user="bob").status == 404

    live.run("touch slow/go")
    wait_listed(live, 8790)
    assert live.api.get(route).body["status"] == "running"
    host = live.host(8790)
    link = live.api.post(f"/api/sessions/{live.session_id}/ports/8790/preview", {})
    assert link.status == 200, link.body
    url = urlsplit(link.body["url"])
    redeemed = live.client.get(f"{url.path}?{url.query}", headers={"host": host})
    cookie = redeemed.headers["set-cookie"].split(";", 1)[0]
    assert live.client.get("/", headers={"host": host, "cookie": cookie}).text == "slow but here"
    assert live.api.delete(route).body["status"] == "stopped"

    failing = "while [ ! -f stop ]; do sleep 0.05; done; echo 'no such framework' >&2; exit 3"
    made = live.api.post(route, {"path": "slow", "command": failing, "port": 8791})
    assert (made.status, made.body["status"]) == (202, "starting")
    live.run("touch slow/stop")
    deadline = time.monotonic() + 30
    while (got := live.api.get(route).body)["status"] == "starting":
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    assert got["status"] == "exited"
    assert "no such framework" in got["logTail"]


VITE_PACKAGE = """{"name": "fixture", "private": true, "type": "module",
 "scripts": {"dev": "vite"}, "devDependencies": {"vite": "6.4.6"}}"""
VITE_INDEX = '<!doctype html><div id="app"></div><script type="module" src="/main.js"></script>'


def _vite_socket(live: Live, cookie: str, token: str) -> tuple[socket.socket, WSConnection]:
    base = urlsplit(live.base)
    sock = socket.create_connection((base.hostname or "", base.port or 80), timeout=60)
    ws = WSConnection(ConnectionType.CLIENT)
    host = f"{live.host(5173)}:{base.port}"
    request = Request(
        host=host,
        target=f"/?token={token}",
        subprotocols=["vite-hmr"],
        extra_headers=[
            (b"cookie", f"{COOKIE}={cookie}".encode()),
            (b"origin", f"http://{host}".encode()),
        ],
    )
    sock.sendall(ws.send(request))
    while True:
        for event in ws_events(sock, ws):
            assert not isinstance(event, RejectConnection), event
            if isinstance(event, AcceptConnection):
                assert event.subprotocol == "vite-hmr"
                return sock, ws


def _vite_message(sock: socket.socket, ws: WSConnection) -> dict[str, Any]:
    import json

    text = ""
    while True:
        for event in ws_events(sock, ws):
            if isinstance(event, TextMessage):
                text += event.data
                if event.message_finished:
                    message: dict[str, Any] = json.loads(text)
                    if message.get("type") != "ping":
                        return message
                    text = ""


def test_a_vite_project_is_installed_launched_and_hot_reloads_through_the_preview(
    live: Live,
) -> None:
    """Vite from the npm registry, installed in the sandbox by dev-server itself (detached:
    202 and polled when slower than the request's bound), its page previewed, and its
    hot-reload WebSocket connected through the preview: an edit reaches the browser's socket.
    Under the default memory setting: V8's ~10 GiB address-space reservation is not memory,
    and the sandbox's cgroup, not a per-process address-space limit, caps memory."""
    live.run(
        f"mkdir -p web && cd web && printf '%s' '{VITE_PACKAGE}' > package.json && "
        f"printf '%s' '{VITE_INDEX}' > index.html && "
        'printf \'document.getElementById("app").textContent = "one"\\n\' > main.js'
    )
    route = f"/api/sessions/{live.session_id}/dev-server"
    started = time.monotonic()
    made = live.api.post(route, {"path": "web"})
    assert made.status in (200, 202), made.body
    assert made.body["framework"] == "vite"
    assert made.body["port"] == 5173
    deadline = time.monotonic() + 600
    while (status := live.api.get(route).body)["status"] == "starting":
        assert time.monotonic() < deadline, status
        time.sleep(0.25)
    assert status["status"] == "running", status
    print(
        f"\nvite: dev-server to running (npm install included): {time.monotonic() - started:.1f} s"
    )

    cookie = live.cookie(port=5173)
    page = live.preview("/", cookie, port=5173)
    assert page.status_code == 200, page.text
    assert "/@vite/client" in page.text
    client = live.preview("/@vite/client", cookie, port=5173).text
    token = client.split("const wsToken = ", 1)[1].split(";", 1)[0].strip().strip("\"'")
    sock, ws = _vite_socket(live, cookie, token)
    with sock:
        try:
            assert _vite_message(sock, ws)["type"] == "connected"
        except AssertionError as error:  # with what Vite said
            raise AssertionError(f"{error}; the dev server: {live.api.get(route).body}") from None
        # the page's modules are loaded (so Vite knows them), then one is edited
        assert live.preview("/main.js", cookie, port=5173).status_code == 200
        live.run(
            'cd web && printf \'document.getElementById("app").textContent = "two"\\n\' > main.js'
        )
        message = _vite_message(sock, ws)
        assert message["type"] in ("update", "full-reload"), message
    assert "two" in live.preview("/main.js", cookie, port=5173).text


# a hostile dev server (stdlib asyncio): each connection numbered, every request and every end of
# a connection logged; what it answers depends on the path
HOSTILE = """
import asyncio
LOG = open("/tmp/hostile.log", "a", buffering=1)
seen = 0
def ok(body): return b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(body), body)
EVIL = b"HTTP/1.1 200 OK\\r\\nContent-Length: 4\\r\\n\\r\\nEVIL"
async def serve(reader, writer):
    global seen
    seen += 1
    n = seen
    try:
        while True:
            head = await reader.readuntil(b"\\r\\n\\r\\n")
            path = head.split(b" ")[1].decode()
            LOG.write(f"request {n} {path}\\n")
            if path == "/keep":
                writer.write(ok(b"connection %d" % n))
            elif path == "/smuggle":
                writer.write(ok(b"first") + EVIL)
            elif path == "/nolength":
                writer.write(b"HTTP/1.1 200 OK\\r\\n\\r\\nread to the end"); await writer.drain()
                writer.close(); return
            elif path == "/garbage":
                writer.write(b"garbage\\r\\n\\r\\n")
            elif path == "/hang":
                await reader.read(1)  # keeps the connection half-open, never answers
                return
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        LOG.write(f"closed {n}\\n")
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 8768)
    await server.serve_forever()
asyncio.run(main())
"""


def wait_idle(pool: Any, session_id: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while pool.idle(session_id) != count:
        assert time.monotonic() < deadline, f"{pool.idle(session_id)} kept, not {count}"
        time.sleep(0.01)


def wait_logged(live: Live, ending: str) -> str:
    """The connection number of the first log line ending with ``ending``, once logged."""
    deadline = time.monotonic() + 60
    while True:
        for line in live.run("cat /tmp/hostile.log").stdout.splitlines():
            if line.endswith(ending):
                return str(line.split()[1])
        assert time.monotonic() < deadline, f"never logged: {ending}"
        time.sleep(0.05)


def test_a_hostile_dev_server_never_wedges_the_proxy_nor_leaks_into_another_answer(
    live: Live,
) -> None:
    """Tunnels are kept between requests (one connection for many), and whatever the dev
    server does — bytes past its answer, an answer without a length, garbage, a request held
    without an answer — ends that tunnel only: the next request gets its own answer, and a
    stopped sandbox's kept tunnels are closed."""
    pool = live.app.state.preview_tunnels
    live.run(
        f"cat > /tmp/hostile.py <<'EOF'\n{HOSTILE}\nEOF\n"
        "setsid nohup python3 /tmp/hostile.py >/tmp/hostile.err 2>&1 < /dev/null &"
    )
    wait_listed(live, 8768)
    cookie = live.cookie(port=8768)

    def get(path: str) -> httpx.Response:
        return live.preview(path, cookie, port=8768)

    kept = {get("/keep").text for _ in range(5)}
    assert len(kept) == 1, kept  # one tunnel, one connection to the dev server, five requests
    wait_idle(pool, live.session_id, 1)  # handed back on the server's loop

    first = get("/smuggle")
    assert first.content == b"first"
    after = get("/keep")
    assert after.text.startswith("connection ")
    assert after.text not in kept  # a new tunnel
    assert b"EVIL" not in after.content

    nolength = get("/nolength")
    assert (nolength.status_code, nolength.content) == (200, b"read to the end")
    assert get("/garbage").status_code == 502
    assert get("/keep").text.startswith("connection ")

    # a request the server holds without answering: the proxy lets go when its client leaves
    base = urlsplit(live.base)
    held = socket.create_connection((base.hostname or "", base.port or 80))
    held.sendall(
        f"GET /hang HTTP/1.1\r\nHost: {live.host(8768)}\r\n"
        f"Cookie: {COOKIE}={cookie}\r\n\r\n".encode()
    )
    hung = wait_logged(live, "/hang")
    assert get("/keep").status_code == 200  # meanwhile: not wedged
    held.close()
    wait_logged(live, f"closed {hung}")  # the tunnel it held was closed
    assert get("/keep").status_code == 200

    # the sandbox stops: its kept tunnels end with it
    wait_idle(pool, live.session_id, 1)
    assert live.api.post("/api/sandbox/snapshot", {"sessionId": live.session_id}).status < 300
    wait_state(live, LifecycleState.HIBERNATED)
    wait_idle(pool, live.session_id, 0)
