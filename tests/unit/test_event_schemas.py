"""The event catalog is complete, every event matches its model and its JSON Schema, and
docs/events/ holds the schemas generated from the models (`openagents event-schemas`)."""

from __future__ import annotations

import ast
import importlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openagents.domain.models import AuditEntry
from openagents.events import ENVELOPE_FIELDS, VERSION, from_entry
from openagents.events.catalog import DETAIL_TYPES, validate
from openagents.events.local import envelope
from openagents.events.schemas import documents, file_name
from openagents.local.rules import matches
from openagents.workflows import catalog
from pydantic import ValidationError

from functions.archiver.handler import session_id_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "core" / "openagents"
SERVICES = PACKAGE / "services"
SCHEMAS = ROOT / "docs" / "events"
AT = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

# jsonschema ships no type information (a dependency of moto/schemathesis, not declared here)
jsonschema: Any = importlib.import_module("jsonschema")

KIND = re.compile(r"^[a-z]+\.[a-z_]+$")
# the calls that build audit entries: AuditEntry(type=…) and the services' helpers
ENTRY_CALLS = {"AuditEntry", "_entry", "_move"}


def schema_of(detail_type: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / file_name(detail_type)).read_text())
    return loaded


# ------------------------------------------------------------ catalog completeness


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _kinds_in(node: ast.AST, assigned: dict[str, list[ast.expr]]) -> set[str]:
    """Dotted string constants in an argument, following local names to their assignments
    (``kind = "a" if … else "b"``); a dict (the entry's detail) is not a kind."""
    if isinstance(node, ast.Dict):
        return set()
    if isinstance(node, ast.Constant):
        text = node.value
        return {text} if isinstance(text, str) and KIND.match(text) else set()
    found: set[str] = set()
    if isinstance(node, ast.Name):
        for value in assigned.get(node.id, []):
            found |= _kinds_in(value, {})
    for child in ast.iter_child_nodes(node):
        found |= _kinds_in(child, assigned)
    return found


def kinds_written(source: str) -> set[str]:
    found: set[str] = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        assigned: dict[str, list[ast.expr]] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and _callee(node) in ENTRY_CALLS:
                for argument in [*node.args, *(k.value for k in node.keywords)]:
                    found |= _kinds_in(argument, assigned)
    return found


def audit_kinds() -> dict[str, set[str]]:
    """Every audit entry type written in the package, by file: the arguments of the entry
    builders, plus any ``session.*``/``sandbox.*`` literal in the services."""
    kinds: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "events" in path.relative_to(PACKAGE).parts:
            continue
        source = path.read_text()
        found = kinds_written(source)
        if path.parent == SERVICES:
            found |= set(re.findall(r"[\"']((?:session|sandbox)\.[a-z_]+)[\"']", source))
        for kind in found:
            kinds.setdefault(kind, set()).add(str(path.relative_to(ROOT)))
    return kinds


def test_the_scanner_finds_kinds_through_helpers_and_variables() -> None:
    source = """
def a(self):
    kind = "x.one" if self.flag else "x.two"
    entry = self._entry(session.id, kind, {"to": "active"})
    AuditEntry(id="1", type="x.three", detail={"field": "not.a_kind_arg"})
    self._move(session, ACTIVE, {}, "x.four", None)
    other("x.ignored")
"""
    assert kinds_written(source) == {"x.one", "x.two", "x.three", "x.four"}


def test_every_audit_entry_type_written_is_catalogued() -> None:
    written = audit_kinds()
    missing = {kind: sorted(files) for kind, files in written.items() if kind not in DETAIL_TYPES}
    assert not missing, f"add these audit entry types to events.catalog.EventDetail: {missing}"
    # the scan really sees the services (a broken scanner would pass the check above)
    assert {"session.archived", "sandbox.hibernated", "sandbox.active"} <= set(written)


def test_every_catalogued_type_is_written_somewhere() -> None:
    assert set(DETAIL_TYPES) - set(audit_kinds()) == set()


def test_detail_types_are_unique() -> None:
    assert len(set(DETAIL_TYPES.values())) == len(DETAIL_TYPES)


