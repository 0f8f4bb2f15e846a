"""Packaging: asset root equals import root, the core layer leaves the one-machine runtime out,
and the deps layer's requirements carry no dev, infra or local-only packages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra import build


def test_function_asset_root_is_the_import_root(build_dir: Path) -> None:
    asset = build_dir / "functions" / "api"
    assert (asset / "functions" / "__init__.py").is_file()
    assert (asset / "functions" / "api" / "handler.py").is_file()
    assert not list(asset.rglob("__pycache__"))  # the tests' staging skips bytecode


def test_core_layer_has_no_local_runtime(build_dir: Path) -> None:
    core = build_dir / "layers" / "core" / "python" / "openagents"
    assert (core / "store" / "items.py").is_file()
    assert not (core / "local").exists()


def test_handler_imports_from_the_staged_assets_without_openagents_local(build_dir: Path) -> None:
    """What Lambda does: /var/task (function) and /opt/python (layers) on sys.path."""
    script = (
        "import functions.api.handler as h, openagents, importlib.util as u;"
        "print(h.__file__); print(openagents.__file__);"
        "print(u.find_spec('openagents.local'))"
    )
    paths = [build_dir / "functions" / "api", build_dir / "layers" / "core" / "python"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths)), "OPENAGENTS_MODE": "aws"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env,
        cwd=build_dir,
    )  # fmt: skip
    handler, core, local = out.stdout.split()
    assert handler.startswith(str(paths[0]))
    assert core.startswith(str(paths[1]))
    assert local == "None"


def test_deps_requirements_are_runtime_only() -> None:
    requirements = build.export_requirements()
    names = {
        line.split("==")[0].strip().lower()
        for line in requirements.splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    }
    assert {"fastapi", "mangum", "pynamodb", "pydantic", "aws-lambda-powertools"} <= names
    for excluded in (
        "moto",
        "typer",
        "uvicorn",
        "pytest",
        "ruff",
        "mypy",
        "aws-cdk-lib",
        "cfn-lint",
    ):
        assert excluded not in names
