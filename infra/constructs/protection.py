"""Protection (stage toggle): a CloudFront-scope WAF web ACL in front of SPA and API.

Rules, in order:
1. ``RateLimit``: block an IP above ``RATE_LIMIT`` requests per 5 minutes.
2. ``BotControl``: AWS bot-control managed rules (common level), scoped down to
   ``POST /api/sessions`` (the only route with a bot check) and set to *count*: it labels, the
   app decides. Blocking here would also refuse legitimate agents and CLIs on every route.
3. ``BotHeader``: a request carrying a bot-control bot label gets the
   ``x-amzn-waf-bot-category`` header (WAF prefixes ``x-amzn-waf-``), which the API's
   ``WafLabelPolicy`` (``OPENAGENTS_WAF_BOT_HEADER``) turns into 403 for human identities.

HTTP APIs cannot have a web ACL of their own, so the ACL sits on CloudFront, which must be in
us-east-1 (see ``StageConfig`` and docs/deploy.md).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.function import removal, retention

RATE_LIMIT = 2000  # requests per IP per 5 minutes
BOT_LABELS = "awswaf:managed:aws:bot-control:bot:"
BOT_HEADER = "bot-category"  # sent to the origin as x-amzn-waf-bot-category
BOT_SCOPE_PATH = "/api/sessions"


def _visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
    )


def _byte_match(field: str, value: str) -> wafv2.CfnWebACL.StatementProperty:
    to_match = (
        wafv2.CfnWebACL.FieldToMatchProperty(method={})
        if field == "method"
        else wafv2.CfnWebACL.FieldToMatchProperty(uri_path={})
    )
    return wafv2.CfnWebACL.StatementProperty(
        byte_match_statement=wafv2.CfnWebACL.ByteMatchStatementProperty(
            field_to_match=to_match,
            positional_constraint="EXACTLY",
            search_string=value,
            text_transformations=[
                wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
            ],
        )
    )


class Protection(Construct):
    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(scope, id)
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="CLOUDFRONT",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=_visibility(f"openagents-{config.stage}"),
            rules=[self._rate_rule(), self._bot_control_rule(), self._bot_header_rule()],
        )
        self._build_logging(config)

    @property
    def arn(self) -> str:
        return self.web_acl.attr_arn

    @staticmethod
    def _rate_rule() -> wafv2.CfnWebACL.RuleProperty:
        return wafv2.CfnWebACL.RuleProperty(
            name="RateLimit",
            priority=0,
            action=wafv2.CfnWebACL.RuleActionProperty(block={}),
            statement=wafv2.CfnWebACL.StatementProperty(
                rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                    limit=RATE_LIMIT, aggregate_key_type="IP", evaluation_window_sec=300
                )
            ),
            visibility_config=_visibility("RateLimit"),
        )

    @staticmethod
    def _bot_control_rule() -> wafv2.CfnWebACL.RuleProperty:
        scope_down = wafv2.CfnWebACL.StatementProperty(
            and_statement=wafv2.CfnWebACL.AndStatementProperty(
                statements=[_byte_match("method", "POST"), _byte_match("uri", BOT_SCOPE_PATH)]
            )
        )
        return wafv2.CfnWebACL.RuleProperty(
            name="BotControl",
            priority=1,
            override_action=wafv2.CfnWebACL.OverrideActionProperty(count={}),
            statement=wafv2.CfnWebACL.StatementProperty(
                managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                    vendor_name="AWS",
                    name="AWSManagedRulesBotControlRuleSet",
                    managed_rule_group_configs=[
                        wafv2.CfnWebACL.ManagedRuleGroupConfigProperty(
                            aws_managed_rules_bot_control_rule_set=wafv2.CfnWebACL.AWSManagedRulesBotControlRuleSetProperty(
                                inspection_level="COMMON"
                            )
                        )
                    ],
                    scope_down_statement=scope_down,
                )
            ),
            visibility_config=_visibility("BotControl"),
        )

    @staticmethod
    def _bot_header_rule() -> wafv2.CfnWebACL.RuleProperty:
        return wafv2.CfnWebACL.RuleProperty(
            name="BotHeader",
            priority=2,
            action=wafv2.CfnWebACL.RuleActionProperty(
                count=wafv2.CfnWebACL.CountActionProperty(
                    custom_request_handling=wafv2.CfnWebACL.CustomRequestHandlingProperty(
                        insert_headers=[
                            wafv2.CfnWebACL.CustomHTTPHeaderProperty(name=BOT_HEADER, value="bot")
                        ]
                    )
                )
            ),
            statement=wafv2.CfnWebACL.StatementProperty(
                label_match_statement=wafv2.CfnWebACL.LabelMatchStatementProperty(
                    scope="NAMESPACE", key=BOT_LABELS
                )
            ),
            visibility_config=_visibility("BotHeader"),
        )

    def _build_logging(self, config: StageConfig) -> None:
        # WAF only logs to groups named aws-waf-logs-*; the Authorization header is redacted
        name = f"aws-waf-logs-openagents-{config.stage}-{Aws.ACCOUNT_ID}"
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=name,
            retention=retention(config),
            removal_policy=removal(config),
        )
        wafv2.CfnLoggingConfiguration(
            self,
            "Logging",
            resource_arn=self.web_acl.attr_arn,
            # the ARN without the trailing ":*" that the log group's Arn attribute carries
            log_destination_configs=[
                Stack.of(self).format_arn(
                    service="logs",
                    resource="log-group",
                    resource_name=name,
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
            redacted_fields=[
                wafv2.CfnLoggingConfiguration.FieldToMatchProperty(
                    single_header={"Name": "authorization"}
                )
            ],
        )
