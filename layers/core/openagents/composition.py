"""The composition root: builds every adapter once, from typed settings, on first use."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from openagents.agent.models.registry import ModelRegistry, build_registry
from openagents.artifacts import ArtifactStore
from openagents.auth.bot import BotPolicy, UserAgentPolicy, WafLabelPolicy
from openagents.auth.origin import OriginGuard
from openagents.auth.previews import preview_key
from openagents.auth.tokens import LocalTokens, load_or_create_secret, local_tokens
from openagents.clients import LazyClient
from openagents.events import EventBus
from openagents.git import GitHost
from openagents.git.catalog import RepositoryCatalog
from openagents.git.roots import local_repo_roots
from openagents.lazy import Lazy, Once
from openagents.sandbox.clients import KeptClients
from openagents.sandbox.port import (
    SandboxdClients,
    SandboxDriver,
)
from openagents.services import Metrics, new_id, utc_now
from openagents.services.archive import ArchiveService
from openagents.services.attachments import AttachmentFiles, Attachments
from openagents.services.auto_commit import AutoCommitService
from openagents.services.chats import ChatService
from openagents.services.code_editor import CodeEditor
from openagents.services.dev_servers import DevServers
from openagents.services.flows import AfterTurn, Restore, SandboxReady, Unarchive
from openagents.services.git_actions import GitActions
from openagents.services.git_cards import GitCards
from openagents.services.lifecycle import LifecycleService
from openagents.services.merge_readiness import MergeReadiness
from openagents.services.previews import Previews, PreviewSite
from openagents.services.provisioning import ProvisioningService, private_clone
from openagents.services.pull_requests import PullRequestService
from openagents.services.repositories import RepositoryService
from openagents.services.sandbox_tools import ExecPool, SandboxTools
from openagents.services.session_repository import RepositorySettings, SessionRepositories
from openagents.services.sessions import SessionService
from openagents.services.shares import ShareService
from openagents.services.skills import SkillsService
from openagents.services.teardown import Remains, SandboxTeardown
from openagents.services.transitions import Transitions
from openagents.services.usage import UsageService
from openagents.settings import Mode, Settings
from openagents.store.port import Store
from openagents.workflows.stepfunctions import StepFunctionsWorkflows

if TYPE_CHECKING:
    from openagents.agent.loop import AgentLoop
    from openagents.services.agent_turns import AgentTurns, TurnEngine
    from openagents.services.checkpoints import Checkpoints
    from openagents.store.runs import RunStore

if TYPE_CHECKING:
    from openagents.sandbox.local import LocalDriver

log = logging.getLogger(__name__)
GITHUB_SETTING = "OPENAGENTS_GITHUB_TOKEN_SECRET_ARN"  # named when no git host is configured


@dataclass(frozen=True)
class Container:
    settings: Settings
    sessions: SessionService
    archive: ArchiveService
    pull_requests: PullRequestService  # check-pr refreshes, merge and close
    chats: ChatService
    shares: ShareService
    provisioning: ProvisioningService
    lifecycle: LifecycleService
    # the flows that span services (services/flows/), each the services' steps in order
    after_turn: AfterTurn  # a turn's natural end: hold released, auto-commit / auto-PR, kick
    restore: Restore  # a resume: restoring, then the start from the snapshot kicked
    sandbox_ready: SandboxReady  # the workspace (an archived bundle), active, the idle loop
    unarchive: Unarchive  # running again, then the next sandbox's start (or the idle loop)
    sandbox_tools: SandboxTools
    driver: SandboxDriver
    bot_policy: BotPolicy
    origin_guard: OriginGuard | None  # AWS behind CloudFront: its secret header is required
    local_tokens: LocalTokens | None  # one machine only; AWS trusts the API Gateway authorizer
    webhook_secret: Callable[[], str | None]  # the GitHub webhook's HMAC key (read on first use)
    agent_parts: Once[AgentParts]  # built on first use: a task function never needs it
    previews: Previews  # the sandbox's listening ports and private links to them
    dev_servers: DevServers  # a project's dev server, detected and launched in the sandbox
    code_editor: CodeEditor  # code-server in the sandbox, behind a private preview
    git_actions: GitActions  # commit, discard, push, open the PR, fix failing checks
    repositories: RepositoryService  # the new-session dialog's repository and branch pickers
    session_repository: SessionRepositories  # a session without a repository gains one
    skills: SkillsService  # the repository's skills in the session's sandbox
    usage: UsageService  # the caller's runs' tokens and cost per day and model
    merge_readiness: MergeReadiness  # whether the session's PR can merge, and why not
    attachments: Attachments  # a user message's images and text files (artifact store)

    @property
    def agent(self) -> AgentTurns:
        """Agent turns: POST /api/chat, stream, stop, runs, models."""
        return self.agent_parts().turns

    @property
    def agent_loop(self) -> AgentLoop:
        """The turn's steps, driven by the durable handler."""
        return self.agent_parts().loop

    @property
    def checkpoints(self) -> Checkpoints:
        """Reverting the workspace to before a turn."""
        return self.agent_parts().checkpoints


