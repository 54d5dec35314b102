"""An MCP client's `recall` and `memory` calls (issue 17): the ``mcp_call`` memoryd's MCP socket takes
from ``boxmaker-mcp``.

memoryd cannot see what an MCP client read, so it decides the session's label itself, and only ever
makes it stricter:

1. The session id must be ``mcp-<client>-<20 base32>`` for the client the call names, and equal the
   request's (else an ``invalid-body`` error: nothing is done).
2. The starting label is private, untrusted unless the owner's ``[mcp.clients.<name>] trust`` is
   ``declared`` or ``clean``; the taint the client declared (``untrusted``) raises it; so does the
   label recorded for the session (`files.mcp_sessions`), which the new label is written over only when
   stricter, so neither a reconnect nor a restart lowers it.
3. The call then runs as a session's does (`tool.run`), as an ``mcp`` origin: the identity-write rule
   (`write.origin`) applies identity writes only for a client the owner marked ``clean`` whose session
   is trusted; an untrusted session's ``add`` is kept as an untrusted note and staged, its other
   identity edits refused (``refused:tainted``); a ``declared`` client's are held for the owner
   (``refused:origin`` for all but ``add``). Notes say ``via mcp:<client>``; journal lines and the recall
   log carry ``mcp: {"client", "peer_uid", "peer_pid"}`` (the peer as the kernel saw it).
4. A result with a label (recall, the read actions) raises the session's label by it, as brokerd does
   for its sessions; the answer carries the session's label after the call (``session_label``).
"""

from __future__ import annotations

import logging

import msgspec

from boxmaker.memoryd import sentences
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.tool import run
from boxmaker.memoryd.tool.call import Call
from boxmaker.memoryd.write.answer import Via
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.ids import mcp_client_of
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import McpCall, ToolResponse
from boxmaker.proto.peer import Peer

LOG = logging.getLogger("boxmaker.memoryd")


def call(memory: Memory, message: McpCall, peer: Peer | None) -> ToolResponse:
    """Answer one ``mcp_call`` (module docstring).

    Raises:
        InvalidBody: the session id is not the client's, or differs from the request's.
    """
    client, session, request = message.client, message.session, message.request
    if request.session != session:
        raise InvalidBody("mcp_call", "$.request.session must equal $.session")
    if mcp_client_of(session) != client:
        raise InvalidBody("mcp_call", f"$.session must be mcp-{client}- and 20 base32 characters")
    trust = memory.config.trust_of(client)
    via = Via(client, peer.uid if peer else None, peer.pid if peer else None)
    wanted = Label(DataClass.PRIVATE, trust == "untrusted" or message.untrusted)
    sessions = memory.mcp_sessions
    where = (peer.uid, peer.pid) if peer else None
    try:
        label = sessions.raise_to(session, client, wanted, memory.now(), where)
    except OSError as exc:
        LOG.error("the label of MCP session %s cannot be recorded: %s", session, exc)
        refusal = sentences.unavailable(f"the label of this session cannot be recorded ({exc})")
        return ToolResponse(request.call_id, refusal.sentence, refusal.code, None, None)
    decided = Call(
        request.tool,
        session,
        request.call_id,
        request.arguments,
        label.data_class,
        label.untrusted,
        kind="mcp",
        client_trusted=trust == "clean",
        via=via,
    )
    response = run(memory, decided)
    if response.label is not None:
        try:
            label = sessions.raise_to(session, client, response.label, memory.now(), where)
        except OSError as exc:  # raised in memory still; the answer stands
            LOG.error("the label of MCP session %s cannot be recorded: %s", session, exc)
            label = label.stricter(response.label)
    return msgspec.structs.replace(response, session_label=label)
