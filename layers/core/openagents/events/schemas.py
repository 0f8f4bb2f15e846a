"""``docs/events/*.schema.json``: one JSON Schema per detail-type, generated from the event
models (``openagents event-schemas``; tests/unit/test_event_schemas.py keeps the files equal)."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from openagents.events.catalog import MODELS, detail_type_of_model, kind_of
from openagents.events.envelope import SOURCE, VERSION, Envelope

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ABOUT = (
    "The event as a rule target receives it; `detail` is the versioned envelope plus the "
    f"entry's data fields. Unknown fields may appear (additive changes keep version {VERSION})."
)


def file_name(detail_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", detail_type.lower()).strip("-") + ".schema.json"


def _published(node: Any, defs: dict[str, Any]) -> Any:
    """The consumer's view of a model's schema: nested models inline, no pydantic titles, and
    no ``additionalProperties`` (the models refuse undocumented fields when an event is written;
    a reader must still accept fields added later in the same version)."""
    if isinstance(node, list):
        return [_published(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:  # a nested model: its field's description, not its docstring
        target = defs[node["$ref"].rsplit("/", 1)[1]]
        extra = {key: value for key, value in node.items() if key != "$ref"}
        inline = {key: value for key, value in target.items() if key != "description"}
        return _published({**inline, **extra}, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$defs", "additionalProperties") or (key == "title" and isinstance(value, str)):
            continue
        out[key] = (
            _published(value, defs)
            if key != "properties"
            else {name: _published(field, defs) for name, field in value.items()}
        )
    return out


def schema_of(model: type[Envelope]) -> dict[str, Any]:
    """The JSON Schema of the event a rule target receives for ``model``'s type."""
    kind, detail_type = kind_of(model), detail_type_of_model(model)
    generated = model.model_json_schema(by_alias=True)
    published = _published(generated, generated.get("$defs", {}))
    properties = published["properties"]
    properties["name"] = {"const": detail_type, "description": "The detail-type."}
    properties["type"] = {"const": kind, "description": Envelope.model_fields["type"].description}
    detail = {"type": "object", "required": published["required"], "properties": properties}
    description = " ".join(inspect.cleandoc(model.__doc__ or "").split())
    return {
        "$schema": DRAFT,
        "$id": f"urn:openagents:events:{file_name(detail_type).removesuffix('.schema.json')}:v1",
        "title": detail_type,
        "description": f"`{kind}` — {description} {ABOUT}",
        "type": "object",
        "required": ["source", "detail-type", "time", "detail"],
        "properties": {
            "version": {"const": "0", "description": "EventBridge's own envelope version."},
            "id": {"type": "string"},
            "source": {"const": SOURCE},
            "detail-type": {"const": detail_type},
            "time": {"type": "string", "format": "date-time"},
            "resources": {"type": "array", "items": {"type": "string"}},
            "detail": detail,
        },
    }


def documents() -> dict[str, str]:
    """Each schema file's name and text, as ``docs/events/`` holds them."""
    return {
        file_name(detail_type_of_model(model)): json.dumps(
            schema_of(model), indent=2, ensure_ascii=False
        )
        + "\n"
        for model in MODELS
    }


def write(directory: Path) -> list[str]:
    """Write every schema to ``directory`` and remove the ones no model describes; the names
    written or removed."""
    wanted = documents()
    changed = [name for name, text in wanted.items() if _read(directory / name) != text]
    for name in changed:
        (directory / name).write_text(wanted[name])
    stale = sorted(p.name for p in directory.glob("*.schema.json") if p.name not in wanted)
    for name in stale:
        (directory / name).unlink()
    return changed + stale


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None
