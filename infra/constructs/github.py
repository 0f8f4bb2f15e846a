"""GitHub: the two secrets the API reads for the GitHub integration (docs/deploy.md, "GitHub").

- **Webhook secret** -- the HMAC key of ``POST /api/github/webhook``. Generated (48 characters);
  the platform team pastes its value into the GitHub webhook's *Secret* field.
- **Token secret** -- a GitHub token for PR lookups when a session is archived. Created blank
  (a single space: the app strips the value, and a blank token makes it skip PR refreshes with
  an "empty token" warning); the platform team puts a fine-grained token in it.

A stage may use existing secrets instead (context ``githubWebhookSecretArn`` /
``githubTokenSecretArn``): nothing is created then.

- **GitHub App private key** -- only an existing secret (``githubAppPrivateKeySecretArn``, with
  ``githubAppId``): the key is GitHub's to issue. When set, the functions that read the token
  read it too, and prefer the app's installation tokens.
"""

from __future__ import annotations

from aws_cdk import SecretValue
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import StageConfig
from infra.nag import acknowledge

BLANK_TOKEN = " "  # noqa: S105 - not a secret: the app strips it ("no token yet")


class GitHub(Construct):
    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(scope, id)
        self.webhook_secret = self._secret(
            "WebhookSecret",
            config.github_webhook_secret_arn,
            description="Open Agents: HMAC key of the GitHub webhook (POST /api/github/webhook); "
            "paste it into the webhook's Secret field on GitHub",
            generate=True,
        )
        self.token_secret = self._secret(
            "TokenSecret",
            config.github_token_secret_arn,
            description="Open Agents: GitHub token for PR lookups (a fine-grained token with "
            "Pull requests: read); blank until the platform team fills it",
            generate=False,
        )
        key_arn = config.github_app_private_key_secret_arn
        self.app_key_secret: secretsmanager.ISecret | None = (
            secretsmanager.Secret.from_secret_complete_arn(self, "AppPrivateKey", key_arn)
            if key_arn
            else None
        )

    def _secret(
        self, id: str, arn: str | None, *, description: str, generate: bool
    ) -> secretsmanager.ISecret:
        if arn:
            return secretsmanager.Secret.from_secret_complete_arn(self, id, arn)
        secret = secretsmanager.Secret(
            self,
            id,
            description=description,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True
            )
            if generate
            else None,
            secret_string_value=None if generate else SecretValue.unsafe_plain_text(BLANK_TOKEN),
        )
        acknowledge(
            secret,
            "SMG4",
            "Rotation needs the other side changed at the same time (GitHub's webhook "
            "configuration, or a token issued by GitHub): the platform team rotates it by hand "
            "(docs/deploy.md, 'GitHub')",
        )
        return secret

    @property
    def secret_arns(self) -> dict[str, str]:
        """The settings the API reads them from (``openagents.settings``)."""
        return {
            "OPENAGENTS_GITHUB_WEBHOOK_SECRET_ARN": self.webhook_secret.secret_arn,
            "OPENAGENTS_GITHUB_TOKEN_SECRET_ARN": self.token_secret.secret_arn,
        }
