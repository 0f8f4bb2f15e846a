"""A stage with a GitHub App (``githubAppId`` + ``githubAppPrivateKeySecretArn``): the functions
that read GitHub credentials get the app's id and key setting and may read that one secret;
no other function may, and no secret is created for the key (it is GitHub's to issue)."""

from __future__ import annotations

from typing import Any

from tests.infra.conftest import GITHUB_APP_KEY, Synth

READS_GITHUB = ("functions.api.", "archiver", "provisioner", "agent")


def _policies_of(synth: Synth, function: dict[str, Any]) -> list[Any]:
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        policy["Properties"]["PolicyDocument"]
        for policy in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"].get("Roles", [])
    ]


def test_github_functions_get_the_app_and_only_they_read_its_key(github_app: Synth) -> None:
    seen = 0
    for logical, function in github_app.resources("AWS::Lambda::Function").items():
        handler = function["Properties"].get("Handler", "")
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        policies = str(_policies_of(github_app, function))
        if any(name in handler for name in READS_GITHUB):
            seen += 1
            assert variables["OPENAGENTS_GITHUB_APP_ID"] == "123456", logical
            assert variables["OPENAGENTS_GITHUB_APP_PRIVATE_KEY_SECRET_ARN"] == GITHUB_APP_KEY
            assert GITHUB_APP_KEY in policies, logical
        else:
            assert "OPENAGENTS_GITHUB_APP_ID" not in variables, logical
            assert GITHUB_APP_KEY not in policies, logical
    assert seen == 4


def test_the_key_is_read_with_get_secret_value_only(github_app: Synth) -> None:
    for policy in github_app.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement.get("Resource")
            if GITHUB_APP_KEY in (resources if isinstance(resources, list) else [resources]):
                assert statement["Action"] == "secretsmanager:GetSecretValue", statement


def test_no_secret_is_created_for_the_key(github_app: Synth, dev: Synth) -> None:
    assert len(github_app.resources("AWS::SecretsManager::Secret")) == len(
        dev.resources("AWS::SecretsManager::Secret")
    )


def test_without_an_app_no_function_names_one(dev: Synth) -> None:
    for logical, function in dev.resources("AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        assert not {k for k in variables if "GITHUB_APP" in k}, logical
