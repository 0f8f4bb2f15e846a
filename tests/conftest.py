"""Shared fixtures: one moto server per test run; per test, a fresh SQLite store (local mode)
and a fresh DynamoDB table on moto (AWS mode, and tests of the DynamoDB adapter)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer
from openagents.local.dynamodb import free_port, serialise_moto_dynamodb
from openagents.settings import Settings
from openagents.store import items

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OpenAgentsTest")


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    serialise_moto_dynamodb()  # as the one-machine runtime does
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def settings(moto_endpoint: str, tmp_path: Path) -> Settings:
    """Local-mode settings: the SQLite store in the test's home folder; AWS mode (the Lambda
    transport, ``store="dynamodb"``) gets a moto table of its own (tests never share state)."""
    table = f"t-{uuid.uuid4().hex[:12]}"
    current = Settings(
        home=tmp_path / "home",
        store="sqlite",
        table_name=table,
        dynamodb_endpoint=moto_endpoint,
        rate_limit_per_minute=1000,
        rate_limit_window_seconds=3600,
        provision_on_create=False,  # sandbox tests turn it on with a workflow runtime
    )
    items.bind(table, moto_endpoint, current.region)
    items.create_table()
    return current
