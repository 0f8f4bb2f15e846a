"""Which model a new chat gets, and which models are offered, follow what is configured."""

from __future__ import annotations

from pathlib import Path

from openagents.settings import Mode, Settings


def test_a_new_chat_gets_the_first_offered_model_when_no_default_is_set(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    assert Settings(models=("openai/llama3",)).new_chat_model == "openai/llama3"
    scripted = Settings(mode=Mode.LOCAL, scripted_model_file=script)
    assert scripted.offered_models == ("scripted/default",)
    assert scripted.new_chat_model == "scripted/default"


def test_an_explicit_default_wins_and_nothing_configured_keeps_the_default() -> None:
    chosen = Settings(models=("openai/llama3",), default_model_id="bedrock/claude")
    assert chosen.new_chat_model == "bedrock/claude"
    assert Settings(models=()).new_chat_model == Settings().default_model_id


def test_the_scripted_model_is_never_offered_on_aws(tmp_path: Path) -> None:
    aws = Settings(mode=Mode.AWS, scripted_model_file=tmp_path / "s.json", models=("bedrock/x",))
    assert aws.offered_models == ("bedrock/x",)
