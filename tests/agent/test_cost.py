"""A run's estimated cost: its usage at its model's configured price (OPENAGENTS_MODEL_PRICES)."""

from __future__ import annotations

import pytest
from openagents.agent.models.port import Usage
from openagents.agent.models.registry import build_registry
from openagents.settings import ModelPrice, Settings

from tests.agent.conftest import AgentApi
from tests.agent.test_stop_and_stream import wait_run

PRICE = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"model_prices": {"scripted/default": ModelPrice.model_validate(PRICE)}}
    )


def test_a_priced_model_gives_each_run_its_estimated_cost(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set([{"text": "Priced words, counted as tokens."}])
    assert agent_api.turn(session_id, chat_id, "say something").status == 202
    run = wait_run(agent_api, session_id, "completed", "failed")
    assert run["status"] == "completed", run
    usage = run["usage"]
    expected = (usage["inputTokens"] * 3.0 + usage["outputTokens"] * 15.0) / 1_000_000
    expected += (usage["cacheReadTokens"] * 0.3 + usage["cacheWriteTokens"] * 3.75) / 1_000_000
    assert usage["outputTokens"] > 0
    assert run["costUsd"] == pytest.approx(expected, abs=1e-6)


def test_cost_from_the_price_table_and_none_without_a_price(tmp_path: object) -> None:
    settings = Settings.model_validate(
        {
            "models": ("openai/priced", "openai/free"),
            "openai_base_url": "http://127.0.0.1:9/v1",
            "model_prices": {"openai/priced": {"input": 2, "output": 8}},
        }
    )
    registry = build_registry(settings)
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=10)
    assert registry.info("openai/priced").cost(usage) == pytest.approx(6.0)
    assert registry.info("openai/free").cost(usage) is None
    with pytest.raises(ValueError, match="input"):
        ModelPrice.model_validate({"output": 1})
