"""The stack: composes the capability constructs, tags them and exports what people need.
It defines no resources of its own."""

from __future__ import annotations

from aws_cdk import CfnOutput, Environment, Stack, Tags
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.agent import Agent
from infra.constructs.api import Api
from infra.constructs.buckets import AccessLogs
from infra.constructs.control_plane import ControlPlane, SecretSetting
from infra.constructs.data import Data
from infra.constructs.events import Events
from infra.constructs.function import Layers
from infra.constructs.github import GitHub
from infra.constructs.identity import Identity
from infra.constructs.outbox import Outbox
from infra.constructs.previews import Previews
from infra.constructs.protection import Protection
from infra.constructs.sandbox import Sandbox
from infra.constructs.web import Web
from infra.constructs.workflows import Workflows

# Output keys (stable logical ids): docs/deploy.md and scripts read them.
OUTPUTS = {
    "AppUrl": "the SPA, and the API under /api/*",
    "ApiUrl": "the HTTP API's own endpoint (execute-api)",
    "TableName": "the DynamoDB table",
    "ArtifactBucketName": "large message bodies, bundles, snapshots",
    "WebBucketName": "upload the built SPA here",
    "DistributionId": "CloudFront distribution (for invalidations)",
    "EventBusName": "domain events",
    "GitHubWebhookUrl": "the GitHub webhook's payload URL (content type application/json)",
    "GitHubWebhookSecretArn": "HMAC key of the GitHub webhook (paste it into GitHub)",
    "GitHubTokenSecretArn": "GitHub token for PR lookups (put a fine-grained token in it)",
    "RuleDeadLettersQueueUrl": "events the rules could not deliver (archive finalisation)",
    "OutboxDeadLettersQueueUrl": "outbox batches the pipe could not publish (stream coordinates)",
    "SandboxClusterName": "ECS cluster the sandbox tasks run in",
    "SandboxSecurityGroupId": "the sandboxes' security group (admit it on an egress proxy)",
    "ProvisioningStateMachineArn": "the provisioning workflow",
    "PreviewDomain": "previews are https://<port>-<session>.<this> (when previewDomain is set)",
    "UserPoolId": "Cognito user pool (when the stack creates it)",
    "UserPoolClientId": "the SPA's public client id (when the stack creates it)",
    "HostedUiUrl": "Cognito hosted UI base URL (when the stack creates it)",
}


class OpenAgentsStack(Stack):
    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        env = Environment(account=config.account, region=config.region)
        super().__init__(scope, id, env=env, description="Open Agents on AWS: control plane")
        self.config = config
        Tags.of(self).add("project", "openagents")
        Tags.of(self).add("stage", config.stage)

        access_logs = AccessLogs(self, "AccessLogs", config=config)
        self.data = Data(self, "Data", config=config, access_logs=access_logs.bucket)
        self.events = Events(self, "Events", config=config)
        web_acl_arn = config.web_acl_arn
        if config.protection:
            self.protection = Protection(self, "Protection", config=config)
            web_acl_arn = self.protection.arn
        self.web = Web(
            self, "Web", config=config, access_logs=access_logs.bucket, web_acl_arn=web_acl_arn
        )
        self.identity = Identity(
            self, "Identity", config=config, app_urls=[self.web.url, *config.spa_origins]
        )
        layers = Layers(self, "Layers", config=config)
        self.outbox = Outbox(
            self,
            "Outbox",
            config=config,
            table=self.data.table,
            bus=self.events.bus,
            layers=layers,
        )
        self.sandbox = Sandbox(
            self,
            "Sandbox",
            config=config,
            access_logs=access_logs.bucket,
            artifacts=self.data.artifacts,
        )
        self.github = GitHub(self, "GitHub", config=config)
        control_plane = ControlPlane(
            self,
            config=config,
            data=self.data,
            sandbox=self.sandbox,
            events=self.events,
            secrets={
                "github-webhook": SecretSetting(
                    self.github.webhook_secret, "OPENAGENTS_GITHUB_WEBHOOK_SECRET_ARN"
                ),
                "github-token": SecretSetting(
                    self.github.token_secret, "OPENAGENTS_GITHUB_TOKEN_SECRET_ARN"
                ),
                "origin": SecretSetting(self.web.origin_secret, "OPENAGENTS_ORIGIN_SECRET_ARN"),
                **self._github_app(config),
            },
        )
        self.workflows = Workflows(
            self, "Workflows", config=config, layers=layers, control_plane=control_plane
        )
        self.api = Api(
            self,
            "Api",
            config=config,
            layers=layers,
            authorizer=self.identity.authorizer,
            control_plane=control_plane,
        )
        self.agent = Agent(self, "Agent", config=config, control_plane=control_plane)
        self.agent.grant_turns(self.api.function)
        self.events.add_schedules(self.workflows.functions)
        self.events.add_rules(self.workflows.functions)
        self.web.add_api(self.api.domain_name)
        self.previews: Previews | None = None
        if config.previews:
            self.previews = Previews(
                self,
                "Previews",
                config=config,
                control_plane=control_plane,
                access_logs=access_logs.bucket,
                app_url=self.web.url,
            )
            # the API signs the links the gateway serves
            self.api.function.function.add_environment(
                "OPENAGENTS_PREVIEW_DOMAIN", self.previews.domain
            )
        self._outputs()

    def _github_app(self, config: StageConfig) -> dict[str, SecretSetting]:
        """The GitHub App's key and id, for the functions that read GitHub credentials."""
        if self.github.app_key_secret is None or not config.github_app_id:
            return {}
        setting = SecretSetting(
            self.github.app_key_secret,
            "OPENAGENTS_GITHUB_APP_PRIVATE_KEY_SECRET_ARN",
            {"OPENAGENTS_GITHUB_APP_ID": config.github_app_id},
        )
        return {"github-app": setting}

    def _output(self, key: str, value: str | None) -> None:
        if value is not None:
            CfnOutput(self, key, value=value, description=OUTPUTS[key]).override_logical_id(key)

    def _outputs(self) -> None:
        self._output("AppUrl", self.web.url)
        self._output("ApiUrl", self.api.url)
        self._output("TableName", self.data.table.table_name)
        self._output("ArtifactBucketName", self.data.artifacts.bucket_name)
        self._output("WebBucketName", self.web.bucket.bucket_name)
        self._output("DistributionId", self.web.distribution.distribution_id)
        self._output("EventBusName", self.events.bus.event_bus_name)
        self._output("GitHubWebhookUrl", f"{self.web.url}/api/github/webhook")
        self._output("GitHubWebhookSecretArn", self.github.webhook_secret.secret_arn)
        self._output("GitHubTokenSecretArn", self.github.token_secret.secret_arn)
        if self.events.dead_letters is not None:
            self._output("RuleDeadLettersQueueUrl", self.events.dead_letters.queue_url)
        self._output("OutboxDeadLettersQueueUrl", self.outbox.dead_letters.queue_url)
        self._output("SandboxClusterName", self.sandbox.cluster.cluster_name)
        self._output("SandboxSecurityGroupId", self.sandbox.sandbox_sg.security_group_id)
        self._output(
            "ProvisioningStateMachineArn",
            self.workflows.state_machines["provisioning"].state_machine_arn,
        )
        if self.previews is not None:
            self._output("PreviewDomain", self.previews.domain)
        identity = self.identity
        if identity.user_pool is not None and identity.client is not None:
            self._output("UserPoolId", identity.user_pool.user_pool_id)
            self._output("UserPoolClientId", identity.client.user_pool_client_id)
            self._output("HostedUiUrl", identity.hosted_ui_url)
