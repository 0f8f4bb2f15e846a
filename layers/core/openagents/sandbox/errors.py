"""The sandbox's one failure type, below the port and the answer checks that both raise it
(``port.py`` re-exports it as the port's vocabulary)."""

from __future__ import annotations


class SandboxError(Exception):
    """A driver or sandboxd failure with a readable message; ``status``/``code`` when sandboxd
    answered with an error (``status`` None: it could not be reached)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail  # sandboxd's own error text (no route, no status), when it answered


# ``SandboxError.code`` of a start refused for want of capacity (a rate, a quota, no free
# address), not for a fault: the same start succeeds later, so provisioning waits and retries.
CAPACITY = "capacity"
