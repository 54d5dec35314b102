"""loopd's process: the lock, the model check, the owner socket, signals (M5a section 9; DESIGN 10.1).

Start-up order: take the home's loop lock (one loopd per home), check the session logs written since
the last checkpoint (`startcheck`: damage is named in one sentence, and loopd starts anyway), ask the
model server for its per-slot
context and slot count (llama-server's ``/props`` and ``/slots``, within `model.PROBE_TIMEOUT_S`
seconds, never the model timeout) and refuse a configured ``[expect] n_ctx`` that disagrees, then bind
the owner socket. loopd starts without memoryd (only new
sessions fail, with ``memory-unavailable``) and without a model server (turns fail with
``model-unreachable`` until it answers; the ``n_ctx`` check then runs at the first turn).
SIGTERM and SIGINT remove the socket and release the lock.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from boxmaker.loopd import erase, startcheck
from boxmaker.loopd.broker import BrokerdClient
from boxmaker.loopd.codes import Code
from boxmaker.loopd.config import Config
from boxmaker.loopd.jobs import JobsInvalid
from boxmaker.loopd.loop import Loop, LoopSettings, utc_now
from boxmaker.loopd.memory import MemorydSource
from boxmaker.loopd.model import ModelClient, ModelError, ServerInfo
from boxmaker.loopd.owner_admin import COMMANDS, NO_TOOLS, describe_server, owner_command
from boxmaker.loopd.owner_turns import OwnerTurns, describe_tools
from boxmaker.loopd.scheduler import HEARTBEAT_SESSION, Scheduler
from boxmaker.loopd.slots import PrioritySlots
from boxmaker.loopd.summaries import Summaries
from boxmaker.loopd.turn import TurnFailed
from boxmaker.proto import homecheck
from boxmaker.proto.daemon import serve_until_signal
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.fsio import FileLock, LockHeld, ensure_dir
from boxmaker.proto.home import ensure_home
from boxmaker.proto.messages import (
    Body,
    Chat,
    ChatReply,
    Error,
    LoopAdmin,
    LoopAdminReply,
    Status,
    StatusReply,
)
from boxmaker.proto.sockpath import check_socket_path
from boxmaker.proto.startcheck import Finding, report
from boxmaker.proto.wire import FrameServer

log = logging.getLogger("boxmaker.loopd")

OWNER_KINDS = frozenset({"chat", "status", "loop_admin"})

#: The fixed error of a chat that names a scheduled session's id (issue 7: a live session cannot claim a
#: maintenance job's run, nor the heartbeat).
SESSION_RESERVED = (
    "{} is a scheduled session's id (job-… runs and heartbeat belong to the scheduler); a chat cannot "
    "take it: use another id or none"
)


def reserved_session(session: str) -> bool:
    """True for the ids only the scheduler uses: ``heartbeat`` and ``job-…``."""
    return session == HEARTBEAT_SESSION or session.startswith("job-")


#: Seconds between asks of a model server that has not answered yet.
RETRY_S = 5.0


class StartFailed(BoxmakerError):
    """Raised when loopd cannot start; the sentence says why (runbook loopd-start-failed)."""

    def __init__(self, why: str, runbook: str = "loopd-start-failed") -> None:
        super().__init__(f"loopd cannot start: {why} (runbook: {runbook})")


class ServerMismatch(BoxmakerError):
    """Raised when the model server disagrees with loopd.toml (its context per slot, its slots); the
    sentence names every disagreement and what to change (runbook loopd-start-failed)."""


def mismatches(info: ServerInfo, expected: int | None, main: int) -> list[str]:
    """What in loopd.toml the server contradicts: ``[expect] n_ctx`` against its context per slot,
    ``[slots] main`` against its slots. Empty when they agree (or it does not say)."""
    found = []
    if expected is not None and info.n_ctx is not None and info.n_ctx != expected:
        found.append(
            f"it has {info.n_ctx:,} tokens of context per slot but [expect] n_ctx says {expected:,} (set "
            f"[expect] n_ctx = {info.n_ctx}, or restart llama-server with -c {expected} times its -np)"
        )
    if info.slots is not None and main >= info.slots:
        found.append(
            f"[slots] main = {main} but it has {info.slots} slot{'s' if info.slots != 1 else ''} "
            f"(0 to {info.slots - 1}; use one of those, or restart llama-server with more -np)"
        )
    return found


def check_server(info: ServerInfo, config: Config) -> None:
    """Refuse a model server that contradicts loopd.toml.

    Raises:
        ServerMismatch: naming every disagreement at once.
    """
    found = mismatches(info, config.expect_n_ctx, config.main_slot)
    if found:
        raise ServerMismatch(
            f"the model server at {config.model_url} disagrees with loopd.toml: " + "; ".join(found)
        )


class Server:
    """loopd running: its lock, loop and owner socket."""

    def __init__(self, config: Config) -> None:
        self.config = config
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        self.api_key_set = bool(api_key)  # said by status; the key itself never leaves the client
        self.model = ModelClient(
            config.model_url, model=config.model_name, api_key=api_key, timeout=config.model_timeout
        )
        self.info: ServerInfo | None = None
        self.lock = FileLock(config.layout.loop_lock)
        settings = self.settings(None)
        self.slots = PrioritySlots(self.model, settings.background_slot, settings.main_slot)
        memory = MemorydSource(config.memory_socket)
        self.summaries = Summaries(
            self.slots,
            settings.background_slot,
            tools=config.summarise,
            prompt=lambda: config.summarise_prompt.read_text(encoding="utf-8"),
            chars=config.summary_chars,
            done=lambda session: self.loop.updated(session),  # noqa: PLW0108 (self.loop comes next)
            now=utc_now,
        )
        self.loop = Loop(
            config.layout.sessions,
            self.slots,
            BrokerdClient(config.broker_socket, config.broker_timeout),
            memory,
            lambda: config.system_prompt.read_text(encoding="utf-8"),
            settings=settings,
            rescrub=erase.rescrub,
            compact_prompt=lambda: config.compact_prompt.read_text(encoding="utf-8"),
            summaries=self.summaries,
        )
        self.scheduler: Scheduler | None = None
        self.turns = OwnerTurns()
        self.socket = FrameServer(config.owner_socket, self.handle, OWNER_KINDS, 30.0, config.limits)
        self._info_lock = threading.Lock()
        self._unanswered = ""
        self._said = ""
        self.problem = ""  # what the model server contradicts in loopd.toml, while it does
        self.damage: list[Finding] = []  # what the start-up check found (`startcheck`)
        self._checked = False

    def apply(self, settings: LoopSettings) -> None:
        """Use new settings everywhere: the loop, the background slot's gate, the summaries."""
        self.loop.settings = settings
        self.slots.background, self.slots.main = settings.background_slot, settings.main_slot
        self.summaries.slot = settings.background_slot

    def settings(self, info: ServerInfo | None) -> LoopSettings:
        """The loop's settings: slots only for a server that has them (llama-server), and the context
        per slot as the server reports it, else ``[expect] n_ctx``."""
        slotted = info is None or info.llama
        n_ctx = (info.n_ctx if info is not None else None) or self.config.expect_n_ctx
        background = self.config.background_slot
        if info is not None and info.slots is not None and background >= info.slots:
            log.warning(
                "[slots] background = %d but the model server has %d slot(s): background work shares "
                "slot %d with live sessions",
                background,
                info.slots,
                self.config.main_slot,
            )
            background = self.config.main_slot
        return LoopSettings(
            main_slot=self.config.main_slot if slotted else None,
            tool_calls_per_turn=self.config.tool_calls_per_turn,
            max_tokens=self.config.max_tokens,
            background_slot=background if slotted else None,
            n_ctx=n_ctx,
            threshold=self.config.threshold,
            summary_chars=self.config.summary_chars,
            compact_after_turn=True,
        )

    def start(self) -> None:
        """Everything up to serving.

        Raises:
            StartFailed: with the reason.
        """
        unsafe = homecheck.check_loopd(self.config.layout)  # once per start, before any socket
        if unsafe is not None:
            raise StartFailed(unsafe.what, runbook=unsafe.runbook)
        try:
            check_socket_path(self.config.owner_socket)
            ensure_home(self.config.home)
            ensure_dir(self.config.layout.sessions)
            self.lock.acquire()
        except (BoxmakerError, OSError) as exc:
            raise StartFailed(str(exc)) from None
        try:
            self.damage = startcheck.check(self.config.layout.sessions)
            self._checked = True
            report(log, "loopd", self.damage)
            self.checkpoint()
            self.config.system_prompt.read_text(encoding="utf-8")
            self.config.compact_prompt.read_text(encoding="utf-8")
            self.scheduler = Scheduler(
                self.loop,
                self.config.layout.jobs,
                self.config.heartbeat_every_s,
                self.config.heartbeat_prompt,
            )
            self.server_info()
            self.socket.start()
            self.scheduler.start()
        except JobsInvalid as exc:
            self.stop()
            raise StartFailed(str(exc), runbook="jobs-invalid") from None
        except (BoxmakerError, OSError, UnicodeDecodeError) as exc:
            self.stop()
            if isinstance(exc, StartFailed):
                raise
            raise StartFailed(str(exc)) from None
        log.info("listening on %s", self.config.owner_socket)

    def server_info(self) -> ServerInfo | None:
        """The model server's context and slots, asked once it answers; checks ``[expect] n_ctx``.

        Raises:
            ServerMismatch: the server contradicts loopd.toml (its context per slot, its slots).
        """
        with self._info_lock:
            if self.info is not None:
                return self.info
            try:
                info = self.model.server_info()
            except ModelError as exc:
                if str(exc) != self._unanswered:  # once per reason, not at every retry
                    log.warning("model server not answering yet: %s", exc)
                    self._unanswered = str(exc)
                return None
            try:
                check_server(info, self.config)
            except ServerMismatch as exc:
                self.problem = str(exc)
                raise
            self.problem = ""
            self.apply(self.settings(info))
            log.info("model server %s: %s", self.config.model_url, describe_server(info))
            if info.supports_tools is False:
                log.warning("%s", NO_TOOLS)
            self.info = info
            return info

    def handle(self, kind: str, body: Body) -> Body:
        """Answer one owner request."""
        if isinstance(body, Status):
            return self.status()
        if isinstance(body, LoopAdmin):
            return self.admin(body)
        if not isinstance(body, Chat):
            return Error(code="unknown-kind", message=f"loopd does not answer {kind}", runbook="")
        if body.session is not None and reserved_session(body.session):
            return Error(code="session-reserved", message=SESSION_RESERVED.format(body.session), runbook="")
        session = body.session or self.loop.new_id()
        with self.turns.running(session, body.stream) as control:
            try:
                self.server_info()
                result = self.loop.turn(session, body.text, control=control)
            except TurnFailed as exc:
                self.turns.ended(session, exc.code, exc.tools)
                ran = (
                    f" (before it stopped it ran {describe_tools(exc.tools)}, which is kept)"
                    if exc.tools
                    else ""
                )
                return Error(code=exc.code, message=exc.message + ran, runbook=exc.runbook)
            except ServerMismatch as exc:
                return Error(code="model-mismatch", message=str(exc), runbook="loopd-start-failed")
            self.turns.ended(session, "ok", result.tools)
        return ChatReply(
            session=result.session,
            turn=result.turn,
            reply=result.reply,
            tools=result.tools,
            untrusted=result.untrusted,
            cut=result.cut,
            epoch=result.epoch,
            compacted=result.compacted,
            warning=result.warning,
        )

    def admin(self, request: LoopAdmin) -> LoopAdminReply:
        """The owner's commands: ``jobs`` (each job, its next run and its last result),
        ``compacting`` (the sessions being compacted now), and ``erase-plan`` / ``erase`` (an
        authorised erasure in loopd's files and the model server's cache; `erase` module)."""
        if request.command in ("erase-plan", "erase"):
            return self.erase(request)
        if request.command == "compacting":
            busy = self.loop.compacting()
            return LoopAdminReply(text="\n".join(busy) or "(none)", data=busy)
        if request.command in ("cancel", "turns", "run"):
            return owner_command(self.turns, self.scheduler, request)
        if request.command != "jobs":
            return LoopAdminReply(
                text=f"loopd has no command {request.command!r}; it has: {', '.join(COMMANDS)}",
                data={"code": Code.UNKNOWN_COMMAND},
            )
        rows = self.scheduler.listing() if self.scheduler is not None else []
        problem = self.scheduler.problem if self.scheduler is not None else ""
        lines = [f"PROBLEM: {problem} (runbook: jobs-invalid)"] if problem else []
        if not rows:
            lines.append(f"(no jobs in {self.config.layout.jobs})")
        for row in rows:
            last = row["last"]
            result = f"last {last['status']} {last['scheduled']} ({last['session']})" if last else "never run"
            now = f"; running as {row['running']}" if row["running"] else ""
            lines.append(f"{row['name']}  {row['schedule']}  next {row['next'] or 'never'}  {result}{now}")
        data: Any = rows
        if problem:  # a broken job file: said first, and bxctl exits 1
            data = {"code": Code.JOBS_INVALID, "problem": problem, "jobs": rows}
        return LoopAdminReply(text="\n".join(lines), data=data)

    def erase(self, request: LoopAdmin) -> LoopAdminReply:
        """``erase-plan`` and ``erase`` (seed 003 section 12.3): see `boxmaker.loopd.erase`."""
        execute = request.command == "erase"
        try:
            parsed = erase.parse(request.args, execute)
        except erase.BadRequest as exc:
            return LoopAdminReply(text=f"refused (arguments): {exc}", data={"code": Code.ARGUMENTS})
        try:
            info = self.server_info()
        except ServerMismatch:
            info = self.info
        if not execute:
            planned = erase.plan(self.loop, parsed, info)
            lines = [f"loopd: {len(parsed.sessions)} session(s) in scope"]
            lines += [f"  {h['holder_ref']}: {h['holds']}" for h in planned["holders"]]
            return LoopAdminReply(text="\n".join(lines), data={"code": "ok", **planned})
        done = erase.execute(self.loop, parsed, self.model, info)
        lines = [f"loopd: {h['holder_ref']} {h['result']}" for h in done["holders"]]
        return LoopAdminReply(text="\n".join(lines), data={"code": "ok", **done})

    def status(self) -> StatusReply:
        """loopd's status: the model server it uses and what it said about itself."""
        info = self.info  # never asks the server here: status answers at once
        if self.problem:
            model = f"NOT READY: {self.problem} (runbook: loopd-start-failed)"
        elif info is None:
            model = f"model: not reachable at {self.config.model_url}; chat works once it runs"
        else:
            model = f"model {self.config.model_url} ({describe_server(info)})"
        detail = model if self.problem or info is None else f"ready; {model}"
        if self.damage:
            more = f" (and {len(self.damage) - 1} more)" if len(self.damage) > 1 else ""
            detail += f"; DAMAGED: {self.damage[0].sentence}{more}"
        return StatusReply(
            role="loopd",
            pid=os.getpid(),
            detail=detail,
            data={
                "damage": [{"file": f.file, "text": f.sentence} for f in self.damage],
                "model_url": self.config.model_url,
                "model_name": self.config.model_name,
                "api_key_env": self.config.api_key_env,
                "api_key_set": self.api_key_set,
                "n_ctx": self.loop.settings.n_ctx,
                "slots": info.slots if info else None,
                "llama_server": info.llama if info else None,
                "supports_tools": info.supports_tools if info else None,
                "model_answered": info is not None,
                "main_slot": self.loop.settings.main_slot,
                "jobs_problem": self.scheduler.problem if self.scheduler is not None else "",
                "turns": self.turns.listing(),
            },
        )

    def stop(self) -> None:
        """Stop the scheduler, take a checkpoint (`startcheck`; before the socket goes, so then only
        the lock is left to release), remove the socket, close the model client, release the lock
        (idempotent)."""
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.lock.held:
            self.checkpoint()
        self.socket.stop()
        self.model.close()
        self.lock.release()

    def checkpoint(self) -> None:
        """Take sessions/'s checkpoint once the start-up check ran and unless the damage it found
        stands; a failure is logged."""
        if self.damage or not self._checked:
            return
        try:
            startcheck.take(self.config.layout.sessions)
        except OSError as exc:
            log.error("cannot write sessions/%s (the next start checks more): %s", startcheck.CHECKPOINT, exc)

    def _retry_server_info(self) -> None:
        """Ask a model server that has not answered yet again; say a disagreement once."""
        if self.info is not None:
            return
        try:
            self.server_info()
        except ServerMismatch as exc:
            if str(exc) != self._said:  # once, not every few seconds
                log.error("%s", exc)
                self._said = str(exc)

    def serve_forever(self, stopping: threading.Event) -> None:
        """Block until `stopping` is set (SIGTERM or SIGINT), asking a silent model server again every
        few seconds; then stop."""
        serve_until_signal(self.stop, stopping, tick=self._retry_server_info, every=RETRY_S)


def run(config: Config, stopping: threading.Event) -> None:
    """Start loopd and serve until `stopping` is set (by SIGTERM or SIGINT, perhaps already while it
    started).

    Raises:
        StartFailed: when it cannot start (nothing is left behind: no socket, no lock).
    """
    server = Server(config)
    try:
        server.start()
    except LockHeld as exc:
        raise StartFailed(str(exc)) from None
    log.info("loopd ready")
    server.serve_forever(stopping)
