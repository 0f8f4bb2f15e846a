"""Previews on one machine, against the local server with a real confined sandbox (moto's Step
Functions provision it):

- **dev-server to first byte**: from sending ``POST /api/sessions/{id}/dev-server`` for the
  Python fixture (a folder with an ``index.html``: detected as ``python3 -m http.server``) to
  the first byte of ``/`` through the preview (the link redeemed for its cookie on the way),
  over a few start/stop cycles;
- **the proxy's added latency**: the same small file fetched through the preview
  (``<port>-<session>.localhost``: cookie check, session lookup, sandboxd's tunnel over the
  unix socket, HTTP/1.1 relayed) against the baseline beside it, fetched by a client inside
  the sandbox straight from the server on 127.0.0.1. Goal: at most 2 ms added at p50. The
  server's own hop (``GET /api/health`` from the same client) is measured too: the share of the
  added time any reverse proxy in front of the sandbox would cost."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from bench.common import fresh_settings, moto_server, say, scratch, summary

PORT = 8000  # the static fixture's port (python_plan)
ALICE = "alice"
INSIDE = """
import time, urllib.request, json
t = []
for _ in range({n}):
    s = time.perf_counter()
    urllib.request.urlopen('http://127.0.0.1:{port}/x.txt').read()
    t.append(time.perf_counter() - s)
print(json.dumps(t))
"""


def _first_byte(client: Any, host: str, cookie: str) -> None:
    with client.stream("GET", "/", headers={"host": host, "cookie": cookie}) as answer:
        assert answer.status_code == 200, answer.status_code
        next(answer.iter_raw(1))


def run(args: Any) -> dict[str, Any]:
    import json

    import httpx
    import pytest
    from openagents.domain.identity import Identity
    from openagents.services.sessions import NewSession

    from tests.support import HttpApi, make_origin, provisioning_runtime, serve_app, wait_active

    samples = max(50, args.samples // 2)
    identity = Identity(user_id=ALICE, username=ALICE)
    with moto_server() as moto, scratch("previews") as home:
        settings = fresh_settings(moto.endpoint, home / "home", idle_timeout_seconds=3600)
        with (
            pytest.MonkeyPatch.context() as patch,
            provisioning_runtime(settings, moto.endpoint, patch) as live,
            serve_app(live) as (base_url, app),
        ):
            container = app.state.container()
            api = HttpApi(live, base_url)
            session, _ = container.sessions.create(
                identity, NewSession(repo_url=str(make_origin(home)))
            )
            wait_active(container, identity, session.id)

            def run_in(command: str) -> str:
                done = container.sandbox_tools.exec(
                    identity, session.id, command=command, timeout_seconds=120
                )
                assert done.exit_code == 0, done
                return str(done.stdout)

            run_in(
                "mkdir -p site && printf '<p>hello</p>' > site/index.html && printf x > site/x.txt"
            )
            route = f"/api/sessions/{session.id}/dev-server"
            client = httpx.Client(base_url=base_url, timeout=60)
            starts: list[float] = []
            host = cookie = ""
            for cycle in range(args.cycles):
                say(f"previews: dev-server cycle {cycle + 1} of {args.cycles}")
                began = time.perf_counter()
                made = api.post(route, {"path": "site"})
                assert made.status == 200, made.body
                link = urlsplit(made.body["url"])
                host = link.hostname or ""
                redeemed = client.get(f"{link.path}?{link.query}", headers={"host": host})
                assert redeemed.status_code == 302, redeemed.text
                cookie = redeemed.headers["set-cookie"].split(";", 1)[0]
                _first_byte(client, host, cookie)
                starts.append(time.perf_counter() - began)
                if cycle < args.cycles - 1:
                    assert api.delete(route).status == 200
            say(f"previews: {samples} requests through the preview and inside the sandbox")
            headers = {"host": host, "cookie": cookie}
            for _ in range(10):  # warm both paths
                client.get("/x.txt", headers=headers)
            through = []
            for _ in range(samples):
                began = time.perf_counter()
                assert client.get("/x.txt", headers=headers).content == b"x"
                through.append(time.perf_counter() - began)
            hop = []  # the same server's own hop: a request it answers itself
            for _ in range(samples):
                began = time.perf_counter()
                assert client.get("/api/health").status_code == 200
                hop.append(time.perf_counter() - began)
            inside = json.loads(
                run_in(f"python3 - <<'EOF'\n{INSIDE.format(n=samples, port=PORT)}\nEOF")
            )
            client.close()
            api.client.close()
    via, direct, server = summary(through), summary(inside[5:]), summary(hop)
    return {
        "devServerToFirstByteSeconds": {k: round(v, 3) for k, v in summary(starts).items()},
        "cycles": args.cycles,
        "throughPreviewMs": {k: round(v * 1000, 3) for k, v in via.items() if k != "n"},
        "insideSandboxMs": {k: round(v * 1000, 3) for k, v in direct.items() if k != "n"},
        "serverHopMs": {k: round(v * 1000, 3) for k, v in server.items() if k != "n"},
        "addedP50Ms": round((via["p50"] - direct["p50"]) * 1000, 3),
        "ratioP50": round(via["p50"] / direct["p50"], 2),
        "samples": samples,
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    start, via, direct = (
        result["devServerToFirstByteSeconds"],
        result["throughPreviewMs"],
        result["insideSandboxMs"],
    )
    return [
        [
            "previews: dev-server -> first byte",
            f"p50 {start['p50']:.2f} s",
            f"min {start['min']:.2f}, max {start['max']:.2f} s over {result['cycles']} cycles "
            "(Python fixture: http.server)",
        ],
        [
            "previews: added latency per request",
            f"p50 +{result['addedP50Ms']:.2f} ms",
            f"through the preview p50 {via['p50']:.2f} ms (p90 {via['p90']:.2f}) vs inside the "
            f"sandbox {direct['p50']:.2f} ms (x{result['ratioP50']}); {result['samples']} each; "
            "goal <= 2 ms",
        ],
        [
            "previews: the server's own hop",
            f"p50 {result['serverHopMs']['p50']:.2f} ms",
            "GET /api/health from the same client: what any hop through the local server costs",
        ],
    ]
