"""Typed stage configuration, read once from CDK context (``cdk.json`` or ``-c key=value``).

| context key | default | meaning |
|---|---|---|
| ``stage`` | ``dev`` | names the stack ``OpenAgents-<stage>`` and tags every resource |
| ``prod`` | ``false`` | RETAIN on data, deletion protection, longer log retention, MFA required |
| ``protection`` | ``false`` | create a CloudFront-scope WAF web ACL (stack must be in us-east-1) |
| ``webAclArn`` | - | attach an existing CloudFront-scope web ACL instead (any region) |
| ``jwtIssuer`` / ``jwtAudience`` | - | trust an existing OIDC issuer instead of creating Cognito |
| ``spaOrigins`` | - | extra browser origins allowed by CORS (comma-separated), e.g. a dev server |
| ``githubWebhookSecretArn`` | - | an existing secret as the webhook's HMAC key (else created) |
| ``githubTokenSecretArn`` | - | an existing secret holding a GitHub token (else a placeholder) |
| ``githubAppId`` | - | a GitHub App's id: with ``githubAppPrivateKeySecretArn``, its installation
  tokens replace the token |
| ``githubAppPrivateKeySecretArn`` | - | an existing secret holding the GitHub App's PEM key |
| ``sandboxStorage`` | ``ebs`` | workspaces on managed EBS volumes, or ``efs`` (a file system) |
| ``sandboxCpu`` | ``2048`` | CPU units of one sandbox task (arm64 Fargate) |
| ``sandboxMemoryMiB`` | ``4096`` | memory of one sandbox task |
| ``sandboxVolumeGiB`` | ``20`` | size of a new sandbox's EBS volume |
| ``sandboxSubnetMask`` | ``20`` | prefix length of the subnets the sandboxes run in (one per AZ):
  every running sandbox takes one address; checked at synth against ``maxSessions`` |
| ``maxSessions`` | ``1000`` | running sandboxes the stage must hold at once (synth check only) |
| ``natGateways`` | ``1`` (prod: ``2``) | NAT gateways for the private subnets (one per AZ is HA) |
| ``sandboxEgress`` | ``open`` | sandboxes reach the internet (NAT), ``none`` (only the endpoints
  the task needs), or ``proxy`` (those and ``sandboxEgressProxy``) |
| ``sandboxEgressProxy`` | - | ``http://host:port`` of an allow-listing proxy (``proxy``) |
| ``sandboxEgressProxyCidr`` | the VPC's | where the proxy is, for the security group |
| ``containerInsights`` | ``false`` (prod: ``true``) | Container Insights on the sandbox cluster |
| ``agentModels`` | - | Bedrock model or inference-profile ids the agent may call (comma-separated,
  ``bedrock/`` prefix optional); the first is the default model; none: no model offered |
| ``agentTurnTimeoutSeconds`` | ``86400`` | a durable agent turn's execution timeout |
| ``buildDir`` | ``.build`` | where ``make build`` staged the assets |
| ``depsLayerDir`` | ``<buildDir>/layers/deps`` | the deps layer (tests: a tiny placeholder) |
| ``agentDepsLayerDir`` | ``<buildDir>/layers/deps-py313`` (with ``depsLayerDir``: that one) |
  the agent function's Python 3.13 deps layer |
| ``previewDomain`` | - | previews at ``https://<port>-<session>.<previewDomain>``: a wildcard
  certificate, DNS, an ALB and the preview gateway (``constructs/previews.py``); unset: off |
| ``previewHostedZoneId`` | - | the Route 53 public hosted zone the preview records go in (with
  ``previewDomain``) |
| ``previewHostedZoneName`` | ``previewDomain`` less its first label | that zone's name |
| ``previewMaxTasks`` | ``4`` | the preview gateway's most tasks (autoscaling on CPU; at least 1) |
| ``account`` / ``region`` | ``CDK_DEFAULT_*`` | the target; unset: env-agnostic |
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from constructs import Node

ROOT = Path(__file__).resolve().parent.parent
STAGE_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
WAF_REGION = "us-east-1"  # CloudFront-scope web ACLs live in us-east-1, whatever the stack's
FARGATE_CPU = (256, 512, 1024, 2048, 4096, 8192, 16384)  # valid Fargate task CPU units
MAX_AZS = 2
VPC_CIDR = "10.40.0.0/16"
PUBLIC_SUBNET_MASK = 24
CONTROL_PLANE_SUBNET_MASK = 20  # the private subnets when sandboxes have their own
AWS_RESERVED_ADDRESSES = 5  # per subnet: network, router, DNS, future, broadcast
# addresses per AZ the control plane's Lambda ENIs may take in a subnet it shares with the
# sandboxes (Hyperplane ENIs: one per security group and subnet, a handful; kept generous)
CONTROL_PLANE_RESERVE = 32
MIN_SUBNET_MASK, MAX_SUBNET_MASK = 16, 26
SANDBOX_EGRESS = ("open", "none", "proxy")
PROXY_URL = re.compile(r"^http://(?P<host>[A-Za-z0-9.-]+):(?P<port>\d{1,5})/?$")
CIDR = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$")
IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
# a Bedrock foundation-model id (``anthropic.claude-...-v1:0``) or a system inference profile's
# (``us.anthropic.claude-...``): the profile's is the model id behind a geography prefix
BEDROCK_MODEL_ID = re.compile(r"^[a-z0-9-]+\.[A-Za-z0-9._:-]+$")
INFERENCE_PROFILE_PREFIXES = ("us", "eu", "apac", "us-gov", "jp", "au", "ca", "global")
MAX_TURN_TIMEOUT = 31_622_400  # a durable execution's longest timeout (366 days)
DOMAIN = re.compile(r"^(?=.{1,200}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
HOSTED_ZONE_ID = re.compile(r"^Z[A-Z0-9]{1,32}$")
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+$")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def _list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


def _optional(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _int(value: Any, default: int) -> int:
    return default if value in (None, "") else int(value)


def _allocated_end(masks: list[int]) -> int:
    """Where sequential, aligned allocation of subnets of these prefix lengths ends (offset in
    addresses from the VPC's start), as the CDK's ``Vpc`` allocates them."""
    end = 0
    for mask in masks:
        size = 1 << (32 - mask)
        end = -(-end // size) * size + size
    return end


@dataclass(frozen=True)
class StageConfig:
    stage: str = "dev"
    prod: bool = False
    protection: bool = False
    web_acl_arn: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    spa_origins: tuple[str, ...] = ()
    github_webhook_secret_arn: str | None = None
    github_token_secret_arn: str | None = None
    github_app_id: str | None = None
    github_app_private_key_secret_arn: str | None = None
    sandbox_storage: str = "ebs"
    sandbox_cpu: int = 2048
    sandbox_memory_mib: int = 4096
    sandbox_volume_gib: int = 20
    sandbox_subnet_mask: int = 20
    max_sessions: int = 1000
    nat_gateways: int | None = None  # None: 1, or one per AZ in prod
    container_insights: bool | None = None  # None: on in prod only
    sandbox_egress: str = "open"
    sandbox_egress_proxy: str | None = None
    sandbox_egress_proxy_cidr: str | None = None
    agent_models: tuple[str, ...] = ()  # Bedrock model / inference-profile ids, no prefix
    agent_turn_timeout_seconds: int = 86_400
    build_dir: Path = ROOT / ".build"
    deps_layer_dir: Path | None = None
    agent_deps_layer_dir: Path | None = None
    preview_domain: str | None = None
    preview_hosted_zone_id: str | None = None
    preview_hosted_zone_name: str | None = None
    preview_max_tasks: int = 4
    account: str | None = None
    region: str | None = None

    def __post_init__(self) -> None:
        if not STAGE_PATTERN.match(self.stage):
            raise ValueError(f"stage {self.stage!r}: lowercase letters, digits and '-', <= 20")
        if bool(self.jwt_issuer) != bool(self.jwt_audience):
            raise ValueError("jwtIssuer and jwtAudience go together")
        if self.jwt_issuer and not self.jwt_issuer.startswith("https://"):
            raise ValueError("jwtIssuer must be an https:// URL")
        if self.protection and self.web_acl_arn:
            raise ValueError("protection (create a web ACL) and webAclArn (use one) exclude")
        if self.protection and self.region not in (None, WAF_REGION):
            raise ValueError(
                f"protection creates a CloudFront-scope web ACL, which must live in {WAF_REGION}: "
                f"deploy this stack to {WAF_REGION}, or create the ACL there and pass webAclArn "
                "(docs/deploy.md, 'Protection')"
            )
        self._check_sandbox()
        self._check_agent()
        self._check_github()
        self._check_previews()
        for origin in self.spa_origins:
            if not re.match(r"^https?://[^/\s*]+$", origin):
                raise ValueError(f"spaOrigins: {origin!r} is not a scheme://host[:port] origin")

    def _check_github(self) -> None:
        for key, arn in (
            ("githubWebhookSecretArn", self.github_webhook_secret_arn),
            ("githubTokenSecretArn", self.github_token_secret_arn),
            ("githubAppPrivateKeySecretArn", self.github_app_private_key_secret_arn),
        ):
            if arn and not SECRET_ARN.match(arn):
                raise ValueError(f"{key}: {arn!r} is not a Secrets Manager secret ARN")
        if bool(self.github_app_id) != bool(self.github_app_private_key_secret_arn):
            raise ValueError("githubAppId and githubAppPrivateKeySecretArn go together")
        if self.github_app_id and not self.github_app_id.isdigit():
            raise ValueError(f"githubAppId: {self.github_app_id!r} is not a GitHub App id")

    def _check_previews(self) -> None:
        if bool(self.preview_domain) != bool(self.preview_hosted_zone_id):
            raise ValueError("previewDomain and previewHostedZoneId go together")
        if self.preview_domain and not DOMAIN.match(self.preview_domain):
            raise ValueError(f"previewDomain {self.preview_domain!r}: a lower-case DNS name")
        if self.preview_hosted_zone_id and not HOSTED_ZONE_ID.match(self.preview_hosted_zone_id):
            raise ValueError(
                f"previewHostedZoneId {self.preview_hosted_zone_id!r}: a Route 53 zone id (Z...)"
            )
        zone = self.preview_zone_name
        if (
            zone
            and self.preview_domain
            and not (self.preview_domain == zone or self.preview_domain.endswith(f".{zone}"))
        ):
            raise ValueError(f"previewDomain {self.preview_domain!r} is not in zone {zone!r}")
        if self.preview_domain and not self.region:
            raise ValueError(
                "previewDomain needs the stack's region (context region or CDK_DEFAULT_REGION): "
                "the preview ALB's access logs are delivered by that region's ELB account"
            )
        if not 1 <= self.preview_max_tasks <= 100:
            raise ValueError(f"previewMaxTasks {self.preview_max_tasks}: 1-100")

    @property
    def previews(self) -> bool:
        return self.preview_domain is not None

    @property
    def preview_zone_name(self) -> str | None:
        if self.preview_hosted_zone_name:
            return self.preview_hosted_zone_name.rstrip(".").lower()
        if self.preview_domain and "." in self.preview_domain:
            return self.preview_domain.split(".", 1)[1]
        return None

    def _check_sandbox(self) -> None:
        if self.sandbox_storage not in ("ebs", "efs"):
            raise ValueError(f"sandboxStorage {self.sandbox_storage!r}: 'ebs' or 'efs'")
        if self.sandbox_cpu not in FARGATE_CPU:
            raise ValueError(f"sandboxCpu {self.sandbox_cpu}: one of {FARGATE_CPU}")
        if not self.sandbox_cpu // 1024 * 2048 <= self.sandbox_memory_mib <= self.sandbox_cpu * 8:
            raise ValueError(
                f"sandboxMemoryMiB {self.sandbox_memory_mib} does not fit {self.sandbox_cpu} CPU "
                "units on Fargate (2x to 8x the vCPUs in GiB)"
            )
        if not 1 <= self.sandbox_volume_gib <= 16384:
            raise ValueError(f"sandboxVolumeGiB {self.sandbox_volume_gib}: 1-16384")
        if self.nat_gateways is not None and not 1 <= self.nat_gateways <= MAX_AZS:
            raise ValueError(
                f"natGateways {self.nat_gateways}: 1-{MAX_AZS} (sandboxes need egress)"
            )
        self._check_egress()
        self._check_addresses()

    def _check_addresses(self) -> None:
        """Every running sandbox holds one address of its subnets (its task's ENI): the subnets
        must hold ``maxSessions`` of them, and fit the VPC's /16 (issue 27, docs/scale.md)."""
        mask = self.sandbox_subnet_mask
        if not MIN_SUBNET_MASK <= mask <= MAX_SUBNET_MASK:
            raise ValueError(f"sandboxSubnetMask {mask}: {MIN_SUBNET_MASK}-{MAX_SUBNET_MASK}")
        if self.max_sessions < 1:
            raise ValueError(f"maxSessions {self.max_sessions}: at least 1")
        fitting = [m for m in range(MIN_SUBNET_MASK, MAX_SUBNET_MASK + 1) if self._fits(m)]
        if mask not in fitting:
            raise ValueError(
                f"sandboxSubnetMask {mask}: {MAX_AZS} subnets of /{mask} and the others do not "
                f"fit the VPC {VPC_CIDR}; the largest that fits is /{fitting[0]}"
            )
        if self.sandbox_addresses < self.max_sessions:
            enough = [m for m in fitting if self._holds(m) >= self.max_sessions]
            fix = (
                f"set sandboxSubnetMask={enough[-1]}"
                if enough
                else f"at most {self._holds(fitting[0])} fit this VPC: run another stage"
            )
            raise ValueError(
                f"maxSessions {self.max_sessions}: the sandbox subnets (/{mask} x {MAX_AZS} "
                f"AZs) hold {self.sandbox_addresses} running sandboxes; {fix} (docs/scale.md)"
            )

    def subnet_layout(self, sandbox_mask: int | None = None) -> list[int]:
        """The prefix lengths the VPC allocates, in the CDK's order (each group across the
        AZs): public, private, then (egress none/proxy) the sandboxes' own."""
        mask = self.sandbox_subnet_mask if sandbox_mask is None else sandbox_mask
        private = CONTROL_PLANE_SUBNET_MASK if self.sandbox_isolated else mask
        groups = [PUBLIC_SUBNET_MASK, private] + ([mask] if self.sandbox_isolated else [])
        return [group for group in groups for _ in range(MAX_AZS)]

    @property
    def private_subnet_mask(self) -> int:
        """The control plane's subnets (shared with the sandboxes under egress ``open``)."""
        return CONTROL_PLANE_SUBNET_MASK if self.sandbox_isolated else self.sandbox_subnet_mask

    @property
    def sandbox_addresses(self) -> int:
        """Sandboxes the sandbox subnets hold at once (their usable addresses, less the control
        plane's ENIs where the two share the subnets)."""
        return self._holds(self.sandbox_subnet_mask)

    def _holds(self, mask: int) -> int:
        per_subnet = (1 << (32 - mask)) - AWS_RESERVED_ADDRESSES
        if not self.sandbox_isolated:
            per_subnet -= CONTROL_PLANE_RESERVE
        return MAX_AZS * max(per_subnet, 0)

    def _fits(self, mask: int) -> bool:
        return _allocated_end(self.subnet_layout(mask)) <= 1 << (32 - int(VPC_CIDR.split("/")[1]))

    def _check_agent(self) -> None:
        for model in self.agent_models:
            if not BEDROCK_MODEL_ID.match(model):
                raise ValueError(
                    f"agentModels: {model!r} is not a Bedrock model or inference-profile id "
                    "(e.g. anthropic.claude-sonnet-4-5-20250929-v1:0, or us.anthropic...)"
                )
        if not 60 <= self.agent_turn_timeout_seconds <= MAX_TURN_TIMEOUT:
            raise ValueError(f"agentTurnTimeoutSeconds: 60-{MAX_TURN_TIMEOUT}")

    def _check_egress(self) -> None:
        if self.sandbox_egress not in SANDBOX_EGRESS:
            raise ValueError(f"sandboxEgress {self.sandbox_egress!r}: one of {SANDBOX_EGRESS}")
        proxied = self.sandbox_egress == "proxy"
        if proxied != bool(self.sandbox_egress_proxy):
            raise ValueError("sandboxEgressProxy goes with sandboxEgress=proxy, and only with it")
        if self.sandbox_egress_proxy_cidr and not proxied:
            raise ValueError("sandboxEgressProxyCidr only goes with sandboxEgress=proxy")
        if self.sandbox_egress_proxy:
            # no user:password@ either: nothing secret may sit in the task definition
            match = PROXY_URL.match(self.sandbox_egress_proxy)
            if not match or not 1 <= int(match["port"]) <= 65535:
                raise ValueError(
                    f"sandboxEgressProxy {self.sandbox_egress_proxy!r}: http://host:port "
                    "(no credentials, no path)"
                )
        if self.sandbox_egress_proxy_cidr and not CIDR.match(self.sandbox_egress_proxy_cidr):
            raise ValueError(
                f"sandboxEgressProxyCidr {self.sandbox_egress_proxy_cidr!r}: an IPv4 CIDR"
            )

    @property
    def stack_name(self) -> str:
        return f"OpenAgents-{self.stage}"

    @property
    def create_user_pool(self) -> bool:
        return self.jwt_issuer is None

    @property
    def nat_gateway_count(self) -> int:
        return self.nat_gateways or (MAX_AZS if self.prod else 1)

    @property
    def sandbox_isolated(self) -> bool:
        """Sandboxes in their own subnets with no route to the NAT (egress ``none``/``proxy``)."""
        return self.sandbox_egress != "open"

    @property
    def proxy_port(self) -> int | None:
        match = PROXY_URL.match(self.sandbox_egress_proxy or "")
        return int(match["port"]) if match else None

    @property
    def proxy_cidr(self) -> str | None:
        """Where the proxy is: the configured CIDR, the proxy's own /32, or ``None`` (the
        VPC's CIDR: a proxy inside the VPC, named by a private DNS name)."""
        match = PROXY_URL.match(self.sandbox_egress_proxy or "")
        if self.sandbox_egress_proxy_cidr or not match:
            return self.sandbox_egress_proxy_cidr
        return f"{match['host']}/32" if IPV4.match(match["host"]) else None

    @property
    def insights(self) -> bool:
        return self.prod if self.container_insights is None else self.container_insights

    @property
    def deps_layer(self) -> Path:
        return self.deps_layer_dir or self.build_dir / "layers" / "deps"

    @property
    def agent_deps_layer(self) -> Path:
        """The agent's Python 3.13 deps layer; a ``depsLayerDir`` stand-in serves both."""
        if self.agent_deps_layer_dir is not None:
            return self.agent_deps_layer_dir
        if self.deps_layer_dir is not None:
            return self.deps_layer_dir
        return self.build_dir / "layers" / "deps-py313"

    @staticmethod
    def inference_profile_model(model: str) -> str | None:
        """The foundation model behind a system inference-profile id, else ``None``."""
        prefix, _, rest = model.partition(".")
        return rest if prefix in INFERENCE_PROFILE_PREFIXES and "." in rest else None

    def function_asset(self, name: str) -> Path:
        return self.build_dir / "functions" / name

    @property
    def core_layer(self) -> Path:
        return self.build_dir / "layers" / "core"

    @classmethod
    def from_context(cls, node: Node) -> StageConfig:
        def get(key: str) -> Any:
            return node.try_get_context(key)

        build_dir = Path(get("buildDir") or ROOT / ".build")
        deps = get("depsLayerDir")
        agent_deps = get("agentDepsLayerDir")
        return cls(
            stage=str(get("stage") or "dev"),
            prod=_bool(get("prod") or False),
            protection=_bool(get("protection") or False),
            web_acl_arn=_optional(get("webAclArn")),
            jwt_issuer=_optional(get("jwtIssuer")),
            jwt_audience=_list(get("jwtAudience")),
            spa_origins=tuple(o.rstrip("/") for o in _list(get("spaOrigins"))),
            github_webhook_secret_arn=_optional(get("githubWebhookSecretArn")),
            github_token_secret_arn=_optional(get("githubTokenSecretArn")),
            github_app_id=_optional(get("githubAppId")),
            github_app_private_key_secret_arn=_optional(get("githubAppPrivateKeySecretArn")),
            sandbox_storage=str(get("sandboxStorage") or "ebs").lower(),
            sandbox_cpu=_int(get("sandboxCpu"), 2048),
            sandbox_memory_mib=_int(get("sandboxMemoryMiB"), 4096),
            sandbox_volume_gib=_int(get("sandboxVolumeGiB"), 20),
            sandbox_subnet_mask=_int(get("sandboxSubnetMask"), 20),
            max_sessions=_int(get("maxSessions"), 1000),
            nat_gateways=_int(get("natGateways"), 0) or None,
            container_insights=None
            if get("containerInsights") in (None, "")
            else _bool(get("containerInsights")),
            sandbox_egress=str(get("sandboxEgress") or "open").lower(),
            sandbox_egress_proxy=_optional(get("sandboxEgressProxy")),
            sandbox_egress_proxy_cidr=_optional(get("sandboxEgressProxyCidr")),
            agent_models=tuple(m.removeprefix("bedrock/") for m in _list(get("agentModels"))),
            agent_turn_timeout_seconds=_int(get("agentTurnTimeoutSeconds"), 86_400),
            build_dir=build_dir if build_dir.is_absolute() else ROOT / build_dir,
            deps_layer_dir=(Path(deps) if Path(deps).is_absolute() else ROOT / deps)
            if deps
            else None,
            agent_deps_layer_dir=(
                Path(agent_deps) if Path(agent_deps).is_absolute() else ROOT / agent_deps
            )
            if agent_deps
            else None,
            preview_domain=_optional(get("previewDomain")),
            preview_hosted_zone_id=_optional(get("previewHostedZoneId")),
            preview_hosted_zone_name=_optional(get("previewHostedZoneName")),
            preview_max_tasks=_int(get("previewMaxTasks"), 4),
            account=_optional(get("account")) or os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=_optional(get("region")) or os.environ.get("CDK_DEFAULT_REGION"),
        )
