"""Summaries of tool outputs, for recall (M5d section 4.3).

Tool results are not indexed (the bulk of every log, and the way injected text arrives); a tool that opts
in (``[compact] summarise``, `http_fetch` by default) gets a second record, `tool_summary`, for the
index only: a no-tools completion on the background slot whose user text is ``summarise.md`` and the
result, tag-neutralised and cut to ``summary_chars``, labelled like the result. `messages()` ignores it,
so the epoch's prefix does not change. The model call holds nothing; only the append takes the log's
own lock, so a live turn is never delayed. Compaction waits until a session's summaries in flight have
been appended or have failed.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable
from typing import Any

from boxmaker.loopd.compact import cut, neutralise
from boxmaker.loopd.model import ModelError
from boxmaker.loopd.session import Session
from boxmaker.loopd.slots import Priority, priority
from boxmaker.proto.records import ToolResult, ToolSummary, format_time

log = logging.getLogger("boxmaker.loopd")

#: Tools whose results may be summarised (the names `[compact] summarise` accepts).
SUMMARISABLE = frozenset({"http_fetch", "read_file"})
#: The most characters of a result the summary call reads.
RESULT_CAP = 16_000


class Summaries:
    """Runs tool-output summaries in background threads and tracks those in flight per session.

    Args:
        model: the model client.
        slot: the background slot.
        tools: the opted-in tool names.
        prompt: returns ``summarise.md``'s text.
        chars: ``[compact] summary_chars``.
        done: called with the session after its summaries were appended (loopd tells memoryd).
        now: the clock.
    """

    def __init__(
        self,
        model: Any,
        slot: int | None,
        *,
        tools: frozenset[str],
        prompt: Callable[[], str],
        chars: int,
        done: Callable[[Session], None],
        now: Callable[[], dt.datetime],
    ) -> None:
        self.model = model
        self.slot = slot
        self.tools = tools
        self.prompt = prompt
        self.chars = chars
        self.done = done
        self.now = now
        self._cond = threading.Condition()
        self._flight: dict[str, int] = {}
        self._started: set[tuple[str, str]] = set()

    def wanted(self, session: Session) -> list[ToolResult]:
        """Opted-in results of the current epoch that have no summary yet."""
        summarised = {r.tool_call_id for r in session.records if isinstance(r, ToolSummary)}
        return [
            r
            for r in session.records
            if isinstance(r, ToolResult) and r.call in self.tools and r.tool_call_id not in summarised
        ]

    def start(self, session: Session, results: list[ToolResult]) -> None:
        """Summarise `results` of `session` in a background thread (each result once)."""
        with self._cond:
            results = [r for r in results if (session.id, r.tool_call_id) not in self._started]
            if not results:
                return
            self._started.update((session.id, r.tool_call_id) for r in results)
            self._flight[session.id] = self._flight.get(session.id, 0) + len(results)
        thread = threading.Thread(target=self._run, args=(session, results), daemon=True)
        thread.start()

    def wait(self, session_id: str, timeout: float = 600.0) -> bool:
        """Wait until no summary of `session_id` is in flight; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._flight.get(session_id), timeout)

    def in_flight(self, session_id: str) -> int:
        """How many summaries of the session are running."""
        with self._cond:
            return self._flight.get(session_id, 0)

    def _run(self, session: Session, results: list[ToolResult]) -> None:
        try:
            for result in results:
                try:
                    self._one(session, result)
                except Exception:
                    log.exception("summary of %s's %s result failed", session.id, result.call)
                finally:
                    with self._cond:
                        self._flight[session.id] -= 1
                        self._cond.notify_all()
        finally:
            self.done(session)

    def _one(self, session: Session, result: ToolResult) -> None:
        try:
            instruction = self.prompt().strip()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("summarise.md cannot be read (%s): no summary of %s", exc, result.call)
            return
        text = f"{instruction}\n\nThe output of {result.call}:\n{cut(result.content, RESULT_CAP)}"
        try:
            with priority(Priority.SUMMARY):
                completion = self.model.complete([{"role": "user", "content": text}], None, self.slot, 512)
        except ModelError as exc:
            log.warning("no summary of %s in %s: %s", result.call, session.id, exc)
            return
        content = cut(neutralise(completion.content or "").strip(), self.chars)
        if not content:
            return
        session.append(
            ToolSummary(
                time=format_time(self.now()),
                call=result.call,
                tool_call_id=result.tool_call_id,
                content=content,
                data_class=result.data_class,
                untrusted=result.untrusted,
            )
        )