# ------------------------------------------------------------------- schema files


def test_the_schema_files_are_the_ones_generated_from_the_models() -> None:
    generated = documents()
    assert {file_name(detail_type) for detail_type in DETAIL_TYPES.values()} == set(generated)
    present = {path.name: path.read_text() for path in SCHEMAS.iterdir()}
    assert present == generated, "docs/events/ is stale: run `.venv/bin/openagents event-schemas`"


@pytest.mark.parametrize(("kind", "detail_type"), sorted(DETAIL_TYPES.items()))
def test_a_schema_is_valid_2020_12_and_names_its_event(kind: str, detail_type: str) -> None:
    schema = schema_of(detail_type)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == detail_type
    assert schema["properties"]["detail-type"] == {"const": detail_type}
    detail = schema["properties"]["detail"]
    assert set(ENVELOPE_FIELDS) <= set(detail["required"])
    assert detail["properties"]["name"]["const"] == detail_type
    assert detail["properties"]["type"]["const"] == kind
    assert detail["properties"]["version"]["const"] == VERSION
    assert set(detail["required"]) <= set(detail["properties"])
    assert "additionalProperties" not in detail  # additive changes keep version 1


# ------------------------------------------------- events validate against schemas

LIFE = {"from": "active", "to": "hibernating", "generation": 2}
ENTRIES: dict[str, list[dict[str, Any]]] = {
    "session.created": [{"title": "Task"}],
    "session.renamed": [{"title": "Task v2"}],
    "session.settings_changed": [{"askBeforeBash": True}, {"askBeforeBash": False}],
    "session.pr_merged": [{"prNumber": 7, "prStatus": "merged", "method": "squash"}],
    "session.pr_closed": [{"prNumber": 7, "prStatus": "closed"}],
    "session.repository_attached": [
        {
            "repoUrl": "https://github.com/acme/app.git",
            "repoOwner": "acme",
            "repoName": "app",
            "branch": "as/0123abcd",
            "commit": "a" * 40,
            "created": True,
        },
        {
            "repoUrl": "file:///srv/repos/app.git",
            "repoName": "app",
            "branch": "as/0123abcd",
            "commit": "b" * 40,
            "created": False,
        },
    ],
    "git.committed": [
        {"commit": "a" * 40, "subject": "feat: x", "branch": "agent/x", "generated": True}
    ],
    "git.discarded": [
        {
            "restoredCount": 1,
            "removedCount": 1,
            "restored": ["a.txt"],
            "removed": ["b.txt"],
            "saved": {"ref": "refs/openagents/checkpoints/discard-1", "commit": "c", "files": 2},
        }
    ],
    "git.pushed": [{"branch": "agent/x", "commit": "a" * 40, "base": "main"}],
    "git.pr_opened": [{"prNumber": 7, "prUrl": "https://github.com/a/b/pull/7", "title": "T"}],
    "session.archived": [
        {
            "generation": 2,
            "from": "hibernated",
            "to": "archived",
            "finalize": True,
            "prStatus": "merged",
        },
        {"generation": 0, "from": "failed", "to": "archived", "finalize": False, "prStatus": None},
        {},  # SessionService without the archive flow
    ],
    "session.archive_finalized": [
        {"generation": 2, "bundle": "bundles/s1/2.bundle"},
        {"generation": 2, "bundle": None},
    ],
    "session.archive_failed": [
        {"generation": 2, "error": "Archive finalization failed: the sandbox stopped"}
    ],
    "session.unarchived": [
        {
            "generation": 2,
            "from": "archived",
            "to": "provisioning",
            "fromBundle": "bundles/s1/2.bundle",
        },
        {"generation": 2, "from": "archived", "to": "active", "fromBundle": None},
        {},
    ],
    "sandbox.starting": [{"generation": 3}],
    "sandbox.active": [{"generation": 1, "from": "provisioning", "to": "active"}],
    "sandbox.failed": [
        {"error": "Provisioning failed: boom", "to": "failed"},
        {"error": "Restore failed: boom", "to": "hibernated"},
    ],
    "sandbox.retry": [{}],
    "sandbox.hibernating": [LIFE],
    "sandbox.hibernated": [
        {
            "from": "hibernating",
            "to": "hibernated",
            "generation": 2,
            "snapshotBytes": 18231,
            "snapshotId": "snap-1",
        }
    ],
    "sandbox.snapshot_failed": [{"from": "hibernating", "to": "active", "generation": 2}],
    "sandbox.hibernate_aborted": [{"from": "hibernating", "to": "active", "generation": 2}],
    "sandbox.hibernate_failed": [{"from": "hibernating", "to": "active", "generation": 2}],
    "sandbox.pause_requested": [{"from": "active", "to": "active", "generation": 2}],
    "sandbox.restoring": [{"from": "hibernated", "to": "restoring", "generation": 2}],
    "sandbox.resumed": [{"generation": 3, "from": "restoring", "to": "active"}],
    "sandbox.extended": [{"from": "active", "to": "active", "generation": 2, "seconds": 3600}],
    "sandbox.waiting": [{"generation": 1, "reason": "RunTask: ThrottlingException"}],
    "sandbox.lost": [
        {
            "from": "active",
            "to": "hibernated",
            "generation": 2,
            "reason": "the sandbox is unreachable",
        },
        {
            "from": "provisioning",
            "to": "failed",
            "generation": 1,
            "reason": "the runtime restarted",
        },
    ],
    "sandbox.run_rescued": [{"staleRun": "lifecycle-1-abc", "state": "hibernating"}],
    "agent.turn_started": [{"runId": "r1", "chatId": "c1", "modelId": "scripted/default"}],
    "agent.turn_finished": [
        {
            "runId": "r1",
            "chatId": "c1",
            "modelId": "scripted/default",
            "status": "completed",
            "steps": 4,
            "usage": {
                "inputTokens": 10,
                "outputTokens": 5,
                "cacheReadTokens": 0,
                "cacheWriteTokens": 0,
            },
        },
        {
            "runId": "r2",
            "chatId": "c1",
            "modelId": "scripted/default",
            "status": "failed",
            "steps": 1,
            "usage": {
                "inputTokens": 0,
                "outputTokens": 0,
                "cacheReadTokens": 0,
                "cacheWriteTokens": 0,
            },
            "error": "scripted model has no response for step 1",
        },
    ],
    "agent.turn_reverted": [
        {
            "runId": "r1",
            "chatId": "c1",
            "revertId": "v1",
            "checkpoint": {"ref": "refs/openagents/checkpoints/r1", "commit": "a" * 40, "files": 3},
            "saved": {
                "ref": "refs/openagents/checkpoints/revert-v1",
                "commit": "b" * 40,
                "files": 4,
            },
            "restoredCount": 2,
            "removedCount": 1,
            "restored": ["calc.py", "docs/old.txt"],
            "removed": ["new.py"],
            "revertedRuns": ["r2", "r1"],
        }
    ],
    "sandbox.auto_commit": [
        {"skipped": "auto-commit is off"},
        {"skipped": "detached HEAD"},
        {
            "branch": "feature",
            "base": "main",
            "committed": True,
            "commit": "abc123",
            "pushed": True,
            "prNumber": 7,
            "prUrl": "https://github.com/o/r/pull/7",
        },
        {
            "branch": "feature",
            "base": "main",
            "committed": False,
            "pushed": False,
            "skipped": "push failed: denied",
            "pr": "skipped: no git host or default branch",
        },
    ],
}
CASES = [(kind, detail) for kind, details in sorted(ENTRIES.items()) for detail in details]


