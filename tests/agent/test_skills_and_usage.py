"""The skills route in a real active sandbox (hostile SKILL.md files written by the sandbox:
huge, binary, a thousand of them, control characters — capped and cleaned) and the usage
route over real runs of the scripted model at a configured price (docs/api.md: Skills,
Usage)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from openagents.settings import ModelPrice, Settings

from tests.agent.conftest import AgentApi
from tests.agent.test_stop_and_stream import wait_run

PRICE = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}

# Written inside the sandbox, as an agent (or the repository) would
SKILLS = r"""
import os, random
def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
put(".agents/skills/deploy/SKILL.md", "---\nname: deploy\ndescription: Ship it\n---\nSteps")
put(".claude/skills/deploy/SKILL.md", "---\nname: shadowed\n---\n")  # .agents wins the name
put(".claude/skills/review/SKILL.md",
    "---\nname: re\x1b[31mview\u202e\ndescription: Checks\x07 the\tdiff\r\n---\n")
put("skills/huge/SKILL.md", "---\nname: huge\ndescription: big\n---\n" + "x" * (8 << 20))
put("skills/binary/SKILL.md", bytes(random.Random(7).randrange(256) for _ in range(4096)))
put("skills/long/SKILL.md", "---\nname: " + "n" * 500 + "\ndescription: " + "d" * 5000 + "\n---\n")
put("skills/nofront/SKILL.md", "Just text, no front matter.")
put("skills/.hidden/SKILL.md", "---\nname: hidden\n---\n")
put("skills/notes.md", "not a skill")
for i in range(1000):
    put(f"skills/z-{i:04d}/SKILL.md", f"---\nname: z-{i:04d}\ndescription: bulk {i}\n---\n")
print("ok")
"""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"model_prices": {"scripted/default": ModelPrice.model_validate(PRICE)}}
    )


def test_skills_of_a_hostile_sandbox_are_capped_and_cleaned(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, _ = live_session
    none = agent_api.get(f"/api/sessions/{session_id}/skills")
    assert none.status == 200, none.body
    assert none.body == {"skills": []}  # the repository has none

    command = f"python3 - <<'EOF'\n{SKILLS}\nEOF"
    wrote = agent_api.post(f"/api/sessions/{session_id}/sandbox/exec", {"command": command})
    assert wrote.status == 200, wrote.body
    assert wrote.body["stdout"].strip() == "ok", wrote.body

    reply = agent_api.get(f"/api/sessions/{session_id}/skills")
    assert reply.status == 200, reply.body
    skills = reply.body["skills"]
    # at most 100 SKILL.md files are read, whatever the sandbox holds; the binary one is among
    # them and is dropped
    assert len(skills) == 99
    assert "z-0000" in {s["name"] for s in skills}
    assert "z-0999" not in {s["name"] for s in skills}
    by_name = {s["name"]: s["description"] for s in skills}
    assert by_name["deploy"] == "Ship it"
    assert "shadowed" not in by_name
    assert by_name["re [31mview"] == "Checks the diff"  # control characters gone
    assert by_name["huge"] == "big"  # its front matter, from the first 64 KiB
    assert by_name["n" * 64] == "d" * 1024
    assert by_name["nofront"] == ""
    assert not {"hidden", "binary", "notes.md"} & set(by_name)
    for skill in skills:
        assert skill["name"].isprintable()
        assert skill["description"].isprintable()
    names = [s["name"] for s in skills]
    assert names == sorted(names, key=lambda n: (n.lower(), n))
    assert agent_api.get(f"/api/sessions/{session_id}/skills", user="mallory").status == 404


def test_usage_sums_the_callers_runs_at_the_models_price(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    runs = []
    for text in ("First answer, a few tokens.", "Second answer, a few more tokens than that."):
        agent_api.script.set([{"text": text}])
        assert agent_api.turn(session_id, chat_id, "say something").status == 202
        run = wait_run(agent_api, session_id, "completed", "failed")
        assert run["status"] == "completed", run
        runs.append(run)
    assert runs[0]["runId"] != runs[1]["runId"]

    reply = agent_api.get("/api/usage")
    assert reply.status == 200, reply.body
    keys = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
    expected: dict[str, dict[str, Any]] = {}  # by the UTC day each run started
    for run in runs:
        day = datetime.fromisoformat(run["startedAt"]).astimezone(UTC).date().isoformat()
        row = expected.setdefault(
            day, {"date": day, "modelId": "scripted/default", "runs": 0, "costUsd": 0.0}
        )
        row["runs"] += 1
        row["costUsd"] += run["costUsd"]
        for key in keys:
            row[key] = row.get(key, 0) + run["usage"][key]
    assert all(r["costUsd"] > 0 and r["outputTokens"] > 0 for r in expected.values())
    days = reply.body["days"]
    assert [{**d, "costUsd": pytest.approx(d["costUsd"])} for d in days] == list(expected.values())
    totals = {key: sum(r["usage"][key] for r in runs) for key in keys}
    cost = sum(r["costUsd"] for r in runs)
    assert reply.body["totals"] == {"runs": 2, **totals, "costUsd": pytest.approx(cost, abs=1e-6)}

    # only the caller's own runs, only the days asked for
    assert agent_api.get("/api/usage", user="mallory").body["days"] == []
    yesterday = str(datetime.fromisoformat(min(expected)).date() - timedelta(days=1))
    before = agent_api.get("/api/usage", query={"from": yesterday, "to": yesterday})
    assert before.body["days"] == []
    assert before.body["totals"]["runs"] == 0
