"""loopd's owner commands beyond ``jobs``, ``compacting`` and the erasure (``loop_admin``, DESIGN 10.3,
whose command set is open): ``cancel SESSION``, ``turns`` and ``run JOB`` (issue 18); and how loopd
describes the model server it found.
"""

from __future__ import annotations

from boxmaker.loopd.codes import Code
from boxmaker.loopd.model import ServerInfo
from boxmaker.loopd.owner_turns import OwnerTurns
from boxmaker.loopd.scheduler import JobNotRun, Scheduler
from boxmaker.loopd.session import SessionError, check_session_id
from boxmaker.proto.messages import LoopAdmin, LoopAdminReply

#: Every ``loop_admin`` command loopd answers.
COMMANDS = ("jobs", "run", "turns", "cancel", "compacting", "erase-plan", "erase")

#: Said once in loopd.log (and by bxctl up and status) when the server's chat template cannot take tools.
NO_TOOLS = (
    "the model's chat template cannot take tools (/props chat_template_caps.supports_tools is false): "
    "the model never sees memory or recall; restart llama-server with --jinja and a tool-capable "
    "--chat-template-file (runbook: model-no-tools)"
)


def describe_server(info: ServerInfo) -> str:
    """``llama-server, n_ctx 4,096 per slot, 2 slots`` or ``OpenAI-compatible, context not reported``,
    and ``its chat template cannot take tools`` when the server says so."""
    parts = ["llama-server" if info.llama else "OpenAI-compatible"]
    parts.append(f"n_ctx {info.n_ctx:,} per slot" if info.n_ctx else "context not reported")
    if info.slots is not None:
        parts.append(f"{info.slots} slot{'' if info.slots == 1 else 's'}")
    if info.supports_tools is False:
        parts.append("its chat template cannot take tools (runbook: model-no-tools)")
    return ", ".join(parts)


def owner_command(turns: OwnerTurns, scheduler: Scheduler | None, request: LoopAdmin) -> LoopAdminReply:
    """``cancel SESSION`` (cancel the session's running turn and say what it had done), ``turns`` (the
    turns running now) and ``run JOB`` (start a run of a job now)."""
    if request.command == "turns":
        rows = turns.listing()
        lines = [f"{r['session']}  {r['seconds']:g} s  waiting for {r['doing']}" for r in rows]
        return LoopAdminReply(text="\n".join(lines) or "(no turn is running)", data=rows)
    if request.command == "cancel":
        try:
            session = check_session_id(request.arg)
        except SessionError as exc:
            return LoopAdminReply(text=f"refused (arguments): {exc.why}", data={"code": Code.ARGUMENTS})
        text, data = turns.cancel(session)
        return LoopAdminReply(text=text, data=data)
    if scheduler is None:
        return LoopAdminReply(text="the scheduler is not running", data={"code": Code.JOB_NOT_RUN})
    try:
        session = scheduler.run_now(request.arg)
    except JobNotRun as exc:
        return LoopAdminReply(text=str(exc), data={"code": Code.JOB_NOT_RUN})
    return LoopAdminReply(
        text=f"job {request.arg} started as session {session}; bxctl sessions show {session} --transcript",
        data={"code": "ok", "session": session},
    )
