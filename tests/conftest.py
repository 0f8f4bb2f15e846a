"""Shared fixtures: one moto server per test run; per test, a fresh SQLite store (local mode)
and a fresh DynamoDB table on moto (AWS mode, and tests of the DynamoDB adapter).

The table is made only for the tests that may reach it: the unit tests never do, and the store's
own suites (``tests/contract``, ``tests/store_compat``) make one where a test is on DynamoDB
(``dynamodb_table``), so a test on SQLite or in memory pays for no moto table."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer
from openagents.local.dynamodb import free_port, serialise_moto_dynamodb
from openagents.settings import Settings

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OpenAgentsTest")

pytest_plugins = ["tests.sandbox_sweep"]  # sandboxes a test left running stop at the end

TESTS = Path(__file__).parent
OWN_TABLES = ("unit", "contract", "store_compat")  # folders that make their table themselves


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    serialise_moto_dynamodb()  # as the one-machine runtime does
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


_botocore: list[Any] = []  # one botocore session for creating tables (its models loaded once)


def dynamodb_table(settings: Settings) -> None:
    """Create the settings' table on moto (keys, indexes, TTL), as ``store.items`` defines it.
    The creating connections share one botocore session (a new one reloads the service models
    from JSON, about half the cost of a table)."""
    import botocore.session
    import pynamodb.connection.base
    from openagents.store import items

    base: Any = pynamodb.connection.base
    if not _botocore:
        _botocore.append(botocore.session.get_session())
    own = base.get_session
    base.get_session = lambda: _botocore[0]
    try:
        items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)
        items.create_table()
    finally:
        base.get_session = own


@pytest.fixture
def settings(request: pytest.FixtureRequest, moto_endpoint: str, tmp_path: Path) -> Settings:
    """Local-mode settings: the SQLite store in the test's home folder; AWS mode (the Lambda
    transport, ``store="dynamodb"``) gets a moto table of its own (tests never share state)."""
    current = Settings(
        home=tmp_path / "home",
        store="sqlite",
        table_name=f"t-{uuid.uuid4().hex[:12]}",
        dynamodb_endpoint=moto_endpoint,
        rate_limit_per_minute=1000,
        rate_limit_window_seconds=3600,
        provision_on_create=False,  # sandbox tests turn it on with a workflow runtime
    )
    folder = Path(str(request.node.path)).resolve().relative_to(TESTS).parts[0]
    if folder not in OWN_TABLES:
        dynamodb_table(current)
    return current
