"""An item's `Source`: the smallest stable anchor memoryd knows for a capture (seed 003 section 9).

memoryd sets it itself, never from the model's word (DESIGN 8):

- a session's call: ``sessions/<session>/<N>.jsonl#<line>``, where N is the session's newest epoch
  log and line (from 1) is the complete line of the assistant record whose ``tool_calls`` carry the
  call id (loopd logs that record before it runs the calls: DESIGN 10.4);
- the same call when that record is not on disk (no log, a record not yet written, a damaged line):
  ``sessions/<session>#call=<call id>``;
- an MCP client's call (issue 17; MCP sessions keep no log): ``mcp:<client>/<session>#call=<call id>``;
- the owner's command: ``owner:<edit id>``.

Ids are checked before they become paths (DESIGN 10.2); only complete lines are read (a torn tail is
not yet a record); nothing here raises: a problem falls back to the session anchor.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from boxmaker.proto import fsio
from boxmaker.proto.ids import OWNER_SESSION, is_session_id

log = logging.getLogger("boxmaker.memoryd.source")

#: A call id that may appear in an anchor (the model server's ids: ``call_…``, ``chatcmpl-…``).
_CALL_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}\Z")
_EPOCH_LOG = re.compile(r"^(0|[1-9][0-9]{0,8})\.jsonl\Z")


def owner_source(edit: str) -> str:
    """The Source of an owner's capture: ``owner:<edit id>``."""
    return f"owner:{edit}"


def mcp_source(client: str, session: str, call: str) -> str:
    """The Source of a capture by an MCP client's call: ``mcp:<client>/<session>#call=<call id>``."""
    return f"mcp:{client}/{session}#call={call}" if _CALL_ID.match(call) else f"mcp:{client}/{session}"


def session_source(sessions: Path | None, session: str, call: str) -> str:
    """The Source of a capture by `session`'s call `call` (module docstring); never raises.

    Args:
        sessions: the home's ``sessions/`` folder (None: no log is looked at).
        session: the session id; call: the tool call id.
    """
    if session == OWNER_SESSION or not is_session_id(session):
        return f"sessions/{session if is_session_id(session) else 'unknown'}"
    fallback = f"sessions/{session}#call={call}" if _CALL_ID.match(call) else f"sessions/{session}"
    if sessions is None or not _CALL_ID.match(call):
        return fallback
    try:
        folder = sessions / session
        epochs = [int(p.name[:-6]) for p in folder.iterdir() if _EPOCH_LOG.match(p.name)]
        if not epochs:
            return fallback
        name = f"{max(epochs)}.jsonl"
        line = _line_of(folder / name, call)
    except (OSError, ValueError) as exc:
        log.warning("the Source of %s call %s falls back to the session: %s", session, call, exc)
        return fallback
    return fallback if line is None else f"sessions/{session}/{name}#{line}"


def _line_of(path: Path, call: str) -> int | None:
    """The 1-based line of the assistant record whose tool_calls carry `call`, or None."""
    lines, _ = fsio.complete_lines(path.read_bytes())
    found = None
    for number, raw in enumerate(lines, start=1):
        if call.encode("ascii") not in raw:
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("type") != "assistant":
            continue
        calls = record.get("tool_calls")
        if isinstance(calls, list) and any(isinstance(c, dict) and c.get("id") == call for c in calls):
            found = number
    return found
