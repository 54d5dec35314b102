"""The owner's turns while they run: streamed to bxctl, cancelled by it, and shown to a message that
waits for them (issue 18; DESIGN 10.3's ``chat_delta`` and ``loop_admin cancel``).

A `chat` with ``"stream": true`` gets a `chat_delta {"text"}` frame for each piece of the reply's text,
on the same connection, before its `chat_reply` (or `error`). bxctl closing the connection cancels the
turn (a watcher looks at the connection every `WATCH_S` seconds), and so does ``loop_admin cancel
SESSION``, which waits for the turn to close and says what it had done. ``loop_admin turns`` lists the
turns running now: their session, for how long, and what each waits for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from boxmaker.loopd.turn import Control
from boxmaker.proto import wire
from boxmaker.proto.messages import ChatDelta, ToolRun

#: Seconds between two looks at whether bxctl is still connected.
WATCH_S = 0.2
#: How long `cancel` waits for a turn to close, in seconds (a tool call under way finishes first).
CANCEL_WAIT_S = 30.0
#: How long the end of a cancelled turn is remembered for a `cancel` that arrives after it.
REMEMBER_S = 60.0


@dataclass(slots=True)
class Ended:
    """How a turn ended: its code (``ok``, ``cancelled``, a failure's code), the tools it ran, when."""

    code: str
    tools: list[ToolRun]
    at: float


def describe_tools(tools: list[ToolRun]) -> str:
    """``memory (ok), recall (refused:not-found)``, or ``no tool call``."""
    return ", ".join(f"{t.name} ({t.code})" for t in tools) or "no tool call"


class OwnerTurns:
    """The turns bxctl asked for that are running now, and how the recent ones ended."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._running: dict[str, list[Control]] = {}
        self._ended: dict[str, Ended] = {}

    @contextmanager
    def running(self, session: str, stream: bool) -> Iterator[Control]:
        """A turn of `session` for the connection this thread answers: its `Control` streams the text
        when `stream` and is cancelled when the connection closes."""
        exchange = wire.exchange()
        control = Control(started=time.monotonic())
        if stream and exchange is not None:
            control.on_text = lambda text: (
                None if exchange.send(ChatDelta(text=text)) else control.cancel.set()
            )
        with self._guard:
            self._running.setdefault(session, []).append(control)
        done = threading.Event()
        if exchange is not None:
            threading.Thread(target=self._watch, args=(exchange, control, done), daemon=True).start()
        try:
            yield control
        finally:
            done.set()
            with self._guard:
                controls = self._running.get(session, [])
                if control in controls:
                    controls.remove(control)
                if not controls:
                    self._running.pop(session, None)

    def ended(self, session: str, code: str, tools: list[ToolRun]) -> None:
        """Remember how a turn of `session` ended (for a `cancel` that comes after it)."""
        now = time.monotonic()
        with self._guard:
            self._ended = {s: e for s, e in self._ended.items() if now - e.at < REMEMBER_S}
            self._ended[session] = Ended(code, tools, now)

    @staticmethod
    def _watch(exchange: wire.Exchange, control: Control, done: threading.Event) -> None:
        while not done.wait(WATCH_S):
            if exchange.gone():
                control.cancel.set()
                return

    def cancel(self, session: str, wait: float = CANCEL_WAIT_S) -> tuple[str, dict[str, Any]]:
        """Cancel the turns of `session` and wait for them to close; (sentence, data)."""
        with self._guard:
            controls = list(self._running.get(session, []))
            recent = self._ended.get(session)
        if not controls:
            if recent is not None and recent.code == "cancelled":
                ran = describe_tools(recent.tools)
                said = f"the turn in session {session} was already cancelled; it had run {ran}"
                return said, {"code": "ok", "running": False, "tools": _tools(recent.tools)}
            return f"no turn is running in session {session}", {"code": "ok", "running": False, "tools": []}
        asked = time.monotonic()
        for control in controls:
            control.cancel.set()
        deadline = asked + wait
        while time.monotonic() < deadline:
            with self._guard:
                if not any(c in self._running.get(session, []) for c in controls):
                    break
            time.sleep(0.05)
        else:
            return (
                f"asked the turn in session {session} to stop; it is still finishing "
                f"{controls[0].doing} (it stops when that returns)",
                {"code": "ok", "running": True, "tools": []},
            )
        with self._guard:
            last = self._ended.get(session)
        tools = last.tools if last is not None and last.at >= asked else []
        return (
            f"cancelled the turn in session {session}; it had run {describe_tools(tools)}, which is kept",
            {"code": "ok", "running": False, "tools": _tools(tools)},
        )

    def listing(self) -> list[dict[str, Any]]:
        """The turns running now: ``{"session", "seconds", "doing"}``, oldest first."""
        now = time.monotonic()
        with self._guard:
            rows = [
                {"session": session, "seconds": round(now - c.started, 1), "doing": c.doing}
                for session, controls in self._running.items()
                for c in controls
            ]
        return sorted(rows, key=lambda r: -r["seconds"])


def _tools(tools: list[ToolRun]) -> list[dict[str, Any]]:
    return [{"name": t.name, "code": t.code} for t in tools]