def test_every_catalogued_type_has_representative_entries() -> None:
    assert set(ENTRIES) == set(DETAIL_TYPES)


def received(kind: str, detail: dict[str, Any]) -> dict[str, Any]:
    """The event as a rule target receives it, through the one-machine bus's envelope."""
    entry = AuditEntry(id="e1", session_id="s1", at=AT, type=kind, detail=detail)
    event: dict[str, Any] = json.loads(json.dumps(envelope(from_entry(entry, "alice"))))
    return event


@pytest.mark.parametrize(("kind", "detail"), CASES)
def test_an_event_validates_against_its_schema(kind: str, detail: dict[str, Any]) -> None:
    event = received(kind, detail)
    schema = schema_of(DETAIL_TYPES[kind])
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(event)]
    assert errors == []
    # its model reads it (no field missing, mistyped or undocumented)
    assert validate(event["detail"]).type == kind


def test_a_schema_rejects_a_wrong_version_and_a_missing_field() -> None:
    event = received("sandbox.hibernated", ENTRIES["sandbox.hibernated"][0])
    validator = jsonschema.Draft202012Validator(schema_of("Sandbox Hibernated"))
    assert validator.is_valid(event)
    assert not validator.is_valid({**event, "detail": {**event["detail"], "version": 2}})
    without = {k: v for k, v in event["detail"].items() if k != "snapshotId"}
    assert not validator.is_valid({**event, "detail": without})


