"""One MCP session as this process keeps it (issue 17): its client, its id, and the taint bit.

stdio MCP starts one server process per client session, so the session lives as long as the process.
The taint bit only rises: an optional ``taint: "untrusted"`` argument or a request ``_meta`` flag
``boxmaker/session-untrusted: true`` raises it (so does any other value of either but null, and
``false`` for the flag: a declaration written a little off still counts; nothing the client or the
model sends can lower it), and so does an answer of memoryd saying the session is untrusted. It is sent
on every call; memoryd keeps its own record of the session's label, which never gets laxer either.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from typing import Any

from boxmaker.proto.ids import new_mcp_session_id

#: The request ``_meta`` key a client sets to declare that its session read untrusted content.
TAINT_META_KEY = "boxmaker/session-untrusted"
#: The one value of the ``taint`` argument that means anything.
TAINT_VALUE = "untrusted"


class Session:
    """This process's MCP session.

    Args:
        client: the client's name (``[a-z0-9-]{1,24}``, checked by the caller).
        untrusted: the taint the session starts with (``--untrusted``).
    """

    def __init__(self, client: str, untrusted: bool = False) -> None:
        self.client = client
        self.id = new_mcp_session_id(client)
        self._untrusted = untrusted
        self._lock = threading.Lock()
        self._calls = itertools.count(1)

    @property
    def untrusted(self) -> bool:
        """Whether the session has declared (or memoryd has said) that it read untrusted content."""
        return self._untrusted

    def raise_taint(self, untrusted: bool) -> bool:
        """Raise the bit when `untrusted` (never lowers it); returns the bit now."""
        with self._lock:
            self._untrusted = self._untrusted or untrusted
            return self._untrusted

    def declared(self, arguments: dict[str, Any], meta: Mapping[str, Any] | None) -> dict[str, Any]:
        """Take the client's declarations out of a call: raises the bit on ``taint: "untrusted"`` or
        the ``_meta`` flag, and returns the arguments without ``taint`` (memoryd's tools do not take it).

        Fail closed: any ``taint`` value but null (``true``, ``"Untrusted"``, ``"clean"``) and any flag
        value but ``false`` or null (``"true"``, ``1``) count as a declaration too, so a model that writes
        it a little off is never taken for a session that declared nothing."""
        rest = dict(arguments)
        taint = rest.pop("taint", None)
        flag = None if meta is None else meta.get(TAINT_META_KEY)
        self.raise_taint(taint is not None or flag not in (None, False))
        return rest

    def next_call_id(self) -> str:
        """A call id unique within the session (``c1``, ``c2`` …)."""
        return f"c{next(self._calls)}"
