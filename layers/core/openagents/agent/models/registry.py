"""Model ids (``provider/model``), the configured list of available models, and the adapter each
one uses. Adapters and their SDK clients are built on first use, once per registry."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from openagents.agent.models.port import ChatModel, ModelUnavailable, Usage
from openagents.settings import Mode, ModelPrice, Settings

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from openai import OpenAI

T = TypeVar("T")
PROVIDERS = ("bedrock", "openai", "scripted")
SCRIPTED_MODEL_ID = "scripted/default"
NO_MODELS = (
    "No model is configured. Set OPENAGENTS_MODELS to a comma-separated list of model ids: "
    "bedrock/<model or inference profile id> (AWS credentials and region), "
    "openai/<model> with OPENAGENTS_OPENAI_BASE_URL and/or OPENAGENTS_OPENAI_API_KEY "
    "(OpenAI, Ollama, vLLM, LM Studio, LiteLLM); "
    "or, in local mode, OPENAGENTS_SCRIPTED_MODEL_FILE for scripted/default."
)


@dataclass(frozen=True)
class ModelId:
    provider: str
    name: str

    @classmethod
    def parse(cls, model_id: str) -> ModelId:
        """``provider/model``; the model part may itself hold ``/`` (an inference profile ARN)."""
        provider, slash, name = model_id.strip().partition("/")
        if not slash or not provider or not name:
            raise ModelUnavailable(
                f"Model id {model_id!r} is not of the form provider/model "
                f"(providers: {', '.join(PROVIDERS)})"
            )
        if provider not in PROVIDERS:
            raise ModelUnavailable(
                f"Unknown model provider {provider!r} in {model_id!r} "
                f"(providers: {', '.join(PROVIDERS)})"
            )
        return cls(provider, name)

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


@dataclass(frozen=True)
class ModelInfo:
    """An available model, as ``GET /api/models`` lists it."""

    id: str
    provider: str
    name: str
    context_window: int  # tokens
    price: ModelPrice | None = None  # USD per million tokens (OPENAGENTS_MODEL_PRICES)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.provider,
            "name": self.name,
            "contextWindow": self.context_window,
        }

    def cost(self, usage: Usage) -> float | None:
        """The estimated cost in USD of ``usage`` on this model; None without a price."""
        if self.price is None:
            return None
        price = self.price
        total = (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read
            + usage.cache_write_tokens * price.cache_write
        )
        return round(total / 1_000_000, 6)


ModelFactory = Callable[[ModelId], ChatModel]


class ModelRegistry:
    """The available models in their configured order (the first is the default) and, for each,
    the factory of its adapter. ``unconfigured`` explains ids that were asked for but cannot run
    (e.g. ``openai/x`` with no endpoint), for the error message."""

    def __init__(
        self,
        models: Mapping[str, tuple[ModelInfo, ModelFactory]],
        *,
        unconfigured: Mapping[str, str] | None = None,
    ) -> None:
        self._models = dict(models)
        self._unconfigured = dict(unconfigured or {})
        self._built: dict[str, ChatModel] = {}
        self._lock = threading.Lock()

    def available(self) -> tuple[ModelInfo, ...]:
        return tuple(info for info, _ in self._models.values())

    def default(self) -> ModelInfo:
        """The first configured model; ``ModelUnavailable`` naming the settings when none is."""
        for info, _ in self._models.values():
            return info
        raise ModelUnavailable(NO_MODELS)

    def info(self, model_id: str) -> ModelInfo:
        """The model behind ``model_id``, or ``ModelUnavailable`` (the API's 400 on modelId)."""
        parsed = ModelId.parse(model_id)
        entry = self._models.get(str(parsed))
        if entry is not None:
            return entry[0]
        if not self._models:
            raise ModelUnavailable(NO_MODELS)
        reason = self._unconfigured.get(str(parsed))
        offered = ", ".join(self._models)
        if reason:
            raise ModelUnavailable(f"Model {parsed} is not available: {reason}")
        raise ModelUnavailable(f"Model {parsed} is not available (available: {offered})")

    def offered(self, model_id: str, field: str) -> str:
        """The canonical id of an offered model, for a field that stores one; else
        ``ModelUnavailable`` naming ``field`` (nothing stored)."""
        try:
            return self.info(model_id).id
        except ModelUnavailable as exc:
            raise ModelUnavailable(exc.message, field=field) from None

    def model(self, model_id: str) -> ChatModel:
        """The adapter of ``model_id``, built on first use."""
        info = self.info(model_id)
        with self._lock:
            built = self._built.get(info.id)
            if built is None:
                built = self._models[info.id][1](ModelId(info.provider, info.name))
                self._built[info.id] = built
            return built


def build_registry(
    settings: Settings,
    *,
    bedrock_client: Callable[[], BedrockRuntimeClient] | None = None,
    openai_client: Callable[[], OpenAI] | None = None,
) -> ModelRegistry:
    """The registry the settings describe. The SDK clients come from the given factories (tests)
    or are made on first use: boto3's ``bedrock-runtime`` in the configured region, and
    ``openai.OpenAI`` on the configured base URL and key."""
    bedrock = _once(bedrock_client or (lambda: _bedrock_client(settings)))
    openai = _once(openai_client or (lambda: _openai_client(settings)))
    wanted = list(settings.offered_models)

    models: dict[str, tuple[ModelInfo, ModelFactory]] = {}
    unconfigured: dict[str, str] = {}
    for raw in wanted:
        parsed = ModelId.parse(raw)
        key = str(parsed)
        if parsed.provider == "bedrock":
            factory: ModelFactory | str = _bedrock_factory(settings, bedrock)
        elif parsed.provider == "openai":
            factory = _openai_factory(settings, openai)
        else:
            factory = _scripted_factory(settings, parsed)
        if isinstance(factory, str):
            unconfigured[key] = factory
            continue
        window = settings.model_context_windows.get(key, settings.default_context_window)
        price = settings.model_prices.get(key)
        models[key] = (ModelInfo(key, parsed.provider, parsed.name, window, price), factory)
    return ModelRegistry(models, unconfigured=unconfigured)


def _bedrock_factory(
    settings: Settings, client: Callable[[], BedrockRuntimeClient]
) -> ModelFactory:
    def factory(model: ModelId) -> ChatModel:
        from openagents.agent.models.bedrock import BedrockModel

        return BedrockModel(client(), model.name, max_attempts=settings.model_max_attempts)

    return factory


def _openai_factory(settings: Settings, client: Callable[[], OpenAI]) -> ModelFactory | str:
    if settings.openai_base_url is None and settings.openai_api_key is None:
        return "set OPENAGENTS_OPENAI_BASE_URL and/or OPENAGENTS_OPENAI_API_KEY"

    def factory(model: ModelId) -> ChatModel:
        from openagents.agent.models.openai_compat import OpenAICompatModel

        return OpenAICompatModel(
            client(),
            model.name,
            max_attempts=settings.model_max_attempts,
            max_tokens_param=_max_tokens_param(settings.openai_base_url),
        )

    return factory


def _scripted_factory(settings: Settings, parsed: ModelId) -> ModelFactory | str:
    if parsed.name != "default":
        return f"the scripted model is {SCRIPTED_MODEL_ID}"
    script = settings.scripted_model_file
    if settings.mode is not Mode.LOCAL or script is None:
        return "set OPENAGENTS_SCRIPTED_MODEL_FILE (local mode only)"

    def factory(model: ModelId) -> ChatModel:
        from openagents.agent.models.scripted import ScriptedModel

        return ScriptedModel(script, model_id=str(model))

    return factory


def _max_tokens_param(base_url: str | None) -> str:
    """OpenAI's own API wants ``max_completion_tokens`` (its reasoning models refuse
    ``max_tokens``); the compatible servers all take ``max_tokens``."""
    if base_url is None or "api.openai.com" in base_url:
        return "max_completion_tokens"
    return "max_tokens"


def _once(make: Callable[[], T]) -> Callable[[], T]:
    made: list[T] = []
    lock = threading.Lock()

    def get() -> T:
        with lock:
            if not made:
                made.append(make())
            return made[0]

    return get


def _bedrock_client(settings: Settings) -> BedrockRuntimeClient:
    import boto3
    from botocore.config import Config

    # our own bounded, cancellable retries (BedrockModel); a long read for slow first tokens
    config = Config(retries={"total_max_attempts": 1}, read_timeout=300, connect_timeout=10)
    return boto3.client("bedrock-runtime", region_name=settings.region, config=config)


def _openai_client(settings: Settings) -> OpenAI:
    from openai import OpenAI

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    # local servers ignore the key, but the SDK insists on one
    return OpenAI(
        base_url=settings.openai_base_url,
        api_key=key or "not-needed",
        max_retries=0,  # our own bounded, cancellable retries (OpenAICompatModel)
        timeout=300.0,
    )