# The samples a schema refuses: a wrong value, a value out of range, a missing field.
REJECTED: list[tuple[str, dict[str, Any]]] = [
    ("sandbox.failed", {"error": "boom", "to": "active"}),
    ("sandbox.active", {"generation": 1, "from": "provisioning", "to": "failed"}),
    ("sandbox.waiting", {"generation": 1, "reason": "x" * 501}),
    ("sandbox.extended", {"from": "active", "to": "active", "generation": 2, "seconds": 0}),
    ("sandbox.auto_commit", {"prNumber": 0}),
    ("sandbox.hibernating", {"from": "active", "to": "hibernating", "generation": -1}),
    ("session.archived", {"prStatus": "draft"}),
    ("session.renamed", {"title": "t", "titleSource": "user"}),
    ("session.pr_merged", {"prNumber": 7, "prStatus": "merged", "method": "fast-forward"}),
    ("session.unarchived", {"from": "active"}),
    ("session.archive_finalized", {"bundle": None}),
    ("git.committed", {"commit": "", "subject": "s", "generated": False}),
    ("git.discarded", {"restoredCount": 0, "removedCount": 0, "saved": {"ref": "r"}}),
    ("agent.turn_finished", {**ENTRIES["agent.turn_finished"][0], "status": "running"}),
    (
        "agent.turn_reverted",
        {**ENTRIES["agent.turn_reverted"][0], "restored": ["a.txt"] * 101},
    ),
    (
        "agent.turn_reverted",
        {
            **ENTRIES["agent.turn_reverted"][0],
            "saved": {"ref": "refs/heads/main", "commit": "b" * 40, "files": 1},
        },
    ),
]


@pytest.mark.parametrize(("kind", "detail"), REJECTED)
def test_a_schema_and_its_model_reject_a_sample_outside_the_contract(
    kind: str, detail: dict[str, Any]
) -> None:
    event = received(kind, detail)
    assert not jsonschema.Draft202012Validator(schema_of(DETAIL_TYPES[kind])).is_valid(event)
    with pytest.raises(ValidationError):
        validate(event["detail"])


def test_a_model_refuses_an_uncatalogued_type_and_an_undocumented_field() -> None:
    event = received("sandbox.hibernated", ENTRIES["sandbox.hibernated"][0])
    with pytest.raises(ValidationError):
        validate({**event["detail"], "type": "sandbox.teleported"})
    with pytest.raises(ValidationError):
        validate({**event["detail"], "surprise": 1})
    # the published schema still lets a reader meet a field added later in version 1
    schema = schema_of("Sandbox Hibernated")
    assert jsonschema.Draft202012Validator(schema).is_valid(
        {**event, "detail": {**event["detail"], "surprise": 1}}
    )


# ------------------------------------------------- what rules and targets read


def test_the_archive_rule_matches_session_archived_with_work_to_finalize() -> None:
    pattern = catalog.RULES["archive-finalizer"]["pattern"]
    archived = ENTRIES["session.archived"]
    assert matches(pattern, received("session.archived", archived[0]))
    assert not matches(pattern, received("session.archived", archived[1]))
    assert not matches(pattern, received("session.created", {"title": "t"}))


def test_the_archiver_reads_the_session_id_from_the_event() -> None:
    event = received("session.archived", ENTRIES["session.archived"][0])
    assert session_id_of(event) == "s1"
