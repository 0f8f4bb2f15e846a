"""The event catalogue (docs/events.md): every audit entry type, its EventBridge detail-type and
the model of its ``detail``, one union discriminated on ``type``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter

from openagents.events.agent_events import AgentTurnFinished, AgentTurnReverted, AgentTurnStarted
from openagents.events.envelope import Envelope
from openagents.events.git_events import GitCommitted, GitDiscarded, GitPrOpened, GitPushed
from openagents.events.sandbox_events import (
    SandboxAutoCommit,
    SandboxExtended,
    SandboxFailed,
    SandboxHibernateAborted,
    SandboxHibernated,
    SandboxHibernateFailed,
    SandboxHibernating,
    SandboxLost,
    SandboxPauseRequested,
    SandboxProvisioned,
    SandboxRestoring,
    SandboxResumed,
    SandboxRetry,
    SandboxRunRescued,
    SandboxSnapshotFailed,
    SandboxStarting,
    SandboxWaiting,
)
from openagents.events.session_events import (
    SessionArchived,
    SessionArchiveFailed,
    SessionArchiveFinalized,
    SessionCreated,
    SessionPrClosed,
    SessionPrMerged,
    SessionRenamed,
    SessionRepositoryAttached,
    SessionSettingsChanged,
    SessionUnarchived,
)

# One model per audit entry type a service writes (a new type: a model in the module of its
# kind, a member here, then `openagents event-schemas`).
EventDetail = Annotated[
    SessionCreated
    | SessionRenamed
    | SessionSettingsChanged
    | SessionArchived
    | SessionArchiveFinalized
    | SessionArchiveFailed
    | SessionUnarchived
    | SessionPrMerged
    | SessionPrClosed
    | SessionRepositoryAttached
    | SandboxStarting
    | SandboxProvisioned
    | SandboxFailed
    | SandboxRetry
    | SandboxWaiting
    | SandboxHibernating
    | SandboxHibernated
    | SandboxSnapshotFailed
    | SandboxHibernateAborted
    | SandboxHibernateFailed
    | SandboxPauseRequested
    | SandboxRestoring
    | SandboxResumed
    | SandboxExtended
    | SandboxLost
    | SandboxRunRescued
    | SandboxAutoCommit
    | AgentTurnStarted
    | AgentTurnFinished
    | AgentTurnReverted
    | GitCommitted
    | GitDiscarded
    | GitPushed
    | GitPrOpened,
    Field(discriminator="type"),
]
MODELS: tuple[type[Envelope], ...] = get_args(get_args(EventDetail)[0])


def _literal(model: type[Envelope], field: str) -> str:
    (value,) = get_args(model.model_fields[field].annotation)
    return str(value)


def kind_of(model: type[Envelope]) -> str:
    """The audit entry type a model describes."""
    return _literal(model, "type")


def detail_type_of_model(model: type[Envelope]) -> str:
    return _literal(model, "name")


# audit entry type -> EventBridge detail-type
DETAIL_TYPES: dict[str, str] = {kind_of(model): detail_type_of_model(model) for model in MODELS}
_DETAIL: TypeAdapter[EventDetail] = TypeAdapter(EventDetail)


def validate(detail: Mapping[str, Any]) -> EventDetail:
    """The model of a published ``detail``; raises ``pydantic.ValidationError`` for an
    uncatalogued type or a detail its model does not describe (a field missing, mistyped or
    undocumented)."""
    return _DETAIL.validate_python(detail)
