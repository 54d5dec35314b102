"""The owner's requests on brokerd's admin socket (DESIGN 10.3 and 10.5).

``status`` -> ``status_reply`` (role "brokerd", pid, ``ready; 4 built-in grants, 1 owner grant`` or
``grants invalid: <why>``). ``broker_admin`` -> ``broker_admin_reply {text, data}``:

- ``approvals``: the calls waiting for the owner (id, session, tool, arguments, since);
- ``approve ID`` / ``deny ID``: answer one (``refused:not-found`` when nothing waits under ID);
- ``grants``: the owner's grants, the built-ins, and the problems found in ``grants/``;
- ``sessions``: each session's label;
- ``erase-plan`` / ``erase`` (args ``{"sessions", "texts", "erasure_id"}``): an authorised erasure in
  brokerd's files (`boxmaker.brokerd.erase`).

An unknown command answers with data ``{"code": Code.UNKNOWN_COMMAND}`` and a sentence listing the
commands. `text` escapes everything that came from outside (``proto.escape``); `data` is raw JSON.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable

from boxmaker.brokerd import erase
from boxmaker.brokerd.broker import Broker
from boxmaker.brokerd.grants import Grant, GrantSet
from boxmaker.brokerd.ledger import label_json
from boxmaker.brokerd.sentences import Code
from boxmaker.brokerd.tools import SCHEMAS
from boxmaker.proto.escape import escape_line
from boxmaker.proto.messages import BrokerAdmin, BrokerAdminReply, StatusReply


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def describe(grants: GrantSet) -> str:
    """``ready; 4 built-in grants, 1 owner grant`` or ``grants invalid: grants/x.toml: why``."""
    if not grants.valid:
        first = grants.problems[0]
        more = f" (and {len(grants.problems) - 1:,} more)" if len(grants.problems) > 1 else ""
        return f"grants invalid: {first.file}: {first.why}{more}"
    builtin = _plural(len(grants.builtin), "built-in grant")
    unknown = unknown_tools(grants)
    tail = f"; {_plural(len(unknown), 'grant')} naming no known tool (bxctl grants)" if unknown else ""
    return f"ready; {builtin}, {_plural(len(grants.owner), 'owner grant')}{tail}"


def unknown_tools(grants: GrantSet) -> list[tuple[str, str]]:
    """(file, why) for each owner grant whose tool no runtime knows (a misspelling, often): such a
    grant never matches a call, so the owner is told, naming the closest known tool."""
    known = sorted(SCHEMAS)
    found = []
    for grant in grants.owner:
        if grant.tool not in SCHEMAS:
            close = difflib.get_close_matches(grant.tool, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            why = f"unknown tool {grant.tool!r}; {hint}(known: {', '.join(known)})"
            found.append((f"grants/{grant.id}.toml", why))
    return found


def status(broker: Broker) -> StatusReply:
    """brokerd's `status_reply`."""
    grants = broker.grants.current()
    data = {
        "grants_valid": grants.valid,
        "pending_approvals": len(broker.approvals.pending()),
        "damage": [{"file": f.file, "text": f.sentence} for f in broker.damage],
    }
    detail = describe(grants)
    if broker.damage:
        more = f" (and {len(broker.damage) - 1} more)" if len(broker.damage) > 1 else ""
        detail += f"; DAMAGED: {broker.damage[0].sentence}{more}"
    return StatusReply(role="brokerd", pid=os.getpid(), detail=detail, data=data)


def handle(broker: Broker, request: BrokerAdmin) -> BrokerAdminReply:
    """Run one owner command."""
    if request.command in ("erase-plan", "erase"):  # seed 003 section 12.3 (`erase` module)
        return erase.handle(broker, request)
    command = COMMANDS.get(request.command)
    if command is None:
        names = ", ".join([*sorted(COMMANDS), "erase-plan", "erase"])
        return BrokerAdminReply(
            text=f"brokerd has no command {request.command!r}; the commands are {names}",
            data={"code": Code.UNKNOWN_COMMAND},
        )
    return command(broker, request.arg)


