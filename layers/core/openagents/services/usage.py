"""The caller's model usage per day and model (``GET /api/usage``): their own runs, every
session's, read from the run store's per-user index and summed here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from openagents.domain.errors import InvalidInput
from openagents.domain.identity import Identity
from openagents.domain.runs import Run
from openagents.domain.usage import Usage
from openagents.store.runs import RunStore

MAX_DAYS = 92  # a range covers at most this many days, both ends included
DEFAULT_DAYS = 30  # no ``from``: the 30 days that end with ``to``
MAX_RUNS = 20_000  # a range's runs read at most (a guard; far above one person's 92 days)


@dataclass(frozen=True)
class UsageRow:
    """One day's (UTC) runs of one model, or (``day``, ``model_id`` None) the totals."""

    day: date | None
    model_id: str | None
    runs: int
    usage: Usage
    cost_usd: float | None  # None: no run of the row had a price


@dataclass(frozen=True)
class UsageReport:
    days: list[UsageRow]
    totals: UsageRow


def parse_day(value: str | None, field: str) -> date | None:
    if value is None:
        return None
    try:
        if len(value) != 10:
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{field} must be a YYYY-MM-DD date", field=field) from None


def summed(runs: Iterable[Run], day: date | None = None, model_id: str | None = None) -> UsageRow:
    count, usage, cost = 0, Usage(), None
    for run in runs:
        count += 1
        usage = usage + run.usage
        if run.cost_usd is not None:
            cost = (cost or 0.0) + run.cost_usd
    return UsageRow(day, model_id, count, usage, None if cost is None else round(cost, 6))


class UsageService:
    def __init__(self, runs: RunStore, now: Callable[[], datetime]) -> None:
        self._runs = runs
        self._now = now

    def report(self, caller: Identity, start: str | None, end: str | None) -> UsageReport:
        """Both days included (UTC); ``to`` defaults to today, ``from`` to 29 days before it.
        ``InvalidInput`` on ``from``/``to``: not a date, ``from`` after ``to``, over 92 days."""
        last = parse_day(end, "to") or self._now().astimezone(UTC).date()
        first = parse_day(start, "from") or last - timedelta(days=DEFAULT_DAYS - 1)
        if first > last:
            raise InvalidInput("from must not be after to", field="from")
        if (last - first).days + 1 > MAX_DAYS:
            raise InvalidInput(f"A range covers at most {MAX_DAYS} days", field="to")
        begin = datetime.combine(first, time(), UTC)
        stop = datetime.combine(last + timedelta(days=1), time(), UTC)
        runs = self._runs.list_for_user(caller.user_id, begin, stop, MAX_RUNS)
        groups: dict[tuple[date, str], list[Run]] = {}
        for run in runs:
            key = (run.started_at.astimezone(UTC).date(), run.model_id)
            groups.setdefault(key, []).append(run)
        days = [summed(group, *key) for key, group in sorted(groups.items())]
        return UsageReport(days, summed(runs))
