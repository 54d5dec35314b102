"""Ids and their forms (DESIGN 10.2).

- `SessionId`: ``^[a-z0-9][a-z0-9-]{0,63}$``. New chat sessions are ``chat-`` and 20 random lowercase
  base32 characters; the heartbeat is ``heartbeat``; a cron run is ``job-<name>-t<unix seconds>``; an
  MCP client's session (issue 17) is ``mcp-<client>-`` and 20 random lowercase base32 characters, the
  client's name being `MCP_CLIENT_PATTERN` (``[a-z0-9-]{1,24}``), so the longest is 49 characters.
- Edit ids ``YYYY-MM-DD-NNNN`` (M5a section 3); pending ids ``p-YYYY-MM-DD-NNNN``.

Anything else is refused at every boundary (`InvalidId`) before it can become a path.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets

from boxmaker.proto.errors import InvalidId

SESSION_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}\Z"
EDIT_ID_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{4,}\Z"
PENDING_ID_PATTERN = r"^p-[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{4,}\Z"

#: An MCP client's name (issue 17): what ``boxmaker-mcp --client`` takes and its session ids carry.
MCP_CLIENT_PATTERN = r"^[a-z0-9-]{1,24}\Z"
#: An MCP client's session id: ``mcp-<client>-<20 base32>``.
MCP_SESSION_PATTERN = r"^mcp-(?P<client>[a-z0-9-]{1,24})-[a-z2-7]{20}\Z"

_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_MCP_CLIENT = re.compile(MCP_CLIENT_PATTERN)
_MCP_SESSION = re.compile(MCP_SESSION_PATTERN)
_EDIT_ID = re.compile(EDIT_ID_PATTERN)
_PENDING_ID = re.compile(PENDING_ID_PATTERN)
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"

#: The session name the owner's own writes carry in journals and notes headers (DESIGN 10.4).
OWNER_SESSION = "owner"


def is_session_id(value: str) -> bool:
    """True when `value` has the SessionId form."""
    return _SESSION_ID.match(value) is not None


def session_id(value: str) -> str:
    """Return `value` if it is a valid SessionId.

    Raises:
        InvalidId: when it is not (the sentence gives the form).
    """
    if not is_session_id(value):
        raise InvalidId("session id", value, "1 to 64 characters of a-z, 0-9 and '-', not starting with '-'")
    return value


def new_chat_session_id() -> str:
    """A new chat session id: ``chat-`` and 20 random lowercase base32 characters."""
    return "chat-" + "".join(secrets.choice(_BASE32) for _ in range(20))


def is_mcp_client(value: str) -> bool:
    """True when `value` is an MCP client's name (`MCP_CLIENT_PATTERN`)."""
    return _MCP_CLIENT.match(value) is not None


def new_mcp_session_id(client: str) -> str:
    """A new session id for the MCP client `client`: ``mcp-<client>-`` and 20 random base32 characters.

    Raises:
        InvalidId: when `client` is not an MCP client's name.
    """
    if not is_mcp_client(client):
        raise InvalidId("MCP client name", client, "1 to 24 characters of a-z, 0-9 and '-'")
    return f"mcp-{client}-" + "".join(secrets.choice(_BASE32) for _ in range(20))


def mcp_client_of(session: str) -> str | None:
    """The MCP client a session id of the form ``mcp-<client>-<20 base32>`` names, else None."""
    match = _MCP_SESSION.match(session)
    return match.group("client") if match else None


def edit_id(day: dt.date, n: int) -> str:
    """The edit id of the `n`-th edit (from 1) of `day`: ``YYYY-MM-DD-NNNN``."""
    return f"{day.isoformat()}-{n:04d}"


def pending_id(day: dt.date, n: int) -> str:
    """The pending id of the `n`-th staged write (from 1) of `day`: ``p-YYYY-MM-DD-NNNN``."""
    return f"p-{day.isoformat()}-{n:04d}"


def parse_edit_id(value: str) -> tuple[dt.date, int]:
    """Split an edit id into its day and its number.

    Raises:
        InvalidId: when `value` is not ``YYYY-MM-DD-NNNN`` with a real date.
    """
    return _parse_dated(value, _EDIT_ID, "edit id", "YYYY-MM-DD-NNNN", 0)


def parse_pending_id(value: str) -> tuple[dt.date, int]:
    """Split a pending id into its day and its number.

    Raises:
        InvalidId: when `value` is not ``p-YYYY-MM-DD-NNNN`` with a real date.
    """
    return _parse_dated(value, _PENDING_ID, "pending id", "p-YYYY-MM-DD-NNNN", 2)


def _parse_dated(value: str, form: re.Pattern[str], what: str, shape: str, skip: int) -> tuple[dt.date, int]:
    if not form.match(value):
        raise InvalidId(what, value, shape)
    try:
        day = dt.date.fromisoformat(value[skip : skip + 10])
    except ValueError:
        raise InvalidId(what, value, shape + " with a real date") from None
    return day, int(value[skip + 11 :])