@dataclass(frozen=True)
class AgentParts:
    turns: AgentTurns
    loop: AgentLoop
    checkpoints: Checkpoints


def _client(service: str, settings: Settings, endpoint: str | None = None) -> Any:
    return LazyClient(service, settings.region, endpoint)


def _artifacts(settings: Settings) -> ArtifactStore:
    if settings.mode is Mode.LOCAL:
        from openagents.artifacts.folder import FolderArtifactStore

        return FolderArtifactStore(settings.artifacts_dir)
    if not settings.artifact_bucket:
        raise ValueError("OPENAGENTS_ARTIFACT_BUCKET is required in aws mode")
    from openagents.artifacts.s3 import S3ArtifactStore

    return S3ArtifactStore(_client("s3", settings), settings.artifact_bucket)


def _token_key(settings: Settings) -> bytes:
    if settings.mode is Mode.LOCAL:
        return load_or_create_secret(settings.sandbox_key_path).encode()
    if not settings.sandbox_token_secret_arn:
        raise ValueError("OPENAGENTS_SANDBOX_TOKEN_SECRET_ARN is required in aws mode")
    secret = _client("secretsmanager", settings).get_secret_value(
        SecretId=settings.sandbox_token_secret_arn
    )
    return str(secret["SecretString"]).encode()


def _preview_key(settings: Settings) -> Callable[[], bytes]:
    """The previews' signing key, derived from the sandbox token key on first use."""
    cached: list[bytes] = []
    lock = threading.Lock()

    def read() -> bytes:
        with lock:
            if not cached:
                cached.append(preview_key(_token_key(settings)))
            return cached[0]

    return read


def _preview_site(settings: Settings) -> PreviewSite:
    """One machine: ``*.localhost`` on the server's own port (browsers resolve it to
    loopback). AWS: ``https://<port>-<session>.<preview_domain>``, the preview gateway's."""
    if settings.mode is Mode.AWS and settings.preview_domain:
        return PreviewSite("https", settings.preview_domain, settings.preview_app_url)
    return PreviewSite("http", f"localhost:{settings.port}")


def local_driver(settings: Settings, key: bytes) -> LocalDriver:
    """The one-machine sandbox driver, confined as the settings say (docs/sandboxes.md)."""
    from openagents.sandbox.client import SandboxClient
    from openagents.sandbox.confine import Limits
    from openagents.sandbox.local import LocalDriver

    return LocalDriver(
        settings.home,
        settings.sandboxd_path,
        key,
        SandboxClient,
        isolation=settings.sandbox_isolation,
        network=settings.sandbox_network,
        limits=Limits(
            memory_bytes=settings.sandbox_memory_mb << 20,
            pids=settings.sandbox_pids,
            disk_bytes=int(settings.sandbox_disk_gb * (1 << 30)),
            tmp_bytes=settings.sandbox_tmp_mb << 20,
        ),
    )


