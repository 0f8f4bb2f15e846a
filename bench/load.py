"""Load: simulated users against the one-machine runtime (``openagents dev`` in a child
process, so the load generator does not share its interpreter). Each user owns a session and
loops, with no think time, over a status poll and a user message post until the time is up
(bounded in count by the duration; every request times out after 30 s). Reported: throughput,
latency percentiles per operation, errors (must be 0), and whether every acknowledged message
can be read back (no lost writes). Sessions are created without provisioning: this measures the
API and the store, not sandboxes."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import ms, runtime, say, scratch, summary

USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) openagents-bench"


async def _user(
    client: Any,
    token: str,
    session_id: str,
    chat_id: str,
    deadline: float,
    user: int,
    timings: dict[str, list[float]],
    errors: Counter[str],
    acknowledged: Counter[str],
) -> None:
    headers = {"authorization": f"Bearer {token}", "user-agent": USER_AGENT}
    messages = f"/api/sessions/{session_id}/chats/{chat_id}/messages"
    sequence = 0
    while time.monotonic() < deadline:
        for op in ("status", "message"):
            began = time.perf_counter()
            try:
                if op == "status":
                    response = await client.get(
                        "/api/sandbox/status", params={"sessionId": session_id}, headers=headers
                    )
                else:
                    sequence += 1
                    body = {
                        "message": {
                            "id": f"load-{user}-{sequence}",
                            "role": "user",
                            "parts": [{"type": "text", "text": f"message {sequence}"}],
                        }
                    }
                    response = await client.post(messages, json=body, headers=headers)
            except Exception as exc:  # a transport failure is an error like a 5xx
                errors[f"{op}: {type(exc).__name__}"] += 1
                continue
            timings[op].append(time.perf_counter() - began)
            if response.status_code >= 300:
                errors[f"{op}: HTTP {response.status_code}"] += 1
            elif op == "message":
                acknowledged[chat_id] += 1


async def _drive(base_url: str, users: list[dict[str, str]], seconds: float) -> dict[str, Any]:
    import httpx

    timings: dict[str, list[float]] = {"status": [], "message": []}
    errors: Counter[str] = Counter()
    acknowledged: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=len(users), max_keepalive_connections=len(users))
    async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=limits) as client:
        began = time.monotonic()
        deadline = began + seconds
        await asyncio.gather(
            *(
                _user(
                    client,
                    u["token"],
                    u["session"],
                    u["chat"],
                    deadline,
                    i,
                    timings,
                    errors,
                    acknowledged,
                )
                for i, u in enumerate(users)
            )
        )
        elapsed = time.monotonic() - began
    return {"timings": timings, "errors": errors, "acknowledged": acknowledged, "elapsed": elapsed}


def _stored(base_url: str, users: list[dict[str, str]]) -> Counter[str]:
    import httpx

    found: Counter[str] = Counter()
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for u in users:
            cursor = None
            while True:
                query = {"limit": "500", **({"cursor": cursor} if cursor else {})}
                page = client.get(
                    f"/api/sessions/{u['session']}/chats/{u['chat']}/messages",
                    params=query,
                    headers={"authorization": f"Bearer {u['token']}", "user-agent": USER_AGENT},
                ).json()
                found[u["chat"]] += len(page["messages"])
                cursor = page["nextCursor"]
                if not cursor:
                    break
    return found


def _causes(log: Path) -> dict[str, int]:
    """Why the runtime answered errors: the store's messages in its log, counted."""
    found: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        if "store is unavailable" in line or ("Error" in line and "dynamodb" in line.lower()):
            start = line.find("The session store")
            found[line[start : start + 160] if start >= 0 else line[:160]] += 1
    return dict(found.most_common(5))


def run(args: Any) -> dict[str, Any]:
    import httpx

    env = {"OPENAGENTS_PROVISION_ON_CREATE": "false", "OPENAGENTS_RATE_LIMIT_PER_MINUTE": "100000"}
    with scratch("load") as home, runtime(home / "home", env) as rt:
        users = []
        with httpx.Client(base_url=rt.base_url, timeout=60) as client:
            for i in range(args.users):
                token = rt.token(f"load-{i}")
                created = client.post(
                    "/api/sessions",
                    json={"title": f"load {i}"},
                    headers={"authorization": f"Bearer {token}", "user-agent": USER_AGENT},
                )
                created.raise_for_status()
                body = created.json()
                users.append(
                    {"token": token, "session": body["session"]["id"], "chat": body["chat"]["id"]}
                )
        say(f"load: {args.users} users for {args.duration:.0f} s")
        outcome = asyncio.run(_drive(rt.base_url, users, args.duration))
        stored = _stored(rt.base_url, users)
        causes = _causes(rt.log) if outcome["errors"] else {}
    timings, errors = outcome["timings"], outcome["errors"]
    total = sum(len(v) for v in timings.values()) + sum(
        n for k, n in errors.items() if "HTTP" not in k
    )
    lost = sum(max(0, n - stored[chat]) for chat, n in outcome["acknowledged"].items())
    return {
        "users": args.users,
        "seconds": round(outcome["elapsed"], 1),
        "requests": total,
        "throughputPerSecond": round(total / outcome["elapsed"], 1),
        "errors": sum(errors.values()),
        "errorKinds": dict(errors),
        "errorCauses": causes,
        "messagesAcknowledged": sum(outcome["acknowledged"].values()),
        "messagesLost": lost,
        "milliseconds": {
            op: {k: (ms(v) if k != "n" else v) for k, v in summary(values).items()}
            for op, values in timings.items()
        },
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    table = [
        [
            f"load: {result['users']} users, {result['seconds']:.0f} s",
            f"{result['throughputPerSecond']} req/s",
            f"{result['requests']} requests, {result['errors']} errors"
            + (f" {result['errorKinds']}" if result["errors"] else "")
            + f"; {result['messagesAcknowledged']} messages acknowledged, "
            f"{result['messagesLost']} lost",
        ]
    ]
    for op, s in result["milliseconds"].items():
        table.append(
            [
                f"load: {'status poll' if op == 'status' else 'message post'} latency",
                f"p50 {s['p50']:.1f} ms, p99 {s['p99']:.1f} ms",
                f"max {s['max']:.1f} ms, n={s['n']}",
            ]
        )
    return table
