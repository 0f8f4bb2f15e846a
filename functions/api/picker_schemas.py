"""Bodies of the repository picker, skills and usage routes (docs/api.md: "Repositories",
"Skills", "Usage")."""

from __future__ import annotations

from typing import Annotated

from openagents.agent.skills import SkillInfo
from openagents.git.catalog import BranchInfo, RepositoryInfo
from openagents.services.usage import UsageRow
from pydantic import Field, StrictBool

from functions.api.schemas import Body, Out


class RepositoryOut(Out):
    repo_url: str
    name: str
    owner: str | None = None
    private: bool | None = None
    default_branch: str | None

    @classmethod
    def of(cls, info: RepositoryInfo) -> RepositoryOut:
        return cls(
            repo_url=info.repo_url,
            name=info.name,
            owner=info.owner,
            private=info.private,
            default_branch=info.default_branch,
        )


class RepositoriesOut(Out):
    repositories: list[RepositoryOut]
    next: str | None


class BranchOut(Out):
    name: str
    default: bool

    @classmethod
    def of(cls, info: BranchInfo) -> BranchOut:
        return cls(name=info.name, default=info.default)


class BranchesOut(Out):
    branches: list[BranchOut]


class RepositoryIn(Body):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    private: StrictBool = True


class CreatedRepositoryOut(Out):
    repository: RepositoryOut


class SkillOut(Out):
    name: str
    description: str

    @classmethod
    def of(cls, info: SkillInfo) -> SkillOut:
        return cls(name=info.name, description=info.description)


class SkillsOut(Out):
    skills: list[SkillOut]


class UsageTotalsOut(Out):
    runs: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None

    @classmethod
    def of(cls, row: UsageRow) -> UsageTotalsOut:
        return cls(
            runs=row.runs,
            input_tokens=row.usage.input_tokens,
            output_tokens=row.usage.output_tokens,
            cache_read_tokens=row.usage.cache_read_tokens,
            cache_write_tokens=row.usage.cache_write_tokens,
            cost_usd=row.cost_usd,
        )


class UsageDayOut(UsageTotalsOut):
    date: str
    model_id: str

    @classmethod
    def day(cls, row: UsageRow) -> UsageDayOut:
        totals = UsageTotalsOut.of(row)
        return cls(**totals.model_dump(), date=str(row.day), model_id=row.model_id or "")


class UsageOut(Out):
    days: list[UsageDayOut]
    totals: UsageTotalsOut