def _remains(settings: Settings) -> Remains | None:
    """What a driver keeps of a deleted session besides its sandbox and snapshot: the local
    driver's folders; on Fargate nothing (an EBS volume goes with its task)."""
    if settings.sandbox_driver != "local":
        return None
    from openagents.sandbox.local_remains import LocalRemains

    return LocalRemains(settings.home)


def _driver(settings: Settings, key: bytes) -> SandboxDriver:
    from openagents.sandbox.client import SandboxClient

    if settings.sandbox_driver == "local":
        return local_driver(settings, key)
    from openagents.sandbox.fargate import FargateDriver
    from openagents.sandbox.fargate_storage import FargateConfig

    if not (settings.fargate_cluster and settings.fargate_task_definition):
        raise ValueError("the fargate driver needs OPENAGENTS_FARGATE_CLUSTER and _TASK_DEFINITION")
    config = FargateConfig(
        cluster=settings.fargate_cluster,
        task_definition=settings.fargate_task_definition,
        subnets=settings.fargate_subnets,
        security_groups=settings.fargate_security_groups,
        token_key=key,
        storage="efs" if settings.fargate_storage == "efs" else "ebs",
        ebs_role_arn=settings.fargate_ebs_role_arn,
        volume_size_gib=settings.fargate_volume_size_gib,
        kms_key_id=settings.fargate_kms_key_id,
        efs_file_system_id=settings.fargate_efs_file_system_id,
        artifact_bucket=settings.artifact_bucket,
        snapshot_wait_delay_seconds=settings.fargate_snapshot_wait_delay_seconds,
        snapshot_wait_max_attempts=settings.fargate_snapshot_wait_max_attempts,
    )
    return FargateDriver(
        config,
        _client("ecs", settings),
        _client("ec2", settings),
        _client("efs", settings),
        _client("s3", settings),
        SandboxClient,
    )


def _bus(settings: Settings) -> EventBus | None:
    """The one-machine bus. AWS has none in process: the table's outbox items reach the
    EventBridge bus through DynamoDB Streams and a pipe (infra/constructs/outbox.py)."""
    if settings.mode is Mode.LOCAL:
        from openagents.events.local import LocalBus
        from openagents.local.rules import local_rules

        return LocalBus(settings.home / "events.jsonl", rules=local_rules(settings))
    return None


def _secret(settings: Settings, arn: str | None) -> str | None:
    if not arn:
        return None
    value = _client("secretsmanager", settings).get_secret_value(SecretId=arn)
    return str(value["SecretString"]).strip() or None


def _git_host(settings: Settings) -> GitHost | None:
    """Local bare repositories on one machine; on AWS, GitHub with a GitHub App's
    installation tokens when its id and private key are set, else a token from Secrets Manager
    (neither: PR refreshes are skipped)."""
    if settings.mode is Mode.LOCAL:
        from openagents.git.local import LocalGitHost
        from openagents.git.roots import local_repo_roots

        roots = local_repo_roots(settings.local_repo_roots, settings.home)
        return LocalGitHost(settings.home / "git", roots=roots)
    app_id, key_arn = settings.github_app_id, settings.github_app_private_key_secret_arn
    token_arn = settings.github_token_secret_arn
    if not ((app_id and key_arn) or token_arn):
        return None
    from openagents.git.github import Credentials, GitHubApp, GitHubHost, StaticToken

    credentials: Credentials
    if app_id and key_arn:  # installation tokens, preferred over a personal token
        credentials = GitHubApp(app_id, lambda: _secret(settings, key_arn) or "")
    else:
        credentials = StaticToken(lambda: _secret(settings, str(token_arn)) or "")
    return GitHubHost(
        credentials,
        base_url=settings.github_api_url,
        git_url=settings.github_git_url,
        clone_max_bytes=settings.git_clone_max_bytes,
        repo_owner=settings.github_repo_owner,
    )


