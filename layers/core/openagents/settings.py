"""Every setting the control plane reads, in one place.

Values come from the environment with the ``OPENAGENTS_`` prefix (``OPENAGENTS_PORT=9000``).
Nothing else in the code base reads ``os.environ``.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Mode(StrEnum):
    LOCAL = "local"  # one machine: HS256 tokens, SQLite (or moto's DynamoDB), folders
    AWS = "aws"  # API Gateway JWT authorizer, DynamoDB, S3


def _home_folder() -> tuple[Path, ...]:
    """The default local repository root: the home folder (none when it cannot be found)."""
    try:
        return (Path.home(),)
    except (RuntimeError, KeyError):
        return ()


class ModelPrice(BaseModel):
    """A model's list price in USD per million tokens (``OPENAGENTS_MODEL_PRICES``)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(default=0, ge=0, alias="cacheRead")
    cache_write: float = Field(default=0, ge=0, alias="cacheWrite")


class Settings(BaseSettings):
    """Typed settings; parsed once per process by the composition root."""

    model_config = SettingsConfigDict(env_prefix="OPENAGENTS_", extra="ignore", frozen=True)

    mode: Mode = Mode.LOCAL
    region: str = Field(
        default="us-east-1",
        validation_alias=AliasChoices("OPENAGENTS_REGION", "AWS_REGION", "region"),
    )  # Lambda sets AWS_REGION

    # one-machine runtime
    home: Path = Path(".openagents")
    port: int = Field(default=8000, ge=1, le=65535)
    dump_interval_seconds: float = Field(default=30.0, gt=0)

    # store
    store: str = Field(default="sqlite", pattern="^(sqlite|dynamodb)$")  # one machine only
    table_name: str = "openagents"
    dynamodb_endpoint: str | None = None  # None: the SDK default (AWS); set for moto
    stepfunctions_endpoint: str | None = None  # likewise, for Step Functions
    artifact_bucket: str | None = None  # S3 bucket for large message bodies (AWS mode)

    # lifecycle timings
    idle_timeout_seconds: int = Field(default=1800, ge=1)
    max_lifetime_seconds: int = Field(default=18000, ge=1)

    extend_seconds: int = Field(default=1200, ge=1)  # POST /api/sandbox/extend
    turn_heartbeat_seconds: int = Field(default=600, ge=1)  # an agent turn holds activity this long
    snapshot_retry_seconds: int = Field(default=300, ge=1)  # wait after failed snapshot retries
    sweep_seconds: int = Field(default=60, ge=1)  # the reconciler's period
    lifecycle_min_sleep_seconds: float = Field(default=5.0, gt=0)  # shortest loop wait

    auto_archive_days: int = Field(default=7, ge=0)  # archive sessions hibernated this long; 0: off
    event_bus_name: str | None = None  # AWS: the domain bus (the outbox pipe publishes to it)

    # archive and GitHub
    archive_retry_attempts: int = Field(default=4, ge=1)  # one machine: the rule's retries
    archive_retry_base_seconds: float = Field(default=1.0, ge=0)  # backoff 1, 2, 4 … seconds
    github_webhook_secret: str | None = None  # HMAC key of POST /api/github/webhook
    github_webhook_secret_arn: str | None = None  # AWS: the same, from Secrets Manager
    github_token_secret_arn: str | None = None  # AWS: a GitHub token for PR lookups
    github_app_id: str | None = None  # AWS: a GitHub App (preferred over the token when set)
    github_app_private_key_secret_arn: str | None = None  # AWS: the app's PEM private key
    github_api_url: str = "https://api.github.com"
    github_repo_owner: str | None = None  # new repositories: an organization (else the user)
    github_git_url: str = "https://github.com"  # smart HTTP base: <url>/<owner>/<name>.git
    git_clone_max_bytes: int = Field(default=512 << 20, ge=1 << 20)  # a private clone's pack cap
    pr_refresh_seconds: float = Field(default=30, ge=0)  # opening a session refreshes its PR

    # guards
    rate_limit_per_minute: int = Field(default=10, ge=1)
    rate_limit_window_seconds: int = Field(default=60, ge=1)
    max_chats_per_session: int = Field(default=100, ge=1, le=500)
    max_message_bytes: int = Field(default=1_048_576, ge=1024)
    inline_message_bytes: int = Field(default=300_000, ge=1024, le=350_000)
    # a user's stored bytes: messages, live runs' event logs, attachments (store/storage.py)
    user_storage_max_bytes: int = Field(default=1 << 30, ge=1 << 20)
    allow_local_repos: bool = True  # forced off in AWS mode

    # --- local repositories (openagents/git/roots.py; docs/sandboxes.md "Local repositories") ---
    # folders a local repoUrl must lie under (symlinks resolved), colon- or comma-separated;
    # default: the home folder of the user running the server; empty: no local repository
    local_repo_roots: Annotated[tuple[Path, ...], NoDecode] = Field(
        default_factory=lambda: _home_folder()
    )

    @field_validator("local_repo_roots", mode="before")
    @classmethod
    def _path_list(cls, value: object) -> object:
        return _listed(value, separators=",:")

    @field_validator("local_repo_roots")
    @classmethod
    def _absolute_roots(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        roots = tuple(root.expanduser() for root in value)
        if any(not root.is_absolute() for root in roots):
            raise ValueError("OPENAGENTS_LOCAL_REPO_ROOTS takes absolute folders")
        return roots

    # --- end of local repositories ---
    allowed_repo_hosts: tuple[str, ...] = ("github.com",)

    # --- local Host check and exec caps (functions/api/hosts.py, services/sandbox_tools.py) ---
    # one machine: Host names served besides 127.0.0.1, localhost and [::1], comma-separated
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    exec_max_per_session: int = Field(default=4, ge=1)  # concurrent sandbox commands
    exec_max_per_user: int = Field(default=8, ge=1)
    exec_max_total: int = Field(default=64, ge=1)  # the exec pool's threads (per process)

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_list(cls, value: object) -> object:
        listed = _listed(value)
        return tuple(str(host).lower() for host in listed) if isinstance(listed, tuple) else listed

    # --- end of Host check and exec caps ---

    # --- long-poll caps (functions/api/longpoll.py): streams waiting at once (429 beyond) ---
    long_poll_max_per_chat: int = Field(default=4, ge=1)
    long_poll_max_per_user: int = Field(default=16, ge=1)
    long_poll_max_total: int = Field(default=1024, ge=1)  # per process
    # --- end of long-poll caps ---

    # identity
    jwt_issuer: str = "openagents-local"
    jwt_audience: str = "openagents"
    token_ttl_seconds: int = Field(default=86_400, ge=60)
    waf_bot_header: str = "x-amzn-waf-bot-category"

    default_model_id: str = "openai/gpt-5.4"

    # --- models (the agent's model port, openagents/agent/models; docs/agent.md "Models") ---
    # model ids offered to chats, `provider/model`, comma-separated; the first is the default
    models: Annotated[tuple[str, ...], NoDecode] = ()
    openai_base_url: str | None = None  # any OpenAI-compatible endpoint (Ollama, vLLM, LiteLLM)
    openai_api_key: SecretStr | None = None
    scripted_model_file: Path | None = None  # local mode: offers `scripted/default`
    model_context_windows: dict[str, int] = {}  # JSON {modelId: tokens}
    # JSON {modelId: {input, output, cacheRead?, cacheWrite?}}: USD per million tokens, for the
    # runs' estimated cost (costUsd); a model without a price has none
    model_prices: dict[str, ModelPrice] = {}
    default_context_window: int = Field(default=128_000, ge=1024)  # models not in that map
    model_max_attempts: int = Field(default=4, ge=1, le=10)  # tries of a throttled model call

    @field_validator("models", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        return _listed(value)

    @property
    def offered_models(self) -> tuple[str, ...]:
        """The model ids chats may use: OPENAGENTS_MODELS, plus ``scripted/default`` in local
        mode when a scripted file is set."""
        scripted = self.mode is Mode.LOCAL and self.scripted_model_file is not None
        extra = ("scripted/default",) if scripted and "scripted/default" not in self.models else ()
        return (*self.models, *extra)

    @property
    def new_chat_model(self) -> str:
        """A new chat's model without a user preference: OPENAGENTS_DEFAULT_MODEL_ID when set,
        else the first offered model (never an unconfigured default)."""
        if "default_model_id" in self.model_fields_set or not self.offered_models:
            return self.default_model_id
        return self.offered_models[0]

    # --- end of models ---

    # --- agent turns (openagents/agent, services/agent_turns.py; docs/agent.md) ---
    agent_max_steps: int = Field(default=500, ge=1, le=5000)  # model calls (+ tools) per turn
    agent_bash_timeout_seconds: int = Field(default=120, ge=1, le=600)  # default bash timeout
    # a throttled model call (the model's quota) waits and runs again, at most this long in all
    model_throttle_wait_seconds: int = Field(default=900, ge=0, le=86_400)
    agent_events_retention_days: int = Field(default=7, ge=1)  # stream events after a run ends
    agent_turn_timeout_seconds: int = Field(default=86_400, ge=60)  # a durable turn's deadline
    agent_function_arn: str | None = None  # AWS: the durable agent-turn function (qualified)
    # --- end of agent turns ---

    # sandboxes and workflows
    provision_on_create: bool = True  # POST /api/sessions kicks the provisioning workflow
    sandbox_driver: str = Field(default="local", pattern="^(local|fargate)$")
    sandbox_isolation: str = Field(default="auto", pattern="^(auto|bwrap|none)$")
    # one machine: what a sandbox may reach and use (docs/sandboxes.md, "Threat model")
    sandbox_network: str = Field(default="outbound", pattern="^(outbound|none)$")
    sandbox_memory_mb: int = Field(default=4096, ge=64)  # the whole sandbox (cgroup)
    sandbox_pids: int = Field(default=512, ge=16)  # processes and threads, the whole sandbox
    sandbox_disk_gb: float = Field(default=10, gt=0)  # the workspace volume
    sandbox_tmp_mb: int = Field(default=1024, ge=16)  # /tmp (a tmpfs, counted as memory)
    sandbox_ready_attempts: int = Field(default=60, ge=1)  # probes, one per Wait (1 s)
    sandbox_token_secret_arn: str | None = None  # AWS: key that derives sandbox tokens
    state_machines: dict[str, str] = {}  # AWS: state machine ARNs by name (JSON)
    # AWS: previews at https://<port>-<session>.<preview_domain> (the preview gateway); None: off
    preview_domain: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$",
    )
    preview_app_url: str | None = None  # AWS: the web app's URL, where a paused preview's Resume is
    # Fargate driver (AWS)
    fargate_cluster: str | None = None
    fargate_task_definition: str | None = None
    fargate_subnets: tuple[str, ...] = ()
    fargate_security_groups: tuple[str, ...] = ()
    fargate_storage: str = Field(default="ebs", pattern="^(ebs|efs)$")
    fargate_ebs_role_arn: str | None = None
    fargate_volume_size_gib: int = Field(default=20, ge=1, le=16384)
    fargate_kms_key_id: str | None = None
    fargate_efs_file_system_id: str | None = None
    # EBS snapshot wait: keep delay x attempts under the lifecycle function's timeout (15 min max)
    fargate_snapshot_wait_delay_seconds: float = Field(default=15.0, gt=0)
    fargate_snapshot_wait_max_attempts: int = Field(default=55, ge=1)
    origin_secret_arn: str | None = None  # AWS: CloudFront's origin-verify header secret
    sandboxd_path: Path = Path(__file__).resolve().parents[3] / "sandbox" / "sandboxd"
    statemachines_dir: Path = Path(__file__).resolve().parents[3] / "infra" / "statemachines"

    @property
    def local_repos_allowed(self) -> bool:
        return self.mode is Mode.LOCAL and self.allow_local_repos

    @property
    def store_adapter(self) -> str:
        """``sqlite`` or ``dynamodb``: AWS mode always runs on DynamoDB."""
        return "dynamodb" if self.mode is Mode.AWS else self.store

    @property
    def sqlite_path(self) -> Path:
        return self.home / "openagents.db"

    @property
    def jwt_secret_path(self) -> Path:
        return self.home / "jwt-secret"

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def sandbox_key_path(self) -> Path:
        return self.home / "sandbox-key"


def _listed(value: object, separators: str = ",") -> object:
    """A list setting from the environment: a JSON list (what tests/support.export_settings
    writes), or items split on ``separators``."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        import json

        return tuple(json.loads(text))
    for separator in separators[1:]:
        text = text.replace(separator, separators[0])
    return tuple(part.strip() for part in text.split(separators[0]) if part.strip())