def approvals(broker: Broker, arg: str) -> BrokerAdminReply:
    """The calls waiting for the owner, oldest first."""
    del arg
    waiting = broker.approvals.pending()
    lines = [f"{_plural(len(waiting), 'call')} waiting for you"]
    for pending in waiting:
        request = pending.request
        args = json.dumps(request.arguments, ensure_ascii=False, sort_keys=True)
        lines.append(
            f"{pending.id}  since {pending.since}  session {request.session}  {request.tool} "
            f"{escape_line(args)}  (grant {pending.grant})"
        )
    if waiting:
        lines.append("answer with `bxctl approve ID` or `bxctl deny ID`")
    return BrokerAdminReply(text="\n".join(lines), data={"approvals": [p.summary() for p in waiting]})


def _answer(approve: bool) -> Callable[[Broker, str], BrokerAdminReply]:
    verb = "approved" if approve else "denied"

    def answer(broker: Broker, arg: str) -> BrokerAdminReply:
        pending = broker.approvals.answer(arg, approve)
        if pending is None:
            return BrokerAdminReply(
                text=f"no call waits under the id '{escape_line(arg)}' (it may have timed out)",
                data={"code": Code.NOT_FOUND},
            )
        request = pending.request
        text = f"{verb} {pending.id}: {request.tool} in session {request.session}"
        return BrokerAdminReply(text=text, data={"id": pending.id, "outcome": verb})

    return answer


def _grant_line(grant: Grant) -> str:
    limits = [
        f"{key} {', '.join(values)}"
        for key, values in grant.summary().items()
        if key in ("paths", "hosts", "patterns") and isinstance(values, list) and values
    ]
    extra = f"; {'; '.join(limits)}" if limits else ""
    return escape_line(
        f"{grant.id}: {grant.tool} {grant.mode.value}, max_taint {grant.max_taint.value}, "
        f"result {grant.result_class.value}{' untrusted' if grant.untrusted else ''}{extra}"
    )


def grants(broker: Broker, arg: str) -> BrokerAdminReply:
    """The owner's grants, the built-ins, and any problems."""
    del arg
    current = broker.grants.current()
    lines = [f"grants in {broker.layout.grants}: {describe(current)}", "owner grants:"]
    lines += [f"  {_grant_line(g)}" for g in current.owner] or ["  (none)"]
    lines.append("built in:")
    lines += [f"  {_grant_line(g)}" for g in current.builtin]
    if current.problems:
        lines.append("problems (every call is refused until they are fixed; runbook: grants-invalid):")
        lines += [f"  {escape_line(p.file)}: {escape_line(p.why)}" for p in current.problems]
    unknown = unknown_tools(current)
    if unknown:
        lines.append("problems (these grants never match a call; runbook: grants-invalid):")
        lines += [f"  {escape_line(file)}: {escape_line(why)}" for file, why in unknown]
    data = {
        "owner": [g.summary() for g in current.owner],
        "builtin": [g.summary() for g in current.builtin],
        "problems": [{"file": p.file, "why": p.why} for p in current.problems],
        "unknown_tools": [{"file": file, "why": why} for file, why in unknown],
        "valid": current.valid,
    }
    return BrokerAdminReply(text="\n".join(lines), data=data)


def sessions(broker: Broker, arg: str) -> BrokerAdminReply:
    """Each session's label."""
    del arg
    labels = broker.labels.all()
    lines = [f"{_plural(len(labels), 'session')}"]
    for session, label in labels.items():
        lines.append(f"  {session}: {label.data_class.value}{', untrusted' if label.untrusted else ''}")
    data = {"sessions": {s: label_json(label) for s, label in labels.items()}}
    return BrokerAdminReply(text="\n".join(lines), data=data)


COMMANDS: dict[str, Callable[[Broker, str], BrokerAdminReply]] = {
    "approvals": approvals,
    "approve": _answer(True),
    "deny": _answer(False),
    "grants": grants,
    "sessions": sessions,
}
