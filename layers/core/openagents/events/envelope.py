"""The versioned envelope every event's ``detail`` carries, and the field groups event models
share (docs/events.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import MISSING, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

SOURCE = "openagents"
# The envelope version. Adding an event, an optional field or a value keeps it; removing,
# renaming or retyping a field is a new version, published next to this one for a while.
VERSION = 1
# The envelope's fields: an entry detail field of the same name never replaces them.
ENVELOPE_FIELDS = (
    "name",
    "version",
    "source",
    "sessionId",
    "userId",
    "correlationId",
    "time",
    "type",
    "entryId",
)
STATES = "provisioning, active, hibernating, hibernated, restoring, archived, failed"


class Part(BaseModel):
    """A nested object of an event's detail: camelCase on the wire, typed as the JSON Schema
    types it, nothing undocumented (the published schema still lets readers meet fields added
    later, docs/events.md)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, frozen=True, strict=True)


class Envelope(Part):
    """An event's ``detail``: the envelope, then the audit entry's data fields. Each event type
    is a subclass naming its ``type`` and ``name`` (the detail-type) as literals; its docstring
    is the catalogue's description of the event."""

    name: str = Field(description="The detail-type.")
    version: Literal[1] = Field(description="Envelope version (docs/events.md, Versioning).")
    source: Literal["openagents"]
    session_id: str = Field(min_length=1)
    user_id: str = Field(min_length=1, description="The session's owner.")
    correlation_id: str = Field(
        min_length=1, description="Correlates the event with its cause; today the audit entry id."
    )
    time: datetime = Field(
        strict=False, description="When the transition was committed (the audit entry's time)."
    )
    type: str = Field(description="The audit entry type (GET /api/sessions/{id}/events).")
    entry_id: str = Field(
        min_length=1,
        description="The audit entry id; unique per event, use it to de-duplicate (delivery is "
        "at least once).",
    )


class Transition(Envelope):
    """A lifecycle transition's fields (the state before and after, the generation)."""

    from_: str = Field(alias="from", description=f"Lifecycle state before ({STATES}).")
    to: str = Field(description=f"Lifecycle state after ({STATES}).")
    generation: int = Field(ge=0, description="The session's sandbox generation at the transition.")


CODE = "The stable failure code beside `lifecycleError` (`provisioning_failed`, …)."


class Failed(Transition):
    """A transition of a failure: the stable code beside ``lifecycleError`` and the error."""

    code: str | MISSING = Field(default=MISSING, description=CODE)
    error: str | MISSING = Field(
        default=MISSING, description="What failed (at most 1000 characters)."
    )


class Checkpoint(Part):
    """A saved state of the workspace (a ref under refs/openagents/checkpoints/)."""

    ref: str = Field(pattern="^refs/openagents/checkpoints/[A-Za-z0-9_-]+$")
    commit: str = Field(pattern="^[0-9a-f]{40,64}$")
    files: int = Field(ge=0)
