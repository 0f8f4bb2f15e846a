"""Start sandboxd: ``python3 -P -m sandboxd --workspace DIR (--host H --port N | --unix PATH)``."""

from __future__ import annotations

import sys

# sandboxd connects nowhere: ssl stays out (http.client imports it when it can; ~1 MiB each)
sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]

import argparse  # noqa: E402 - after the ssl block
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
from pathlib import Path  # noqa: E402
from types import FrameType  # noqa: E402

from .app import App  # noqa: E402
from .errors import JsonObject  # noqa: E402
from .http import SandboxServer, UnixSandboxServer  # noqa: E402
from .log import log  # noqa: E402
from .routes import find_route  # noqa: E402
from .workspace import Workspace  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="sandboxd: the daemon inside a sandbox")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--unix", default=None, help="listen on this Unix socket instead")
    parser.add_argument("--label", default=None, help="what this sandbox serves (seen in ps)")
    parser.add_argument(
        "--token-stdin",
        action="store_true",
        help="read the token from the first line of stdin (it never sits in /proc/*/environ)",
    )
    parser.add_argument("--workspace", required=True, type=Path)
    return parser.parse_args(argv)


def stop_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = os.environ.pop("SANDBOXD_TOKEN", "")  # children never inherit it
    if args.token_stdin:
        token = sys.stdin.readline().strip()
        sys.stdin.close()
    if not token:
        log("error", "startup.failed", reason="SANDBOXD_TOKEN is required")
        return 2
    args.workspace.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(Path(os.path.realpath(args.workspace)))
    app = App(workspace, hashlib.sha256(token.encode()).digest())
    server: SandboxServer | UnixSandboxServer
    if args.unix:
        server = UnixSandboxServer(args.unix, app, find_route)
        ready: JsonObject = {"ready": True, "socket": args.unix}
    else:
        server = SandboxServer((args.host, args.port), app, find_route)
        ready = {"ready": True, "port": server.server_address[1]}
    signal.signal(signal.SIGTERM, stop_on_signal)
    print(json.dumps(ready), flush=True)
    log(
        "info",
        "listening",
        **{k: v for k, v in ready.items() if k != "ready"},
        workspace=str(workspace.root),
    )
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        log("info", "stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