def _catalog(settings: Settings, git_host: GitHost | None) -> RepositoryCatalog | None:
    """The repository picker's catalog: the allowed roots on one machine, else GitHub."""
    if settings.mode is Mode.LOCAL:
        from openagents.git.local import LocalCatalog
        from openagents.git.roots import local_repo_roots

        roots = local_repo_roots(settings.local_repo_roots, settings.home)
        return LocalCatalog(roots, clock=time.monotonic)
    return git_host if isinstance(git_host, RepositoryCatalog) else None


def _webhook_secret(settings: Settings) -> Callable[[], str | None]:
    cached: list[str | None] = []

    def read() -> str | None:
        if not cached:
            cached.append(
                settings.github_webhook_secret
                or _secret(settings, settings.github_webhook_secret_arn)
            )
        return cached[0]

    return read


def _origin_guard(settings: Settings) -> OriginGuard | None:
    arn = settings.origin_secret_arn
    if settings.mode is Mode.LOCAL or not arn:
        return None

    def secret() -> str:
        value = _client("secretsmanager", settings).get_secret_value(SecretId=arn)
        return str(value["SecretString"])

    return OriginGuard(secret)


def exec_pool(settings: Settings) -> ExecPool:
    """The sandbox commands' own threads and caps (one per container)."""
    return ExecPool(
        settings.exec_max_per_session, settings.exec_max_per_user, settings.exec_max_total
    )


def _stores(
    settings: Settings, artifacts: ArtifactStore, bus: EventBus | None
) -> tuple[Store, RunStore]:
    """SQLite on one machine (the default; its outbox publishes the events to ``bus``),
    DynamoDB on AWS (and locally when asked); the run store on the same adapter, sharing its
    unit of work (a turn's start is one write with its message)."""
    if settings.store_adapter == "sqlite":
        from openagents.store.runs_sqlite import SqliteRunStore
        from openagents.store.sqlite import SqliteStore

        publish = bus.publish if bus is not None else None
        sqlite = SqliteStore(
            settings.sqlite_path,
            artifacts,
            settings.inline_message_bytes,
            publish=publish,
            max_user_bytes=settings.user_storage_max_bytes,
        )
        return sqlite, SqliteRunStore(sqlite)
    from openagents.store import items
    from openagents.store.dynamodb import DynamoStore
    from openagents.store.runs_dynamodb import DynamoRunStore

    table = items.Table(settings.table_name, settings.dynamodb_endpoint, settings.region)
    items.bind(table.name, table.host, table.region)  # for code that uses the models directly
    dynamo = DynamoStore(
        artifacts, settings.inline_message_bytes, table, settings.user_storage_max_bytes
    )
    return dynamo, DynamoRunStore(dynamo)


