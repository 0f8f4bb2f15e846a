"""Stage the Lambda assets without Docker: ``python -m infra.build`` (``make build``).

Layout under ``.build/`` (asset root equals import root, so the handler string the CDK app uses
is the import path the tests use):

- ``functions/<name>/functions/__init__.py`` + ``functions/<name>/functions/<name>/**``
  for every ``functions/<name>/handler.py``;
- ``layers/core/python/openagents/**`` without ``openagents/local`` (the one-machine runtime);
- ``layers/deps/python/**``: the runtime dependencies from ``uv.lock`` (no dev, infra or
  ``local`` extra), installed for Lambda's arm64 Python 3.12 with
  ``pip --platform manylinux2014_aarch64 --only-binary=:all:``. Rebuilt only when the exported
  requirements change (``.build/deps-requirements.txt`` remembers the last ones);
- ``layers/deps-py313/python/**``: the same requirements for Python 3.13, the runtime of the
  durable agent function (``functions/agent``: Lambda durable functions need 3.13). Compiled
  wheels (pydantic-core and the like) are built per CPython minor version, so the 3.12 layer
  cannot serve it (``.build/deps-py313-requirements.txt`` remembers its requirements).

Everything is precompiled with a Python 3.12 interpreter into unchecked-hash ``.pyc`` files:
``/var/task`` and ``/opt`` are read-only, and the asset zips carry fixed timestamps, so
timestamp-checked bytecode would be recompiled in memory on every cold start. The agent
function, the core layer (which it shares) and the 3.13 deps layer are compiled by a Python 3.13
as well (``cpython-313`` files next to the ``cpython-312`` ones; ``AGENT_PYTHON`` names it).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUILD_DIR = ROOT / ".build"
LAMBDA_PYTHON = "3.12"
AGENT_PYTHON = "3.13"  # the durable agent function's runtime (infra/constructs/agent.py)
AGENT_FUNCTION = "agent"
PLATFORM = "manylinux2014_aarch64"
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")
CORE_EXCLUDED = ("local", "cli.py")  # the one-machine runtime and its CLI: moto, typer, uvicorn


def function_names(root: Path = ROOT) -> list[str]:
    """Every function folder that has code (a ``handler.py``)."""
    return sorted(p.parent.name for p in (root / "functions").glob("*/handler.py"))


def _copytree(src: Path, dest: Path, ignore: object = IGNORED) -> None:
    shutil.copytree(src, dest, ignore=ignore)  # type: ignore[arg-type]


def stage_function(name: str, build_dir: Path, root: Path = ROOT) -> Path:
    """``<build>/functions/<name>/`` holding ``functions/__init__.py`` and ``functions/<name>``."""
    asset = build_dir / "functions" / name
    shutil.rmtree(asset, ignore_errors=True)
    package = asset / "functions"
    package.mkdir(parents=True)
    shutil.copy2(root / "functions" / "__init__.py", package / "__init__.py")
    _copytree(root / "functions" / name, package / name)
    return asset


def stage_core(build_dir: Path, root: Path = ROOT) -> Path:
    """``<build>/layers/core/python/openagents`` without the one-machine runtime."""
    asset = build_dir / "layers" / "core"
    shutil.rmtree(asset, ignore_errors=True)

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = set(IGNORED(folder, names))
        if Path(folder) == root / "layers" / "core" / "openagents":
            skipped |= {n for n in names if n in CORE_EXCLUDED}
        return skipped

    _copytree(root / "layers" / "core" / "openagents", asset / "python" / "openagents", ignore)
    return asset


def stage_placeholder_deps(build_dir: Path) -> Path:
    """A tiny stand-in for the deps layer: synth and tests need a folder, not its contents."""
    asset = build_dir / "layers" / "deps-placeholder"
    (asset / "python").mkdir(parents=True, exist_ok=True)
    (asset / "python" / "README.txt").write_text(
        "Placeholder deps layer for synth in tests; `make build` builds the real one.\n"
    )
    return asset


def export_requirements(root: Path = ROOT) -> str:
    """Runtime requirements (pinned, hashed) from uv.lock: no dev/infra groups, no extras."""
    uv = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    result = subprocess.run(  # noqa: S603 - fixed arguments
        [
            uv,
            "export",
            "--frozen",
            "--no-default-groups",
            "--no-emit-project",
            "--quiet",
            "--color",
            "never",
        ],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


def _pip() -> list[str]:
    for candidate in (sys.executable, shutil.which("python3")):
        if (
            candidate
            and subprocess.run(  # noqa: S603
                [candidate, "-m", "pip", "--version"], capture_output=True, check=False
            ).returncode
            == 0
        ):
            return [candidate, "-m", "pip"]
    raise SystemExit("pip is needed to build the deps layer (python3 -m pip)")


def deps_layer_name(python: str = LAMBDA_PYTHON) -> str:
    """``deps`` for the functions' Python 3.12, ``deps-py313`` for the agent's 3.13."""
    return "deps" if python == LAMBDA_PYTHON else f"deps-py{python.replace('.', '')}"


def stage_deps(
    build_dir: Path, root: Path = ROOT, force: bool = False, python: str = LAMBDA_PYTHON
) -> Path:
    name = deps_layer_name(python)
    asset = build_dir / "layers" / name
    stamp = build_dir / f"{name}-requirements.txt"
    requirements = export_requirements(root)
    if (
        not force
        and (asset / "python").is_dir()
        and stamp.exists()
        and stamp.read_text() == requirements
    ):
        print(f"{name} layer: up to date", flush=True)
        return asset
    shutil.rmtree(asset, ignore_errors=True)
    stamp.unlink(missing_ok=True)
    (asset / "python").mkdir(parents=True)
    pending = build_dir / f"{name}-requirements.pending.txt"
    pending.write_text(requirements)
    print(f"{name} layer: pip install for {PLATFORM} / cp{python}", flush=True)
    installed = subprocess.run(  # noqa: S603 - fixed arguments
        [
            *_pip(),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--root-user-action=ignore",
            "--no-color",
            "--no-deps",  # uv.lock already resolved the full, pinned set
            "--platform",
            PLATFORM,
            "--implementation",
            "cp",
            "--python-version",
            python,
            "--only-binary=:all:",
            "--target",
            str(asset / "python"),
            "-r",
            str(pending),
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    noise = ("WARNING: Location", "WARNING: Running pip as")  # machine-wide pip.conf extras
    for line in (installed.stdout + installed.stderr).splitlines():
        if line.strip() and not line.startswith(noise):
            print(line, file=sys.stderr)
    if installed.returncode != 0:
        raise SystemExit(f"pip install for the {name} layer failed ({installed.returncode})")
    for junk in (asset / "python").glob("bin"):
        shutil.rmtree(junk)
    compile_bytecode(asset, python)
    pending.rename(stamp)
    return asset


def lambda_python(version: str = LAMBDA_PYTHON) -> str | None:
    """A CPython of ``version`` to compile bytecode the Lambda runtime will load (tags must
    match). ``LAMBDA_PYTHON`` (3.12) and ``AGENT_PYTHON`` (3.13) name one explicitly."""
    major, minor = (int(part) for part in version.split("."))
    variable = "LAMBDA_PYTHON" if version == LAMBDA_PYTHON else "AGENT_PYTHON"
    candidates: list[str] = []
    if os.environ.get(variable):
        candidates.append(os.environ[variable])
    if sys.version_info[:2] == (major, minor):
        candidates.append(sys.executable)
    pattern = f".pyenv/versions/{version}*/bin/python{version}"
    candidates += [str(p) for p in sorted(Path.home().glob(pattern))]
    which = shutil.which(f"python{version}")
    if which:
        candidates.append(which)
    for candidate in candidates:
        probe = subprocess.run(  # noqa: S603
            [candidate, "-c", f"import sys; print(sys.version_info[:2] == ({major}, {minor}))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


def compile_bytecode(asset: Path, version: str = LAMBDA_PYTHON) -> None:
    python = lambda_python(version)
    if python is None:
        variable = "LAMBDA_PYTHON" if version == LAMBDA_PYTHON else "AGENT_PYTHON"
        print(
            f"warning: no Python {version} found (set {variable}): {asset} ships "
            f"without {version} bytecode and each cold start compiles it",
            file=sys.stderr,
        )
        return
    subprocess.run(  # noqa: S603
        [python, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", str(asset)],
        check=True,
    )


def _files(asset: Path) -> Iterable[Path]:
    return (p for p in sorted(asset.rglob("*")) if p.is_file())


def sizes(asset: Path) -> tuple[int, int]:
    """(unpacked bytes, zipped bytes) of one asset folder."""
    unpacked = 0
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in _files(asset):
            unpacked += path.stat().st_size
            archive.write(path, path.relative_to(asset))
    return unpacked, buffer.tell()


def report(assets: dict[str, Path]) -> None:
    print(f"{'asset':<24}{'unpacked':>12}{'zipped':>12}  path")
    total = [0, 0]
    for name, asset in assets.items():
        unpacked, zipped = sizes(asset)
        total[0] += unpacked
        total[1] += zipped
        rel = asset.relative_to(ROOT) if asset.is_relative_to(ROOT) else asset
        print(f"{name:<24}{unpacked / 1e6:>10.1f}MB{zipped / 1e6:>10.1f}MB  {rel}")
    print(f"{'total':<24}{total[0] / 1e6:>10.1f}MB{total[1] / 1e6:>10.1f}MB  (Lambda limit: 250 MB")
    print(f"{'':<24}{'':>12}{'':>12}  unpacked per function, layers included)")


def build(build_dir: Path, *, with_deps: bool = True, force_deps: bool = False) -> dict[str, Path]:
    build_dir.mkdir(parents=True, exist_ok=True)
    assets: dict[str, Path] = {}
    for name in function_names():
        assets[f"function:{name}"] = stage_function(name, build_dir)
    assets["layer:core"] = stage_core(build_dir)
    for asset in list(assets.values()):
        compile_bytecode(asset)
    # the agent function runs on 3.13 (durable functions): its code and the core layer it
    # shares get 3.13 bytecode too
    for key in (f"function:{AGENT_FUNCTION}", "layer:core"):
        if key in assets:
            compile_bytecode(assets[key], AGENT_PYTHON)
    if with_deps:
        assets["layer:deps"] = stage_deps(build_dir, force=force_deps)
        agent_deps = stage_deps(build_dir, force=force_deps, python=AGENT_PYTHON)
        assets[f"layer:{deps_layer_name(AGENT_PYTHON)}"] = agent_deps
    return assets


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=DEFAULT_BUILD_DIR)
    parser.add_argument("--no-deps", action="store_true", help="skip the deps layer")
    parser.add_argument("--force-deps", action="store_true", help="rebuild the deps layer")
    parser.add_argument("--no-sizes", action="store_true", help="do not print package sizes")
    args = parser.parse_args(argv)
    assets = build(args.build_dir, with_deps=not args.no_deps, force_deps=args.force_deps)
    if not args.no_sizes:
        report(assets)


if __name__ == "__main__":
    main()
