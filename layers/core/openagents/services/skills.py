"""The repository's skills in a session's sandbox (``GET /api/sessions/{id}/skills``), found
where the agent's ``skill`` tool looks (``agent/skills.py``). The sandbox is untrusted: the
listing, the files read and what is kept of them are all capped."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from openagents.agent.skills import (
    SKILL_FILE,
    SKILL_FOLDERS,
    SkillInfo,
    is_skill_name,
    skill_info,
    skill_path,
)
from openagents.domain.errors import SandboxNotRunning
from openagents.domain.identity import Identity
from openagents.sandbox.port import Sandboxd, SandboxdClients, SandboxError
from openagents.services.sandbox_tools import running_sandbox
from openagents.store.port import Store

log = logging.getLogger(__name__)
MAX_SKILLS = 100
MAX_SKILL_BYTES = 64 << 10


@dataclass(frozen=True)
class _Found:
    folder: str
    name: str


class SkillsService:
    def __init__(self, store: Store, clients: SandboxdClients) -> None:
        self._store = store
        self._clients = clients

    def skills(self, identity: Identity, session_id: str) -> list[SkillInfo]:
        """404 for another user's session; 409 ``sandbox_not_running`` unless it is active."""
        session, client = running_sandbox(self._store, self._clients, identity, session_id)
        try:
            found = _find(client)
            skills = [info for item in found if (info := _read(client, item)) is not None]
        except SandboxError as exc:
            log.info("skills of %s: the sandbox failed: %s", session.id, exc)
            raise SandboxNotRunning("The sandbox is unavailable. Please resume it.") from exc
        return sorted(skills, key=lambda skill: (skill.name.lower(), skill.name))


def _find(client: Sandboxd) -> list[_Found]:
    """The skill folders holding a SKILL.md file, the first folder winning for a name."""
    found: dict[str, _Found] = {}
    for folder in SKILL_FOLDERS:
        try:
            listing = client.list_files(folder, depth=2)
        except SandboxError as exc:
            if exc.status in (400, 404):  # no such folder (or not a folder)
                continue
            raise
        for entry in listing.entries:
            if entry.type != "file":
                continue
            path = entry.path
            if not path.startswith(f"{folder}/"):
                continue
            name, _, file = path[len(folder) + 1 :].partition("/")
            if file == SKILL_FILE and is_skill_name(name) and name not in found:
                found[name] = _Found(folder, name)
            if len(found) >= MAX_SKILLS:
                return list(found.values())
    return list(found.values())


def _read(client: Sandboxd, found: _Found) -> SkillInfo | None:
    try:
        answer = client.read_file(skill_path(found.folder, found.name), max_bytes=MAX_SKILL_BYTES)
    except SandboxError as exc:
        if exc.status is not None and 400 <= exc.status < 500:  # gone, or refused: skip it
            return None
        raise
    if answer.encoding == "base64":
        return None  # not text
    return skill_info(found.name, answer.content)
