"""Shared fixtures: one moto server per test run; per test, a fresh SQLite store (local mode)
and a fresh DynamoDB table on moto (AWS mode, and tests of the DynamoDB adapter).

The table is made only for the tests that may reach it: the unit tests never do, and the store's
own suites (``tests/contract``, ``tests/store_compat``) make one where a test is on DynamoDB
(``dynamodb_table``), so a test on SQLite or in memory pays for no moto table."""

from __future__ import annotations

import contextlib
import copy
import os
import threading
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


_botocore: list[Any] = []  # the run's one botocore session (its service models loaded once)
_clients: dict[tuple[str | None, str], Any] = {}  # the tests' own DynamoDB clients


def botocore_session() -> Any:
    """One botocore session for the whole run: a new one reloads the service models from JSON
    (most of what a first DynamoDB request costs), and PynamoDB opens one per connection and
    thread."""
    import botocore.session

    if not _botocore:
        _botocore.append(botocore.session.get_session())
    return _botocore[0]


@contextlib.contextmanager
def shared_clients() -> Iterator[None]:
    """While it lasts, the connections PynamoDB opens (one per model bound to a table, each
    making its own botocore client, several ms apiece) share one client per endpoint and
    options, made from the run's session. Each connection still hooks its own handler on it;
    the clients are dropped at the end (their handlers with them)."""
    session = botocore_session()
    create = session.create_client
    made: dict[str, Any] = {}
    lock = threading.Lock()

    def one_per_endpoint(*args: Any, **kwargs: Any) -> Any:
        config = kwargs.get("config")
        options = sorted(vars(config).get("_user_provided_options", {}).items()) if config else []
        key = repr((args, sorted((k, v) for k, v in kwargs.items() if k != "config"), options))
        with lock:
            if key not in made:
                made[key] = create(*args, **kwargs)
            return made[key]

    session.create_client = one_per_endpoint
    try:
        yield
    finally:
        del session.create_client


def dynamodb_client(endpoint: str | None, region: str) -> Any:
    """A plain DynamoDB client for what a test reads or writes itself (not the adapter's), one
    per endpoint for the run (a client costs several ms to make)."""
    import boto3

    key = (endpoint, region)
    if key not in _clients:
        _clients[key] = boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
    return _clients[key]


_table_requests: list[tuple[str, dict[str, Any]]] = []  # what making the first table sent


def dynamodb_table(settings: Settings) -> None:
    """Create the settings' table on moto (keys, indexes, TTL), as ``store.items`` defines it,
    and bind the item models to it. The run's first table is made by ``items.create_table``
    (describe, create, wait, TTL), its CreateTable and UpdateTimeToLive requests kept; a later
    table is made by sending those two again under its own name (moto's tables are active at
    once), on the run's botocore session."""
    import pynamodb.connection.base
    from botocore import xform_name
    from openagents.store import items

    items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)
    if _table_requests:
        client = dynamodb_client(settings.dynamodb_endpoint, settings.region)
        for operation, kwargs in _table_requests:
            getattr(client, xform_name(operation))(**{**kwargs, "TableName": settings.table_name})
        return
    base: Any = pynamodb.connection.base
    own_session, own_dispatch = base.get_session, base.Connection.dispatch
    sent: list[tuple[str, dict[str, Any]]] = []

    def dispatch(self: Any, operation: str, kwargs: dict[str, Any]) -> Any:
        if operation in ("CreateTable", "UpdateTimeToLive"):
            sent.append((operation, copy.deepcopy(kwargs)))
        return own_dispatch(self, operation, kwargs)

    base.get_session, base.Connection.dispatch = botocore_session, dispatch
    try:
        items.create_table()
    finally:
        base.get_session, base.Connection.dispatch = own_session, own_dispatch
    if [operation for operation, _ in sent] == ["CreateTable", "UpdateTimeToLive"]:
        _table_requests.extend(sent)


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
