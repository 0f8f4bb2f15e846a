"""The repository's skills in a session's sandbox (``services/skills.py``)."""

from fastapi import APIRouter, Depends

from functions.api.deps import App, Caller
from functions.api.lazy_route import AnalysedRoute
from functions.api.picker_schemas import SkillOut, SkillsOut
from functions.api.schemas import error_responses
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/sessions/{session_id}",
    tags=["skills"],
    dependencies=[Depends(known_query)],
)


@router.get("/skills", responses=error_responses(409))
def skills(session_id: str, app: App, caller: Caller) -> SkillsOut:
    """The skills the agent's `skill` tool can load, from each SKILL.md's front matter."""
    found = app.skills.skills(caller, session_id)
    return SkillsOut(skills=[SkillOut.of(info) for info in found])
