"""moto's server on 127.0.0.1 (Step Functions for the workflows, always), and — with
``OPENAGENTS_STORE=dynamodb`` — its DynamoDB with the table dumped under the state folder.
With the SQLite store, an old dump is imported once (``import_dump``)."""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from openagents.store import items

log = logging.getLogger(__name__)
DUMP_FILE = "dynamodb.json"
_serial = threading.RLock()


def serialise_moto_dynamodb() -> None:
    """moto's DynamoDB is not safe under concurrent requests: a cancelled transaction restores
    a copy of the whole table, losing what other requests wrote meanwhile. DynamoDB itself
    serialises conflicting writes, so on one machine moto answers one request at a time.
    Process-wide (it patches moto's handler class); idempotent."""
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.call_action, "openagents_serial", False):
        return
    original = DynamoHandler.call_action

    def one_at_a_time(self: Any) -> Any:
        with _serial:
            return original(self)

    one_at_a_time.openagents_serial = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = one_at_a_time  # type: ignore[method-assign]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LocalMoto:
    """Start/stop moto's server (Step Functions, Lambda, IAM; DynamoDB unused)."""

    def __init__(self, port: int | None = None) -> None:
        self._port = port or free_port()
        self._server: ThreadedMotoServer | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> None:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self._port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class LocalDynamo(LocalMoto):
    """moto with the table: created from the models, its items dumped and reloaded."""

    def __init__(self, home: Path, table_name: str, region: str, port: int | None = None) -> None:
        super().__init__(port)
        self._dump = home / DUMP_FILE
        self._table = table_name
        self._region = region
        self._lock = threading.Lock()

    def _client(self) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint,
            region_name=self._region,
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - moto accepts any credentials
        )

    def start(self) -> None:
        serialise_moto_dynamodb()
        super().start()
        items.bind(self._table, self.endpoint, self._region)
        items.create_table()
        self.load()

    def stop(self) -> None:
        if self._server is not None:
            self.dump()
        super().stop()

    def load(self) -> int:
        if not self._dump.exists():
            return 0
        rows = json.loads(self._dump.read_text())
        client = self._client()
        for start in range(0, len(rows), 25):
            requests = [{"PutRequest": {"Item": row}} for row in rows[start : start + 25]]
            pending: dict[str, Any] = {self._table: requests}
            while pending:
                pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems")
        log.info("loaded %d items from %s", len(rows), self._dump)
        return len(rows)

    def dump(self) -> int:
        """Write every item to the dump file atomically (temp file + rename)."""
        with self._lock:
            rows: list[dict[str, Any]] = []
            for page in self._client().get_paginator("scan").paginate(TableName=self._table):
                rows.extend(page["Items"])
            self._dump.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._dump.parent, prefix=".dump-")
            with os.fdopen(fd, "w") as handle:
                json.dump(rows, handle)
            os.replace(tmp, self._dump)
            return len(rows)


def import_dump(home: Path, database: Path) -> int:
    """Import ``<home>/dynamodb.json`` (left by the DynamoDB runtime) into the SQLite store at
    ``database`` once, then rename it ``dynamodb.json.imported``; 0 when there is none."""
    from openagents.store.sqlite_import import import_rows

    dump = home / DUMP_FILE
    if not dump.exists():
        return 0
    count = import_rows(json.loads(dump.read_text()), database)
    os.replace(dump, dump.with_name(DUMP_FILE + ".imported"))
    log.info("imported %d items from %s into %s", count, dump, database)
    return count
