"""Cold start: import and init of each function's handler module in a fresh interpreter, with
bytecode already compiled (a warm-up run writes it), against two baselines measured in the same
run: the API against a one-route FastAPI + Mangum app, every other function against a bare
Powertools handler (Logger, Tracer, Metrics). "Init" is what the first invocation adds: the API's
first request is ``GET /api/sessions?bench=1``: a real route, analysed on first use
(functions/api/lazy_route.py), its dependencies solved up to the unknown-query check, which
refuses it (400) before the container is built (the container, with PynamoDB and botocore, is
left out as the health request it replaces left it out); a task function's first step builds
its own, the outbox enriches an empty batch, a baseline answers once. No AWS request is
made.

Package sizes come from the staged assets in ``.build/`` (``make build``); without them that
part is skipped."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from typing import Any

from bench.common import PYTHON, ROOT, say

API_BASELINE = "baseline (FastAPI + Mangum, one route)"
TASK_BASELINE = "baseline (bare Powertools handler)"
SHORT = {API_BASELINE: "FastAPI", TASK_BASELINE: "Powertools"}
GOALS = {API_BASELINE: 1.2, TASK_BASELINE: 1.1}  # issue 16: the most each may cost
BASELINES = {API_BASELINE: "bench.baseline_app", TASK_BASELINE: "bench.baseline_powertools"}
PROBE = r"""
import json, sys, time
began, cpu_began = time.perf_counter(), time.process_time()
import importlib
name = sys.argv[1]
module = importlib.import_module(name)
imported, cpu_imported = time.perf_counter(), time.process_time()

class Context:
    function_name = "bench"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id = "cold-start"
    def get_remaining_time_in_millis(self):
        return 30000

def event(path, query=""):
    http = {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
            "userAgent": "bench"}
    context = {"http": http, "requestId": "r", "routeKey": "$default", "stage": "$default",
               "accountId": "1", "apiId": "a", "domainName": "bench", "time": "", "timeEpoch": 0}
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
            "headers": {"host": "bench", "user-agent": "bench"}, "isBase64Encoded": False,
            "requestContext": context}

if hasattr(module, "runtime"):
    module.runtime.get()
elif name.endswith("baseline_app"):
    assert module.handler(event("/"), Context())["statusCode"] == 200
elif name.endswith("baseline_powertools"):
    assert module.lambda_handler({}, Context()) == {"ok": True}
elif name.endswith("outbox.handler"):
    assert module.lambda_handler([], Context()) == []
else:  # a real route, analysed on first use: refused by its query check before the container
    assert module.lambda_handler(event("/api/sessions", "bench=1"), Context())["statusCode"] == 400
done, cpu_done = time.perf_counter(), time.process_time()
print(json.dumps({"import": imported - began, "init": done - imported,
                  "cpuImport": cpu_imported - cpu_began, "cpuInit": cpu_done - cpu_imported}))