def build(settings: Settings, metrics: Metrics) -> Container:
    artifacts = _artifacts(settings)
    bus = _bus(settings)
    store, runs = _stores(settings, artifacts, bus)
    # The store's outbox publishes the events: SQLite drains it to the local bus; on AWS the
    # table's stream and an EventBridge pipe put its items on the bus, and on moto
    # (OPENAGENTS_STORE=dynamodb openagents dev) the CLI drains that stream the same way.
    driver = Lazy(lambda: _driver(settings, _token_key(settings)))

    sandboxd = KeptClients(driver)  # the one way to a sandbox's client

    git_host = _git_host(settings)
    workflows = StepFunctionsWorkflows(
        _client("stepfunctions", settings, settings.stepfunctions_endpoint),
        settings.state_machines,
    )
    # the session's services call none of one another: the flows below call their steps
    provisioning = ProvisioningService(
        store,
        driver,
        workflows,
        sandboxd,
        settings,
        utc_now,
        new_id,
        metrics,
        clone=partial(private_clone, git_host),
    )
    lifecycle = LifecycleService(
        store,
        driver,
        workflows,
        settings,
        utc_now,
        new_id,
        metrics,
        starts=provisioning,  # the reconciler's re-kicks of lost starts
        reboots=driver if settings.sandbox_driver == "local" else None,  # outlive the runtime
    )
    archive = ArchiveService(
        store, driver, sandboxd, artifacts, git_host, settings, utc_now, new_id, metrics
    )
    previews = Previews(
        store,
        sandboxd,
        utc_now,
        _preview_key(settings),
        _preview_site(settings),
        on_unreachable=lifecycle.verify_running,
        on_activity=lambda identity, session_id: lifecycle.activity(identity, session_id, None),
    )
    dev_servers = DevServers(previews)
    code_editor = CodeEditor(previews)
    restore = Restore(lifecycle, provisioning)
    sandbox_ready = SandboxReady(
        provisioning,
        archive,
        lifecycle,
        dev_servers,
        code_editor,
        servers_in_background=settings.mode is Mode.LOCAL,
    )
    unarchive = Unarchive(archive, provisioning, lifecycle)
    cards = GitCards(store, utc_now, new_id)  # the chat's commit, push and PR cards
    auto_commit = AutoCommitService(
        store, sandboxd, git_host, utc_now, new_id, metrics, cards=cards
    )
    merge_readiness = MergeReadiness(store, git_host, host_setting=GITHUB_SETTING)
    after_turn = AfterTurn(lifecycle, auto_commit)  # a turn's natural end, step by step
    registry = build_registry(settings)
    chats = ChatService(store, settings, utc_now, new_id, metrics, runs, registry.offered)
    pull_requests = PullRequestService(
        store,
        sandboxd,
        git_host,
        utc_now,
        new_id,
        metrics,
        archive=archive,
        host_setting=GITHUB_SETTING,
        refresh_seconds=settings.pr_refresh_seconds,
        blockers=merge_readiness.blockers,
    )
    sandbox_tools = SandboxTools(
        store,
        sandboxd,
        utc_now,
        artifacts,
        exec_pool(settings),
        Transitions(store, utc_now, new_id, metrics),
        on_unreachable=lifecycle.verify_running,
    )
    attachment_files = AttachmentFiles(artifacts)
    attachments = Attachments(store, attachment_files)
    agent_parts = Once(
        lambda: _agent(
            settings,
            store,
            runs,
            sandboxd,
            lifecycle,
            after_turn,
            restore,
            chats,
            sandbox_tools,
            pull_requests,
            metrics,
            registry,
            attachments,
            attachment_files,
        )
    )
    git_actions = GitActions(
        store,
        sandboxd,
        git_host,
        auto_commit,
        cards,
        registry,
        lambda: agent_parts().turns,
        utc_now,
        new_id,
        metrics,
        host_setting=GITHUB_SETTING,
    )
    session_repository = SessionRepositories(
        store,
        sandboxd,
        git_host,
        auto_commit,
        cards,
        local_repo_roots(settings.local_repo_roots, settings.home),
        RepositorySettings(
            settings.allowed_repo_hosts, settings.local_repos_allowed, GITHUB_SETTING
        ),
        utc_now,
        new_id,
        metrics,
    )
    local = settings.mode is Mode.LOCAL
    kick = provisioning.kick if settings.provision_on_create else None
    return Container(
        settings=settings,
        sessions=SessionService(
            store,
            settings,
            utc_now,
            new_id,
            metrics,
            registry.offered,
            kick=kick,
            archive=archive,
            unarchive=unarchive,
            teardown=SandboxTeardown(driver, _remains(settings), attachments.discard),
        ),
        archive=archive,
        pull_requests=pull_requests,
        chats=chats,
        shares=ShareService(store, chats, runs),
        provisioning=provisioning,
        lifecycle=lifecycle,
        after_turn=after_turn,
        restore=restore,
        sandbox_ready=sandbox_ready,
        unarchive=unarchive,
        sandbox_tools=sandbox_tools,
        driver=driver,  # a Lazy: builds the real driver on first use
        bot_policy=UserAgentPolicy() if local else WafLabelPolicy(settings.waf_bot_header),
        origin_guard=_origin_guard(settings),
        local_tokens=local_tokens(settings) if local else None,
        webhook_secret=_webhook_secret(settings),
        agent_parts=agent_parts,
        previews=previews,
        dev_servers=dev_servers,
        code_editor=code_editor,
        git_actions=git_actions,
        repositories=RepositoryService(_catalog(settings, git_host), GITHUB_SETTING),
        session_repository=session_repository,
        skills=SkillsService(store, sandboxd),
        usage=UsageService(runs, utc_now),
        merge_readiness=merge_readiness,
        attachments=attachments,
    )


