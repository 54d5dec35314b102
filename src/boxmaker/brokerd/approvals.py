"""Calls waiting for the owner: a grant with ``mode = "ask"`` holds its call until the owner approves
or denies it on the admin socket, or the configured timeout passes (docs/brokerd.md).

Ids are ``a-`` and 8 random lowercase base32 characters. Pending approvals live only in memory: a
restart answers none of them (their calls' connections close with the process).
"""

from __future__ import annotations

import base64
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from boxmaker.proto.messages import ToolRequest

Outcome = Literal["approved", "denied", "timeout"]


def new_id() -> str:
    """``a-`` and 8 random lowercase base32 characters."""
    return "a-" + base64.b32encode(secrets.token_bytes(5)).decode("ascii").lower()


@dataclass(slots=True)
class Pending:
    """One call waiting for the owner."""

    id: str
    request: ToolRequest
    grant: str
    since: str
    answered: threading.Event = field(default_factory=threading.Event)
    outcome: Outcome | None = None

    def summary(self) -> dict[str, Any]:
        """As JSON data: id, session, tool, arguments, since, grant, call_id."""
        return {
            "id": self.id,
            "session": self.request.session,
            "call_id": self.request.call_id,
            "tool": self.request.tool,
            "arguments": self.request.arguments,
            "grant": self.grant,
            "since": self.since,
        }


class Approvals:
    """The pending approvals and the owner's answers to them."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pending: dict[str, Pending] = {}

    def open(self, request: ToolRequest, grant: str, since: str) -> Pending:
        """Register a call that waits for the owner."""
        with self._lock:
            pending = Pending(new_id(), request, grant, since)
            while pending.id in self._pending:
                pending.id = new_id()
            self._pending[pending.id] = pending
            return pending

    def wait(self, pending: Pending) -> Outcome:
        """Block until the owner answers or the timeout passes; the approval is then gone."""
        pending.answered.wait(self.timeout_s)
        with self._lock:
            self._pending.pop(pending.id, None)
            if pending.outcome is None:
                pending.outcome = "timeout"
            return pending.outcome

    def answer(self, approval_id: str, approve: bool) -> Pending | None:
        """Approve or deny a pending call; None when no call waits under that id."""
        with self._lock:
            pending = self._pending.pop(approval_id, None)
            if pending is None:
                return None
            pending.outcome = "approved" if approve else "denied"
            pending.answered.set()
            return pending

    def pending(self) -> list[Pending]:
        """The calls waiting now, oldest first."""
        with self._lock:
            return list(self._pending.values())
