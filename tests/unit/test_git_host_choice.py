"""Which GitHub credentials the composition root hands the GitHub adapter on AWS: a GitHub App's
installation tokens when its id and private key are both set, else the token, else no host.
Nothing is read from Secrets Manager until a token is needed (first use)."""

from __future__ import annotations

from typing import Any

import pytest
from openagents import composition
from openagents.git.github import GitHubHost, _AppTokens, _StaticTokens
from openagents.settings import Mode, Settings

KEY_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:github-app-key-AbCdEf"
TOKEN_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:github-token-AbCdEf"


def _host(**github: Any) -> GitHubHost | None:
    settings = Settings(mode=Mode.AWS, artifact_bucket="bucket", **github)
    host = composition._git_host(settings)
    assert host is None or isinstance(host, GitHubHost)
    return host


def test_the_app_is_preferred_over_the_token() -> None:
    host = _host(
        github_app_id="123456",
        github_app_private_key_secret_arn=KEY_ARN,
        github_token_secret_arn=TOKEN_ARN,
    )
    assert host is not None
    assert isinstance(host._tokens, _AppTokens)


def test_the_token_alone_is_used() -> None:
    host = _host(github_token_secret_arn=TOKEN_ARN)
    assert host is not None
    assert isinstance(host._tokens, _StaticTokens)


@pytest.mark.parametrize(
    "half", [{"github_app_id": "123456"}, {"github_app_private_key_secret_arn": KEY_ARN}]
)
def test_half_an_app_falls_back_to_the_token(half: dict[str, str]) -> None:
    host = _host(github_token_secret_arn=TOKEN_ARN, **half)
    assert host is not None
    assert isinstance(host._tokens, _StaticTokens)


def test_no_credentials_no_host() -> None:
    assert _host() is None
    assert _host(github_app_id="123456") is None
