"""Who goes first on the background slot (M5d section 4).

When the background slot is contended, a compaction summary goes first (with the memory flush before
it, for a session that runs there: issue 19), then a cron run that is due, then the heartbeat, then a
tool-output summary. `PrioritySlots` wraps the model client: a request on
the background slot waits in a priority queue (then first come, first served); the main slot is never
held up by it. The priority of a request is the calling thread's, set with `priority(...)`.
"""

from __future__ import annotations

import contextlib
import enum
import heapq
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from boxmaker.loopd.model import Completion


class Priority(enum.IntEnum):
    """Background work, most urgent first."""

    COMPACTION = 0
    CRON = 1
    HEARTBEAT = 2
    SUMMARY = 3


_local = threading.local()


@contextlib.contextmanager
def priority(level: Priority) -> Iterator[None]:
    """Run the block's background-slot requests at `level` (this thread only)."""
    before = getattr(_local, "level", None)
    _local.level = level
    try:
        yield
    finally:
        _local.level = before


def current_priority() -> Priority:
    """This thread's priority (a cron run's when none was set)."""
    level = getattr(_local, "level", None)
    return level if isinstance(level, Priority) else Priority.CRON


class PriorityGate:
    """One holder at a time; waiters are let in by priority, then by arrival."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[tuple[int, int]] = []
        self._order = itertools.count()
        self._busy = False

    @contextlib.contextmanager
    def hold(self, level: Priority) -> Iterator[None]:
        """Wait for the gate at `level`, hold it for the block."""
        ticket = (int(level), next(self._order))
        with self._cond:
            heapq.heappush(self._queue, ticket)
            while self._busy or self._queue[0] != ticket:
                self._cond.wait()
            heapq.heappop(self._queue)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


class PrioritySlots:
    """A model client whose background-slot requests go through a `PriorityGate`.

    Args:
        model: the model client (anything with `complete` and `close`).
        background: the background slot; None (no slots) or equal to `main` means no gate: live
            turns and background work then share one queue, first come first served.
        main: the live sessions' slot.
    """

    def __init__(self, model: Any, background: int | None, main: int | None) -> None:
        self.model = model
        self.background = background
        self.main = main
        self.gate = PriorityGate()

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        slot: int | None,
        max_tokens: int | None = None,
        *,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        """`model.complete`, queued by priority when `slot` is the (separate) background slot; a
        streamed or cancellable request passes `on_text` and `cancel` on."""
        gated = slot is not None and slot == self.background and slot != self.main
        extra: dict[str, Any] = {}
        if on_text is not None or cancel is not None:
            extra = {"on_text": on_text, "cancel": cancel}
        with self.gate.hold(current_priority()) if gated else contextlib.nullcontext():
            result: Completion = self.model.complete(messages, tools, slot, max_tokens, **extra)
        return result
