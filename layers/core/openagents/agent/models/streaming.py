"""What the adapters share: a stream read in a worker thread so that stop is honoured while the
network is silent, cancellable backoff, and the assembly of the step's assistant message.

Stdlib only.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from openagents.agent.models.port import (
    CancelCheck,
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCall,
)

T = TypeVar("T")

POLL_SECONDS = 0.05  # how often a waiting stream looks at the cancel check


class Closer:
    """Holds how to close the stream a worker opened; closing before it is set closes it as soon
    as it is set. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._close: Callable[[], object] | None = None
        self._closed = False

    def set(self, close: Callable[[], object]) -> None:
        with self._lock:
            self._close = close
            closed = self._closed
        if closed:
            _quietly(close)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            close = self._close
        if close is not None:
            _quietly(close)

    @property
    def closed(self) -> bool:
        return self._closed


def _quietly(close: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # closing a stream we abandon: nothing to report
        close()


class _End:
    pass


class _Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class Pump(Generic[T]):
    """Iterate ``produce(closer)`` in a daemon thread and yield its items here, looking at
    ``cancelled`` between items and every ``poll_seconds`` while none comes. On cancel (or when
    the consumer stops early) the closer is closed, which ends the worker's blocking read, and
    iteration stops with ``self.cancelled`` true. The worker's exceptions are raised here."""

    def __init__(
        self,
        produce: Callable[[Closer], Iterable[T]],
        *,
        cancelled: CancelCheck,
        poll_seconds: float = POLL_SECONDS,
        name: str = "model-stream",
    ) -> None:
        self._produce = produce
        self._check = cancelled
        self._poll = poll_seconds
        self._name = name
        self.cancelled = False
        self.closer = Closer()

    def __iter__(self) -> Iterator[T]:
        items: queue.Queue[T | _End | _Raised] = queue.Queue()
        # the caller's context goes with the call (log correlation, the tracer's segment)
        work = contextvars.copy_context().run
        thread = threading.Thread(
            target=work, args=(self._work, items), name=self._name, daemon=True
        )
        thread.start()
        try:
            while not self._cancel_requested():
                try:
                    item = items.get(timeout=self._poll)
                except queue.Empty:
                    continue
                if isinstance(item, _End):
                    return
                if isinstance(item, _Raised):
                    raise item.error
                yield item
        finally:
            self.closer.close()

    def _cancel_requested(self) -> bool:
        self.cancelled = self.cancelled or bool(self._check())
        return self.cancelled

    def _work(self, items: queue.Queue[T | _End | _Raised]) -> None:
        closer = self.closer
        try:
            for item in self._produce(closer):
                if closer.closed:
                    return
                items.put(item)
        except BaseException as error:  # forwarded to the consumer
            if not closer.closed:
                items.put(_Raised(error))
            return
        items.put(_End())


def sleep_unless_cancelled(seconds: float, cancelled: CancelCheck) -> bool:
    """Sleep ``seconds`` in slices, looking at ``cancelled``; True when cancelled."""
    deadline = time.monotonic() + seconds
    while True:
        if cancelled():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, POLL_SECONDS))


def backoff_seconds(attempt: int, *, base: float, cap: float = 20.0) -> float:
    """Full-jitter exponential backoff for retry ``attempt`` (1 for the first retry)."""
    return random.uniform(0, min(cap, base * 2 ** (attempt - 1)))  # noqa: S311 - jitter


class MessageBuilder:
    """Collects a step's output into the assistant ``Message`` of ``Finish``."""

    def __init__(self) -> None:
        self._blocks: list[ContentBlock] = []
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._signature: str | None = None

    def reasoning(self, text: str) -> None:
        self._flush_text()
        self._reasoning.append(text)

    def signature(self, signature: str) -> None:
        self._signature = (self._signature or "") + signature

    def text(self, text: str) -> None:
        self._flush_reasoning()
        self._text.append(text)

    def tool_call(self, call: ToolCall) -> None:
        self._flush_reasoning()
        self._flush_text()
        self._blocks.append(call)

    def end_block(self) -> None:
        self._flush_reasoning()
        self._flush_text()

    def message(self) -> Message:
        self.end_block()
        return Message("assistant", tuple(self._blocks))

    def _flush_text(self) -> None:
        if self._text:
            self._blocks.append(TextBlock("".join(self._text)))
            self._text = []

    def _flush_reasoning(self) -> None:
        if self._reasoning or self._signature:
            self._blocks.append(ReasoningBlock("".join(self._reasoning), self._signature))
            self._reasoning = []
            self._signature = None
