"""The cold-start baseline: a one-route FastAPI app behind Mangum, nothing else."""

from __future__ import annotations

from fastapi import FastAPI
from mangum import Mangum

app = FastAPI()


@app.get("/")
def root() -> dict[str, bool]:
    return {"ok": True}


handler = Mangum(app, lifespan="off")
