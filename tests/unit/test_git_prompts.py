"""The git routes' words: commit messages and pull requests read back from a model's answer,
the useful lines of a failing check's log, the fix prompt's caps, and the scripted model's
generation keys (answered without touching the turn's responses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openagents.agent.models.port import Message, ModelError, ModelRequest, TextDelta
from openagents.agent.models.scripted import ScriptedModel
from openagents.git import CheckReport, CheckRun
from openagents.services import git_prompts as prompts


def test_a_commit_message_is_a_subject_and_a_body() -> None:
    assert prompts.commit_message("```\nfeat: x\n\nWhy it changed.\n```") == (
        "feat: x",
        "Why it changed.",
    )
    subject, body = prompts.commit_message('"' + "fix: " + "y" * 100 + '"')
    assert len(subject) == prompts.MAX_SUBJECT
    assert subject.endswith("…")
    assert body == ""
    with pytest.raises(prompts.GenerationUnusable):
        prompts.commit_message("  \n\n ")


def test_a_pull_request_is_read_from_json_only() -> None:
    answer = 'Sure:\n```json\n{"title": "feat:  greet\\nyou", "body": "## Summary\\\\nHi"}\n```'
    assert prompts.pull_request(answer) == ("feat: greet you", "## Summary\nHi")
    for bad in ("no json here", '{"title": ""}', '{"title": "t", "body": 3}', "{not json}"):
        with pytest.raises(prompts.GenerationUnusable):
            prompts.pull_request(bad)


def test_the_diff_a_prompt_holds_is_capped_and_says_so() -> None:
    prompt = prompts.commit_prompt("+" * (prompts.MAX_DIFF_CHARS + 10))
    assert "[diff cut: 10 more characters not shown]" in prompt
    assert len(prompt) < prompts.MAX_DIFF_CHARS + 1000
    assert "cut" not in prompts.commit_prompt("+small")


def test_useful_lines_keep_the_errors_and_their_context() -> None:
    log = "\n".join(
        [f"2026-01-01T00:00:00.0000000Z \x1b[32mok {i}\x1b[0m" for i in range(100)]
        + ["Traceback (most recent call last):", '  File "a.py", line 3', "ValueError: bad"]
        + [f"tail {i}" for i in range(100)]
    )
    kept = prompts.useful_lines(log).splitlines()
    assert "Traceback (most recent call last):" in kept
    assert "ValueError: bad" in kept
    assert "ok 99" in kept  # context before
    assert "ok 10" not in kept
    assert kept[0] == "…" or kept[0].startswith("ok")
    assert all("\x1b" not in line and "2026-" not in line for line in kept)
    assert prompts.useful_lines("a\nb\nc", max_lines=2) == "b\nc"  # no error: the tail
    many = "\n".join(f"error {i}" for i in range(1000))
    assert len(prompts.useful_lines(many).splitlines()) == prompts.MAX_LOG_LINES


def test_the_fix_prompt_is_capped_per_check_and_in_all() -> None:
    big = CheckReport(CheckRun(1, "tests", "completed", "failure"), "", (), "error\n" * 50_000)
    prompt = prompts.fix_prompt([big] * 5, pr_number=3, branch="agent/x")
    assert prompt.check_names == ("tests",) * 5
    assert len(prompt.text) <= prompts.MAX_FIX_CHARS + 100
    assert "pull request #3 (branch agent/x)" in prompt.text


def request(purpose: str) -> ModelRequest:
    return ModelRequest("", (Message.user("x"),), purpose=purpose)  # type: ignore[arg-type]


def text_of(model: ScriptedModel, purpose: str) -> str:
    return "".join(e.text for e in model.stream(request(purpose)) if isinstance(e, TextDelta))


def test_the_scripted_model_answers_generations_from_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": [{"text": "turn"}]}))
    model = ScriptedModel(path)
    for purpose in ("commit_message", "pull_request"):
        with pytest.raises(ModelError, match=r"no commitMessage|no pullRequest"):
            text_of(model, purpose)
    script = {
        "responses": [{"text": "turn"}],
        "commitMessage": "feat: a\n\nbody",
        "pullRequest": {"title": "T", "body": "B"},
    }
    path.write_text(json.dumps(script))
    assert text_of(model, "commit_message") == "feat: a\n\nbody"
    assert json.loads(text_of(model, "pull_request")) == {"title": "T", "body": "B"}
    assert text_of(model, "turn") == "turn"  # the turn's step 0 is still its first response
    path.write_text(json.dumps({**script, "pullRequest": {"title": "T"}}))
    with pytest.raises(ModelError, match="pullRequest"):
        text_of(model, "pull_request")
