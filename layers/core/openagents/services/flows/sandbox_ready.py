"""Sandbox ready: the provisioning workflow's steps that reach past provisioning. Prepare: the
workspace (an archived bundle restored by archive, when there is one); activate: the session
active → the idle loop kicked → the dev server and code editor started again."""

from __future__ import annotations

import threading

from openagents.domain.models import Session
from openagents.services.archive import ArchiveService
from openagents.services.code_editor import CodeEditor
from openagents.services.dev_servers import DevServers
from openagents.services.lifecycle import LifecycleService
from openagents.services.provisioning import FromBundle, Prepared, ProvisioningService, Settled


class SandboxReady:
    def __init__(
        self,
        provisioning: ProvisioningService,
        archive: ArchiveService,
        lifecycle: LifecycleService,
        dev_servers: DevServers,
        code_editor: CodeEditor,
        *,
        servers_in_background: bool,
    ) -> None:
        self._provisioning, self._archive, self._lifecycle = provisioning, archive, lifecycle
        self._dev_servers, self._code_editor = dev_servers, code_editor
        # one machine: off the provisioning task's path (it returns at once); on Lambda inline,
        # since a task's thread would freeze when it returns
        self._in_background = servers_in_background

    def prepare(self, session_id: str, generation: int) -> Prepared:
        """The workspace (provisioning); an unarchived session's from its bundle (archive)."""
        prepared = self._provisioning.prepare(session_id, generation)
        if isinstance(prepared, FromBundle):
            branch = self._archive.restore_workspace(prepared.session, prepared.handle)
            return Prepared(branch=branch, from_bundle=True)
        return prepared

    def activate(self, session_id: str, generation: int) -> Settled:
        """The session active (provisioning) → its wait-then-hibernate loop (lifecycle) → the
        dev server and code editor of a resumed sandbox started again."""
        settled = self._provisioning.activate(session_id, generation)
        active = settled.session
        if active is None:
            return settled
        self._lifecycle.kick(active, "sandbox-active")
        if self._in_background:
            threading.Thread(target=self._restart_servers, args=(active,), daemon=True).start()
        else:
            self._restart_servers(active)
        return settled

    def _restart_servers(self, session: Session) -> None:
        self._dev_servers.restart(session)
        self._code_editor.restart(session)
