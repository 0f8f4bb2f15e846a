"""A new chat's title: after the first model step of a chat's first turn, one tool-less call of
the run's model names the chat (and its session) from the first user message, through the
sanitiser (``naming.generated_title``), only while their titles are the automatic ones. A title
is a nicety: any failure leaves the automatic one, and the turn goes on."""

from __future__ import annotations

import logging
from collections.abc import Callable

from openagents.agent.models.port import (
    CancelCheck,
    ChatModel,
    Finish,
    Message,
    ModelError,
    ModelErrorKind,
    ModelRequest,
    TextBlock,
    TextDelta,
)
from openagents.agent.models.registry import ModelRegistry
from openagents.agent.turn import TurnHost
from openagents.domain import naming
from openagents.store.runs import RunStore

log = logging.getLogger(__name__)
# the reference's prompt (apps/web/app/api/generate-title/route.ts), its input cut as there
TITLE_PROMPT = (
    "You are a developer tool that names coding sessions. Generate a concise title (max 5 "
    "words) for a coding session based on the user's first message below. The title should "
    "help the user quickly identify what this session is about at a glance. Do NOT use quotes "
    "or punctuation around the title. Respond with ONLY the title, nothing else.\n\n"
    "User message:\n"
)
TITLE_INPUT = 2000


class Titles:
    def __init__(
        self,
        runs: RunStore,
        host: TurnHost,
        models: ModelRegistry,
        cancelled: Callable[[str], CancelCheck],
    ) -> None:
        self._runs, self._host, self._models, self._cancelled = runs, host, models, cancelled

    def name(self, run_id: str) -> str | None:
        """The title applied, or None (not a first turn, nothing automatic left to replace, no
        model, a model error, an empty answer). Never raises."""
        try:
            run = self._runs.get(run_id)
            text = self._host.untitled(run) if run is not None else None
            if run is None or not text:
                return None
            model = self._models.model(run.model_id)
            answer = complete(model, TITLE_PROMPT + text[:TITLE_INPUT], self._cancelled(run.id))
            title = naming.generated_title(answer)
            if title is not None:
                self._host.retitle(run, title)
            return title
        except Exception as error:  # a title is a nicety: the automatic one stays
            log.warning("run %s: no generated title: %s", run_id, error)
            return None


def complete(model: ChatModel, prompt: str, cancelled: CancelCheck) -> str:
    """One tool-less model call's text (``ModelError`` for a call that did not finish)."""
    request = ModelRequest(
        "", (Message("user", (TextBlock(prompt),)),), max_tokens=64, purpose="title"
    )
    text: list[str] = []
    for event in model.stream(request, cancelled=cancelled):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, Finish) and event.stop_reason.failure_message is not None:
            raise ModelError(ModelErrorKind.INVALID_RESPONSE, event.stop_reason.failure_message)
    return "".join(text)
