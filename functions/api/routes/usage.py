"""The caller's model usage per day and model (``services/usage.py``)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from functions.api.deps import App, Caller
from functions.api.lazy_route import AnalysedRoute
from functions.api.picker_schemas import UsageDayOut, UsageOut, UsageTotalsOut
from functions.api.schemas import error_responses
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/usage",
    tags=["usage"],
    dependencies=[Depends(known_query)],
)


@router.get("", responses=error_responses())
def usage(
    app: App,
    caller: Caller,
    start: Annotated[str | None, Query(alias="from", max_length=32)] = None,
    end: Annotated[str | None, Query(alias="to", max_length=32)] = None,
) -> UsageOut:
    """Your runs' tokens and estimated cost per UTC day and model, both dates included."""
    report = app.usage.report(caller, start, end)
    return UsageOut(
        days=[UsageDayOut.day(row) for row in report.days],
        totals=UsageTotalsOut.of(report.totals),
    )
