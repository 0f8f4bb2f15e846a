"""Public previews end to end in a real confined sandbox: a link that works without the owner's
cookie until revoked, listed for the owner only, carrying nothing of the owner's into the
sandbox; revoked, its link and cookie are refused before the sandbox is contacted."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from functions.api.preview import COOKIE
from tests.integration.test_previews import PORT, SERVE, Live, live, wait_listed

__all__ = ["live"]  # the fixture

ECHO_PORT = PORT + 1
ECHO = (
    "cat > /tmp/echo.py <<'EOF'\n"
    "import http.server\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = str(self.headers).encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    f"http.server.HTTPServer(('127.0.0.1', {ECHO_PORT}), H).serve_forever()\n"
    "EOF\n"
    "setsid nohup python3 /tmp/echo.py >/dev/null 2>&1 < /dev/null &"
)


def visit(live: Live, url: str) -> tuple[httpx.Response, str | None]:
    """A stranger opens the link: no token of ours, no cookie but what the link sets."""
    parts = urlsplit(url)
    stranger = httpx.Client(base_url=live.base, timeout=60)
    answered = stranger.get(f"{parts.path}?{parts.query}", headers={"host": parts.hostname or ""})
    cookie = answered.headers.get("set-cookie")
    return answered, None if cookie is None else cookie.split(";", 1)[0].split("=", 1)[1]


def test_a_public_preview_answers_strangers_until_it_is_revoked(live: Live) -> None:
    live.run(f"mkdir -p /tmp/site && printf 'hello public' > /tmp/site/a.txt && {SERVE}")
    live.run(ECHO)
    wait_listed(live, PORT)
    wait_listed(live, ECHO_PORT)
    base = f"/api/sessions/{live.session_id}"

    # refusals: another user's session, a bad visibility, nothing listening; nothing written
    bob = live.api.post(f"{base}/ports/{PORT}/preview", {"visibility": "public"}, user="bob")
    assert bob.status == 404
    bad = live.api.post(f"{base}/ports/{PORT}/preview", {"visibility": "everyone"})
    assert (bad.status, bad.body["field"]) == (422, "visibility")
    idle = live.api.post(f"{base}/ports/9/preview", {"visibility": "public"})
    assert (idle.status, idle.body["code"]) == (404, "port_not_listening")
    assert live.api.get(f"{base}/previews").body == {"previews": []}

    made = live.api.post(f"{base}/ports/{PORT}/preview", {"visibility": "public", "path": "/a.txt"})
    assert made.status == 200, made.body
    assert (made.body["visibility"], made.body["expiresAt"]) == ("public", None)
    again = live.api.post(f"{base}/ports/{PORT}/preview", {"visibility": "public"})
    assert (
        urlsplit(again.body["url"]).query.split("&")[0]
        == (urlsplit(made.body["url"]).query.split("&")[0])
    )  # the same link's token, asked twice
    listed = live.api.get(f"{base}/previews")
    assert [p["port"] for p in listed.body["previews"]] == [PORT]
    assert live.api.get(f"{base}/previews", user="bob").status == 404

    # a stranger: the link sets its cookie and lands; the cookie alone serves the port
    landed, cookie = visit(live, made.body["url"])
    assert landed.status_code == 302, landed.text
    assert landed.headers["location"] == "/a.txt"
    assert cookie is not None
    fetched = live.preview("/a.txt", cookie)
    assert (fetched.status_code, fetched.content) == (200, b"hello public")

    # nothing of the owner's reaches the sandbox: no cookie of ours, no bearer token
    echo = live.api.post(f"{base}/ports/{ECHO_PORT}/preview", {"visibility": "public"})
    _, echo_cookie = visit(live, echo.body["url"])
    assert echo_cookie is not None
    seen = live.preview("/", echo_cookie, port=ECHO_PORT).text.lower()
    assert "host: localhost:8766" in seen
    assert COOKIE not in seen
    assert "authorization" not in seen
    assert echo_cookie.lower() not in seen

    # another user cannot revoke it; the owner can, once
    assert live.api.delete(f"{base}/ports/{PORT}/preview", user="bob").status == 404
    assert live.preview("/a.txt", cookie).status_code == 200
    revoked = live.api.delete(f"{base}/ports/{PORT}/preview")
    assert revoked.status == 204, revoked.body
    twice = live.api.delete(f"{base}/ports/{PORT}/preview")
    assert (twice.status, twice.body["code"], twice.body["field"]) == (
        404,
        "preview_not_found",
        "port",
    )
    served = live.access_log().count("GET /a.txt")
    assert live.preview("/a.txt", cookie).status_code == 401
    assert visit(live, made.body["url"])[0].status_code == 401
    assert live.access_log().count("GET /a.txt") == served  # the sandbox never saw them
    assert [p["port"] for p in live.api.get(f"{base}/previews").body["previews"]] == [ECHO_PORT]
