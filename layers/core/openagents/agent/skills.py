"""Where a repository keeps its skills, and what a SKILL.md says about itself: one rule for the
agent's ``skill`` tool (which loads one) and the composer's list (``services/skills.py``).

A skill is ``<folder>/<name>/SKILL.md`` for the folders of ``SKILL_FOLDERS``, the first folder
holding a name winning. Its front matter (``---`` lines around ``key: value`` lines) gives its
``name`` and ``description``. The files come from the sandbox, which is untrusted: the front
matter is read line by line (plain scalars and ``|``/``>`` blocks only: no YAML tags, anchors or
aliases are ever interpreted), every value is capped and stripped of control characters."""

from __future__ import annotations

from dataclasses import dataclass

SKILL_FOLDERS = (".agents/skills", ".claude/skills", "skills")
SKILL_FILE = "SKILL.md"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_FRONT_MATTER_LINES = 200


@dataclass(frozen=True)
class SkillInfo:
    name: str
    description: str


def is_skill_name(name: str) -> bool:
    """A skill's folder name: one path segment, not hidden."""
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


def skill_path(folder: str, name: str) -> str:
    return f"{folder}/{name}/{SKILL_FILE}"


def _clean(text: str, cap: int) -> str:
    kept = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(kept.split())[:cap]


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if " #" in value:
        value = value.split(" #", 1)[0]
    return value.strip()


def front_matter(text: str) -> dict[str, str]:
    """The top-level ``key: value`` pairs of ``text``'s front matter (none without one)."""
    lines = text.lstrip("\ufeff").splitlines()[:MAX_FRONT_MATTER_LINES]
    if not lines or lines[0].strip() != "---":
        return {}
    found: dict[str, str] = {}
    index = 1
    while index < len(lines) and lines[index].strip() not in ("---", "..."):
        line = lines[index]
        index += 1
        if not line or line[0] in " \t#" or ":" not in line:
            continue
        key, value = line.split(":", 1)
        if value.strip()[:1] in ("|", ">"):  # a block: the indented lines that follow
            block: list[str] = []
            while index < len(lines) and (not lines[index].strip() or lines[index][0] in " \t"):
                block.append(lines[index].strip())
                index += 1
            joiner = "\n" if value.strip().startswith("|") else " "
            found.setdefault(key.strip(), joiner.join(block).strip())
        else:
            found.setdefault(key.strip(), _scalar(value))
    return found


def skill_info(folder_name: str, text: str) -> SkillInfo:
    """What the SKILL.md says: its front matter's ``name`` (else the folder's) and
    ``description`` (else empty), cleaned and capped."""
    meta = front_matter(text)
    name = _clean(meta.get("name", ""), MAX_NAME_CHARS) or _clean(folder_name, MAX_NAME_CHARS)
    return SkillInfo(name, _clean(meta.get("description", ""), MAX_DESCRIPTION_CHARS))