def _agent(
    settings: Settings,
    store: Store,
    runs: RunStore,
    sandboxd: SandboxdClients,
    lifecycle: LifecycleService,
    after_turn: AfterTurn,
    restore: Restore,
    chats: ChatService,
    tools: SandboxTools,
    pull_requests: PullRequestService,
    metrics: Metrics,
    registry: ModelRegistry,
    attachments: Attachments,
    attachment_files: AttachmentFiles,
) -> AgentParts:
    """The agent: models, the loop and its engine (the SDK's
    local runtime on one machine, the durable Lambda on AWS), built on first use; reverts to the
    turns' checkpoints."""
    from datetime import timedelta

    from openagents.agent.loop import AgentLoop, LoopConfig
    from openagents.services.agent_turns import AgentHost, AgentTurns
    from openagents.services.checkpoints import Checkpoints

    retention = timedelta(days=settings.agent_events_retention_days)
    config = LoopConfig(
        settings.agent_max_steps,
        settings.agent_bash_timeout_seconds,
        retention,
        throttle_wait_seconds=settings.model_throttle_wait_seconds,
    )
    host = AgentHost(
        store,
        sandboxd,
        lifecycle,
        utc_now,
        ids=new_id,
        metrics=metrics,
        after_turn=after_turn,
        restore=restore,
        refresh_diff=lambda identity, session_id: tools.diff(identity, session_id),
        refresh_pr=pull_requests.refresh,
        attachments=attachment_files,
    )
    loop = AgentLoop(runs, host, registry, utc_now, config, count=metrics.count)
    engine = Once(lambda: _engine(settings, runs, loop))  # built on the first turn

    turns = AgentTurns(
        store,
        runs,
        chats,
        registry,
        restore,
        engine,
        utc_now,
        new_id,
        retention,
        loop,
        metrics=metrics,
        attachments=attachments,
    )
    checkpoints = Checkpoints(
        store,
        runs,
        tools,
        utc_now,
        new_id,
        refresh_diff=lambda identity, session_id: tools.diff(identity, session_id),
    )
    return AgentParts(turns, loop, checkpoints)


def _engine(settings: Settings, runs: RunStore, loop: AgentLoop) -> TurnEngine:
    """The turns' engine: the durable SDK's local runtime on one machine, the durable Lambda
    on AWS."""
    if settings.mode is Mode.LOCAL:
        from openagents.local.agent_runtime import LocalAgentRuntime

        return LocalAgentRuntime(
            settings.home,
            runs,
            lambda: loop,
            execution_timeout_seconds=settings.agent_turn_timeout_seconds,
        )
    from openagents.agent.engine_lambda import LambdaTurnEngine

    if not settings.agent_function_arn:
        raise ValueError("OPENAGENTS_AGENT_FUNCTION_ARN is required in aws mode")
    return LambdaTurnEngine(
        lambda: _client("lambda", settings), settings.agent_function_arn, runs, lambda: loop
    )


class LazyContainer:
    """One container per execution environment, rebuilt only if the settings change (tests).
    Building opens nothing until the first invocation."""

    def __init__(self, factory: Callable[[Settings], Container]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._built: tuple[Settings, Container] | None = None

    def get(self, settings: Settings | None = None) -> Container:
        current = settings or Settings()
        with self._lock:
            if self._built is None or self._built[0] != current:
                self._built = (current, self._factory(current))
            return self._built[1]
