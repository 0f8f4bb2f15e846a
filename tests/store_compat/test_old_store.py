"""A store written before issue 23's reshaping (``v5/``, made by ``written.py`` with the code
of that time) is read by today's code exactly as that code read it back."""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import boto3
import pytest

from tests.store_compat.written import HERE, _stores, observe


def _expected(kind: str) -> object:
    return json.loads((HERE / "expected.json").read_text())[kind]


def test_an_old_sqlite_database_reads_the_same(tmp_path: Path) -> None:
    root = tmp_path / "sqlite"
    root.mkdir()
    db = sqlite3.connect(root / "openagents.db")
    db.executescript((HERE / "sqlite.sql").read_text())
    db.close()
    shutil.copytree(HERE / "artifacts" / "sqlite", root / "artifacts")
    store, runs = _stores("sqlite", root, None, "")
    assert observe(store, runs) == _expected("sqlite")


def test_an_old_dynamodb_table_reads_the_same(tmp_path: Path, moto_endpoint: str) -> None:
    table = f"old-{uuid.uuid4().hex[:12]}"
    root = tmp_path / "dynamodb"
    root.mkdir()
    shutil.copytree(HERE / "artifacts" / "dynamodb", root / "artifacts")
    store, runs = _stores("dynamodb", root, moto_endpoint, table)  # creates the empty table
    client = boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name="us-east-1")
    for item in json.loads((HERE / "dynamodb.json").read_text()):
        client.put_item(TableName=table, Item=item)
    assert observe(store, runs) == _expected("dynamodb")


@pytest.mark.parametrize("kind", ["sqlite", "dynamodb"])
def test_the_fixture_holds_every_kind_of_item(kind: str) -> None:
    expected = _expected(kind)
    assert isinstance(expected, dict)
    assert expected["run_events"]
    assert expected["shared"]
    assert expected["active"][0] == "r2"
    assert len(list((HERE / "artifacts" / kind).rglob("*.json"))) == 1  # a body out of line
