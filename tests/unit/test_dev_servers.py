"""Dev server detection: the package manager from the lock file, the framework from the
dependencies, Python apps and static sites; the launch script quotes what it is given."""

from __future__ import annotations

import json

import pytest
from openagents.domain.dev_servers import (
    DevServerPlan,
    NoDevServer,
    custom_plan,
    kept_plan,
    launch_script,
    node_plan,
    python_plan,
)


def manifest(deps: dict[str, str], scripts: dict[str, str] | None = None) -> str:
    return json.dumps({"scripts": scripts or {"dev": "x"}, "devDependencies": deps})


@pytest.mark.parametrize(
    ("lock", "deps", "expected"),
    [
        ("pnpm-lock.yaml", {"vite": "6"}, "pnpm run dev --port 5173 --host 127.0.0.1 --strictPort"),
        ("package-lock.json", {"next": "15"}, "npm run dev -- -p 3000 -H 127.0.0.1"),
        ("bun.lock", {"astro": "5"}, "bun run dev --port 4321 --host 127.0.0.1"),
        ("yarn.lock", {"react-scripts": "5"}, "yarn run dev"),
    ],
)
def test_the_package_manager_and_framework_are_detected(
    lock: str, deps: dict[str, str], expected: str
) -> None:
    plan = node_plan(manifest(deps), {"package.json", lock}, None, has_modules=False)
    assert plan.command == expected
    assert plan.install == f"{expected.split()[0]} install"


def test_an_installed_project_on_a_chosen_port_skips_the_install() -> None:
    plan = node_plan(manifest({"vite": "6"}, {"start": "vite"}), {"package.json"}, 4000, True)
    assert plan == DevServerPlan(
        "npm run start -- --port 4000 --host 127.0.0.1 --strictPort", 4000, "vite", None
    )


@pytest.mark.parametrize(
    "text", ["{", "[]", json.dumps({"scripts": {"build": "x"}}), "x" * (2 << 20)]
)
def test_a_package_json_without_a_dev_script_is_refused(text: str) -> None:
    with pytest.raises(NoDevServer):
        node_plan(text, {"package.json"}, None, True)


def test_python_projects_and_static_sites() -> None:
    assert python_plan({"manage.py"}, "", None).framework == "django"
    fastapi = python_plan({"main.py", "requirements.txt"}, "fastapi==0.1\nuvicorn", 9000)
    assert fastapi.command.startswith("python3 -m uvicorn main:app --host 127.0.0.1 --port 9000")
    assert python_plan({"app.py"}, "Flask>=3", None).framework == "flask"
    assert python_plan({"index.html"}, "", None).port == 8000
    with pytest.raises(NoDevServer):
        python_plan({"README.md"}, "", None)
    with pytest.raises(NoDevServer):
        custom_plan("a\nb", None)


def test_the_launch_script_quotes_the_command_and_folder() -> None:
    script = launch_script(custom_plan("echo '$(x)'; run", 3000), "my dir", "/tmp/openagents")
    assert "cd 'my dir'" in script
    assert "setsid nohup sh -c" in script
    assert "$(x)" in script  # inside single quotes, never expanded by our shell


def test_a_kept_record_is_read_back_as_the_sandboxs_word() -> None:
    record = json.dumps({"command": "npm run dev", "port": 3000, "cwd": "app"})
    assert kept_plan(record) == (custom_plan("npm run dev", 3000), "app")
    for bad in ("", "{", json.dumps({"command": "x", "port": True, "cwd": "."}),
                json.dumps({"command": "a\nb", "port": 3000, "cwd": "."}),
                json.dumps({"command": "x", "port": 70000, "cwd": "."})):  # fmt: skip
        assert kept_plan(bad) is None
    script = launch_script(custom_plan("x", 3000), ".", "/tmp/openagents")
    assert ".git/openagents/dev-server.json" in script
