"""The load baseline: a one-route FastAPI app doing one SQLite read per request, served by
uvicorn as ``openagents dev`` serves the API (``uvicorn.run(app, host, port)``, one process,
a sync route in the thread pool), on a database configured like the SQLite store (WAL,
``synchronous=FULL``, one connection per thread, a busy timeout).

    python -m bench.sqlite_baseline --db PATH --port N [--rows 50]

creates ``PATH`` with ``--rows`` session-sized rows (ids ``s0`` .. ``s<rows-1>``) if it has no
table yet, and answers ``GET /status?sessionId=s0`` with the row's JSON (404 when missing),
``POST /messages?sessionId=s0`` by inserting the JSON body as one row (one committed write, the
open-loop phase's post baseline; 409 for an id already stored) and ``GET /health``. Nothing
else: no authentication, no validation, no app logging (uvicorn's access log stays on, as
under ``openagents dev``); the difference between this and ``GET /api/sandbox/status`` is the
API's own cost."""

from __future__ import annotations

import argparse
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

SCHEMA = "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, data TEXT NOT NULL)"
MESSAGES = (
    "CREATE TABLE IF NOT EXISTS messages"
    " (session TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (session, id))"
)
# About what a session row holds: ids, title, lifecycle times, snapshot.
ROW = {
    "userId": "load-0",
    "title": "load 0",
    "status": "running",
    "lifecycleState": "active",
    "lifecycleVersion": 3,
    "lastActivityAt": "2026-12-01T10:00:00.000000+00:00",
    "hibernateAfter": "2026-12-01T10:30:00.000000+00:00",
    "sandboxExpiresAt": None,
    "snapshot": None,
    "repoUrl": None,
    "branch": "main",
    "createdAt": "2026-12-01T09:00:00.000000+00:00",
    "updatedAt": "2026-12-01T10:00:00.000000+00:00",
}


def connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    return connection


def prepare(path: Path, rows: int) -> None:
    with connect(path) as connection:
        connection.execute(SCHEMA)
        connection.execute(MESSAGES)
        connection.executemany(
            "INSERT OR REPLACE INTO sessions (id, data) VALUES (?, ?)",
            [(f"s{i}", json.dumps({**ROW, "id": f"s{i}"})) for i in range(rows)],
        )
    connection.close()


def create_app(path: Path) -> Any:
    from fastapi import FastAPI, HTTPException, Query

    local = threading.local()
    app = FastAPI()

    def connection() -> sqlite3.Connection:
        found: sqlite3.Connection | None = getattr(local, "connection", None)
        if found is None:
            found = local.connection = connect(path)
        return found

    @app.get("/status")
    def status(session_id: str = Query(alias="sessionId")) -> dict[str, Any]:
        row = connection().execute("SELECT data FROM sessions WHERE id = ?", (session_id,))
        found = row.fetchone()
        if found is None:
            raise HTTPException(404, "not found")
        value: dict[str, Any] = json.loads(found[0])
        return value

    @app.post("/messages", status_code=201)
    def post(body: dict[str, Any], session_id: str = Query(alias="sessionId")) -> dict[str, bool]:
        message = body.get("message") or {}
        try:
            connection().execute(
                "INSERT INTO messages (session, id, data) VALUES (?, ?, ?)",
                (session_id, str(message.get("id")), json.dumps(message)),
            )
        except sqlite3.IntegrityError:
            raise HTTPException(409, "exists") from None
        return {"ok": True}

    @app.get("/health")
    def health() -> dict[str, bool]:
        return {"ok": True}

    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    cli = argparse.ArgumentParser(prog="python -m bench.sqlite_baseline")
    cli.add_argument("--db", type=Path, required=True)
    cli.add_argument("--port", type=int, required=True)
    cli.add_argument("--rows", type=int, default=50)
    args = cli.parse_args(argv)
    prepare(args.db, args.rows)
    uvicorn.run(create_app(args.db), host="127.0.0.1", port=args.port)  # its defaults, as dev


if __name__ == "__main__":
    main()
