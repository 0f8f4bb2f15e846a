"""Time from a resume request to ``active``: over HTTP against the local server, on the real
provisioning and lifecycle workflows (moto's Step Functions) with real sandboxes. A session on
a local repository gets a generated workspace, is paused (snapshot, verify, stop) and resumed
(a new generation restored from the snapshot, git HEAD verified) a few times; the clock runs
from sending ``PUT /api/sandbox/snapshot`` to the first status poll (every 50 ms) that shows
``active``. Pause-to-hibernated is measured the same way."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.common import fresh_settings, moto_server, say, scratch, summary

POLL_SECONDS = 0.05


def _until(api: Any, session_id: str, state: str, limit: float = 120) -> float:
    """Seconds until the status shows ``state`` (raises on a timeout or a failure)."""
    began = time.perf_counter()
    while time.perf_counter() - began < limit:
        reply = api.get("/api/sandbox/status", query={"sessionId": session_id})
        lifecycle = reply.body["lifecycle"]
        if lifecycle["state"] == state:
            return time.perf_counter() - began
        if lifecycle["state"] == "failed":
            raise RuntimeError(f"session failed: {lifecycle['error']}")
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"session never became {state}")


def run(args: Any) -> dict[str, Any]:
    import pytest

    from bench.workspace import generate
    from tests.support import HttpApi, local_server, make_origin, provisioning_runtime

    with moto_server() as moto, scratch("resume") as home:
        settings = fresh_settings(
            moto.endpoint,
            home / "home",
            idle_timeout_seconds=3600,
            lifecycle_min_sleep_seconds=0.5,
        )
        with (
            pytest.MonkeyPatch.context() as patch,
            provisioning_runtime(settings, moto.endpoint, patch) as live,
            local_server(live) as base_url,
        ):
            api = HttpApi(live, base_url)
            origin = make_origin(home)
            created = api.post("/api/sessions", {"repoUrl": f"file://{origin}", "branch": "main"})
            session_id = created.body["session"]["id"]
            _until(api, session_id, "active")
            workspace = Path(live.home) / "sandboxes" / session_id / "1" / "workspace"
            say(f"resume: generating {args.resume_mb} MB in the session's workspace")
            content = generate(workspace, args.resume_mb, max(200, args.resume_mb * 60))
            pauses, resumes, sizes = [], [], []
            for cycle in range(args.cycles):
                say(f"resume: cycle {cycle + 1} of {args.cycles}")
                paused = api.post("/api/sandbox/snapshot", {"sessionId": session_id})
                assert paused.status == 202, paused.body
                pauses.append(_until(api, session_id, "hibernated"))
                status = api.get("/api/sandbox/status", query={"sessionId": session_id}).body
                sizes.append(status["snapshot"]["sizeBytes"])
                began = time.perf_counter()
                resumed = api.put("/api/sandbox/snapshot", {"sessionId": session_id})
                assert resumed.status == 200, resumed.body
                assert resumed.body["restoring"], resumed.body
                _until(api, session_id, "active")
                resumes.append(time.perf_counter() - began)
            api.client.close()
    return {
        "workspace": {"megabytes": round(content.bytes / 1e6, 1), "files": content.files},
        "snapshotMegabytes": round(max(sizes) / 1e6, 1),
        "resumeToActiveSeconds": {k: round(v, 3) for k, v in summary(resumes).items()},
        "pauseToHibernatedSeconds": {k: round(v, 3) for k, v in summary(pauses).items()},
        "cycles": args.cycles,
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    r, p, w = (
        result["resumeToActiveSeconds"],
        result["pauseToHibernatedSeconds"],
        result["workspace"],
    )
    shape = f"{w['megabytes']} MB, {w['files']} files ({result['snapshotMegabytes']} MB archive)"
    return [
        [
            "resume: request -> active",
            f"p50 {r['p50']:.2f} s",
            f"min {r['min']:.2f}, max {r['max']:.2f} s over {result['cycles']} cycles; {shape}",
        ],
        [
            "pause: request -> hibernated",
            f"p50 {p['p50']:.2f} s",
            f"min {p['min']:.2f}, max {p['max']:.2f} s (includes the loop's shortest wait)",
        ],
    ]
