"""A generated workspace that looks like a coding session's: a source tree (compressible text
in nested packages), its git objects (one commit, loose objects) and binaries (random bytes,
which no compressor shrinks). Deterministic for a given size and file count."""

from __future__ import annotations

import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

KEYWORDS = [
    "def",
    "class",
    "return",
    "if",
    "elif",
    "else",
    "for",
    "while",
    "in",
    "not",
    "and",
    "or",
    "import",
    "from",
    "as",
    "with",
    "try",
    "except",
    "finally",
    "raise",
    "yield",
    "lambda",
    "None",
    "True",
    "False",
    "self",
    "async",
    "await",
    "pass",
    "break",
    "continue",
]
PUNCTUATION = ["(", ")", ":", ",", ".", "=", "==", "+", "-", "[", "]", "{", "}", "->", "#"]
TEXT_SHARE = 0.35  # of the target size; git objects and binaries make up the rest


@dataclass(frozen=True)
class Tree:
    files: int
    bytes: int


def tree(root: Path) -> Tree:
    """Regular files and their bytes below ``root`` (symlinks and folders not counted)."""
    files = total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                files += 1
                total += os.path.getsize(path)
    return Tree(files, total)


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = {
        "_".join(
            "".join(rng.choices(letters, k=rng.randint(3, 8))) for _ in range(rng.randint(1, 3))
        )
        for _ in range(3000)
    }
    words = KEYWORDS + PUNCTUATION + sorted(names) + [str(n) for n in range(200)]
    weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(words))]  # Zipf-like
    rng.shuffle(words)
    cumulative, total = [], 0.0
    for weight in weights:
        total += weight
        cumulative.append(total)
    return words, cumulative


def _source(rng: random.Random, words: list[str], cumulative: list[float], size: int) -> bytes:
    tokens = rng.choices(words, cum_weights=cumulative, k=max(8, size // 6))
    lines = []
    for start in range(0, len(tokens), 9):
        indent = "    " * rng.randint(0, 3)
        lines.append(indent + " ".join(tokens[start : start + 9]))
    return ("\n".join(lines) + "\n").encode()[:size]


def generate(root: Path, megabytes: int, source_files: int, seed: int = 7) -> Tree:
    """Fill ``root`` (which must exist) and commit the source tree; returns what it holds."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not secrets
    words, cumulative = _vocabulary(rng)
    target = megabytes * 1_000_000
    text_budget = int(target * TEXT_SHARE)
    average = max(256, text_budget // max(1, source_files))
    for index in range(source_files):
        folder = root / "src" / f"pkg{index // 400:03d}" / f"sub{index // 40 % 10}"
        if index % 40 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        size = rng.randint(average // 4, average * 7 // 4)
        (folder / f"module_{index:05d}.py").write_bytes(_source(rng, words, cumulative, size))
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@e",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@e"}  # fmt: skip
    # no automatic gc: it would pack the loose objects while a benchmark reads them
    steps = [["config", "gc.auto", "0"], ["add", "-A"], ["commit", "-qm", "generated"]]
    if not (root / ".git").exists():
        steps.insert(0, ["init", "-q", "-b", "main"])
    for args in steps:
        subprocess.run(["git", *args], cwd=root, env=env, check=True)  # noqa: S603, S607
    binaries = root / "assets"
    binaries.mkdir()
    remaining = target - tree(root).bytes
    index = 0
    while remaining > 0:
        size = min(remaining, rng.randint(1, 8) * 1_000_000)
        (binaries / f"blob_{index:03d}.bin").write_bytes(rng.randbytes(size))
        remaining -= size
        index += 1
    return tree(root)