"""


def modules() -> dict[str, str]:
    from infra.build import function_names

    found = {name: f"functions.{name}.handler" for name in function_names()}
    return {**found, **BASELINES}


PROFILED = ("api", "lifecycle", "agent")  # the API, a task function, the agent function


def baseline_of(name: str) -> str:
    """The API is compared with the bare FastAPI app, every other function with the bare
    Powertools handler."""
    return API_BASELINE if name in ("api", API_BASELINE) else TASK_BASELINE


def _env() -> dict[str, str]:
    # the warm-up must write bytecode: Lambda runs precompiled assets (infra/build.py)
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {
        **inherited,
        "OPENAGENTS_MODE": "aws",
        "OPENAGENTS_ARTIFACT_BUCKET": "bench-artifacts",
        "OPENAGENTS_TABLE_NAME": "bench",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def _once(module: str) -> dict[str, float]:
    began = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own interpreter and probe
        [PYTHON, "-c", PROBE, module],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{module}: {done.stderr[-2000:]}")
    line = done.stdout.strip().splitlines()[-1]
    values: dict[str, float] = json.loads(line)
    values["process"] = wall
    return values


def _interpreter() -> float:
    began = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)  # noqa: S603
    return time.perf_counter() - began


def import_profile(module: str, top: int = 6) -> dict[str, float]:
    """Milliseconds spent in each top-level package's own module bodies (``-X importtime``
    self times, summed per package): where an import's time goes."""
    done = subprocess.run(  # noqa: S603 - our own interpreter
        [PYTHON, "-X", "importtime", "-c", f"import {module}"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        package = parts[2].strip().split(".")[0]
        totals[package] = totals.get(package, 0.0) + int(parts[0]) / 1000
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:top]
    return {name: round(value, 1) for name, value in ranked}


def package_sizes() -> dict[str, Any]:
    from infra.build import sizes

    build = ROOT / ".build"
    assets = sorted(
        [p for p in (build / "functions").glob("*") if p.is_dir()]
        + [p for p in (build / "layers").glob("*") if p.is_dir()]
    ) if build.is_dir() else []  # fmt: skip
    if not assets:
        return {"skipped": "no .build/ assets: run `make build` first"}
    found: dict[str, Any] = {}
    for asset in assets:
        unpacked, zipped = sizes(asset)
        kind = "function" if asset.parent.name == "functions" else "layer"
        found[f"{kind}:{asset.name}"] = {"unpackedBytes": unpacked, "zippedBytes": zipped}
    return found


def run(args: Any) -> dict[str, Any]:
    targets = modules()
    say(f"coldstart: warm-up (writes bytecode) for {len(targets)} modules")
    for module in targets.values():
        _once(module)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
    interpreter = []
    for _ in range(args.runs):  # interleaved, so machine load hits every module alike
        interpreter.append(_interpreter())
        for name, module in targets.items():
            runs[name].append(_once(module))
    results: dict[str, Any] = {}
    for name, samples in runs.items():
        results[name] = {
            key: round(statistics.median(s[key] for s in samples) * 1000, 1)
            for key in ("import", "init", "process", "cpuImport", "cpuInit")
        }
    for name, value in results.items():
        base = results[baseline_of(name)]
        cpu = value["cpuImport"] + value["cpuInit"]
        value["ratio"] = round(cpu / (base["cpuImport"] + base["cpuInit"]), 2)
        wall = value["import"] + value["init"]
        value["wallRatio"] = round(wall / (base["import"] + base["init"]), 2)
        value["baseline"] = baseline_of(name)
    profiled = {name: targets[name] for name in PROFILED if name in targets}
    return {
        "importProfileMs": {name: import_profile(module) for name, module in profiled.items()},
        "runs": args.runs,
        "interpreterMs": round(statistics.median(interpreter) * 1000, 1),
        "modulesMs": results,
        "packages": package_sizes(),
    }


def _met(met: bool) -> str:
    return "met" if met else "not met"


def rows(result: dict[str, Any]) -> list[list[str]]:
    table = []
    for name, v in result["modulesMs"].items():
        label = name if name.startswith("baseline") else f"{name} handler"
        goal = GOALS[v["baseline"]]
        verdict = "" if label == name else f"; goal <= {goal}x: {_met(v['ratio'] <= goal)}"
        table.append(
            [
                f"cold start: {label}",
                f"{v['cpuImport'] + v['cpuInit']:.0f} ms CPU ({v['ratio']}x "
                f"{SHORT[v['baseline']]})",
                f"import {v['cpuImport']:.0f} + init {v['cpuInit']:.0f} ms CPU{verdict}; wall "
                f"{v['import']:.0f} + {v['init']:.0f} ms ({v['wallRatio']}x), process "
                f"{v['process']:.0f} ms (bare interpreter {result['interpreterMs']:.0f} ms); "
                f"median of {result['runs']}",
            ]
        )
    for name, profile in result.get("importProfileMs", {}).items():
        heaviest = ", ".join(f"{k} {v:.0f}" for k, v in profile.items())
        table.append([f"cold start: {name} import by package", "ms (self)", heaviest])
    packages = result["packages"]
    if "skipped" in packages:
        table.append(["package sizes", "skipped", packages["skipped"]])
    else:
        for name, size in packages.items():
            table.append(
                [
                    f"package: {name}",
                    f"{size['unpackedBytes'] / 1e6:.2f} MB",
                    f"zipped {size['zippedBytes'] / 1e6:.2f} MB",
                ]
            )
    return table
