"""Domain errors. The API maps each class to one HTTP status, in one place."""

from __future__ import annotations


class DomainError(Exception):
    """Base class: ``code`` is stable and machine-readable, ``message`` is for humans."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(DomainError):
    code = "invalid_input"


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class SandboxNotRunning(Conflict):
    """The session has no running sandbox: the client should resume (or provision) it."""

    code = "sandbox_not_running"


class SessionArchived(Conflict):
    """The session is archived: nothing new is written to it until it is unarchived."""

    code = "session_archived"


class TurnConflict(Conflict):
    """A turn is running in the chat."""

    code = "turn_in_progress"


class PayloadTooLarge(DomainError):
    code = "payload_too_large"


class StorageFull(PayloadTooLarge):
    """The write would take the user's stored bytes past ``OPENAGENTS_USER_STORAGE_MAX_BYTES``;
    nothing was written. The message says what to delete."""

    code = "storage_full"


class RateLimited(DomainError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class Unauthenticated(DomainError):
    code = "unauthenticated"


class AccessDenied(DomainError):
    code = "access_denied"


class UpstreamFailed(DomainError):
    """A dependency answered, but not usefully (a model call that produced nothing usable, a git
    host that refused): the API answers 502 with the dependency's reason."""

    code = "upstream_failed"


class Unavailable(DomainError):
    """A dependency (the store, the artifact store) failed or throttled; safe to retry."""

    code = "unavailable"
