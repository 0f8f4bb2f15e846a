"""The hand-offs between the session services, in one place.

Provisioning, lifecycle and archive call one another in a cycle that no import can show:

- lifecycle → provisioning: a hibernated session is restored (``provision``);
- provisioning → lifecycle: an active sandbox starts the idle loop (``sandbox_active``);
- provisioning → archive: a new sandbox of an archived session gets its bundle back
  (``restore_workspace``);
- archive → provisioning: unarchiving provisions a sandbox (``provision``);
- archive → lifecycle: an unarchived session's sandbox starts the idle loop (``unarchived``).

After a turn (lifecycle, auto-commit) is a flow of its own: ``services/flows.py``.

The composition root builds one ``Handoffs``, hands its methods to the services as their
callbacks, and binds the services to it once they all exist (``bind``). Reading ``build()``
shows who calls whom by name; a hand-off used before ``bind`` raises instead of passing None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from openagents.domain.models import Session
from openagents.sandbox.port import SandboxHandle

if TYPE_CHECKING:
    from openagents.services.archive import ArchiveService
    from openagents.services.lifecycle import LifecycleService
    from openagents.services.provisioning import Kick, ProvisioningService


@dataclass(frozen=True)
class Services:
    lifecycle: LifecycleService
    provisioning: ProvisioningService
    archive: ArchiveService


class Handoffs:
    def __init__(self) -> None:
        self._services: Services | None = None

    def bind(self, services: Services) -> None:
        if self._services is not None:
            raise RuntimeError("the hand-offs are bound once")
        self._services = services

    @property
    def _bound(self) -> Services:
        if self._services is None:
            raise RuntimeError("a hand-off ran before the services were bound")
        return self._services

    def provision(self, session: Session, generation: int) -> Kick:
        """lifecycle → provisioning (restore a hibernated session) and archive → provisioning
        (unarchive): start the sandbox generation."""
        return self._bound.provisioning.kick(session, generation)

    def sandbox_active(self, session: Session) -> bool:
        """provisioning → lifecycle: the idle loop of a newly active sandbox."""
        return self._bound.lifecycle.kick(session, "sandbox-active")

    def unarchived(self, session: Session) -> bool:
        """archive → lifecycle: the idle loop of an unarchived session's sandbox."""
        return self._bound.lifecycle.kick(session, "unarchived", force=True)

    def restore_workspace(self, session: Session, handle: SandboxHandle) -> str:
        """provisioning → archive: an archived session's bundle into its new sandbox."""
        return self._bound.archive.restore_workspace(session, handle)
