"""brokerd's handlers: a `tool_request` decided, run, labelled and audited; the owner's requests
(DESIGN 10.3; M5a section 8).

The loop socket takes only ``tool_request`` (answered with ``tool_response``); the admin socket takes
``status`` and ``broker_admin`` (`admin`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import msgspec

from boxmaker.brokerd import admin, policy, sentences, startcheck
from boxmaker.brokerd.approvals import Approvals
from boxmaker.brokerd.broker import Broker
from boxmaker.brokerd.config import Config
from boxmaker.brokerd.fetch import FetchLimits
from boxmaker.brokerd.grants import Grant, GrantWatcher
from boxmaker.brokerd.ledger import AuditLog, SessionLabels, label_json, utc
from boxmaker.brokerd.local import LocalRuntime, utc_now
from boxmaker.brokerd.runtime import CompositeRuntime, MemoryRuntime, RunSpec, Runtime, run_decided
from boxmaker.brokerd.sentences import Refusal
from boxmaker.proto import fsio
from boxmaker.proto.errors import ProtocolError
from boxmaker.proto.fit import fit
from boxmaker.proto.labels import Label
from boxmaker.proto.messages import Body, BrokerAdmin, Status, ToolRequest, ToolResponse
from boxmaker.proto.startcheck import report

log = logging.getLogger("boxmaker.brokerd")

LOOP_KINDS = frozenset({"tool_request"})
ADMIN_KINDS = frozenset({"status", "broker_admin"})


def default_runtime(config: Config, now: Callable[[], dt.datetime] = utc_now) -> Runtime:
    """memoryd for recall and memory, the local runtime for the rest."""
    limits = FetchLimits(config.fetch_max_bytes, config.fetch_timeout_s)
    return CompositeRuntime(
        MemoryRuntime(config.memory_socket, config.memoryd_timeout_s),
        LocalRuntime(limits, config.read_max_bytes, now),
    )


class Brokerd:
    """The broker's state: grants, session labels, the audit log, pending approvals, the runtime."""

    def __init__(
        self,
        config: Config,
        runtime: Runtime | None = None,
        now: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        self.config = config
        layout = config.layout
        self.grants = GrantWatcher(layout.grants)
        self.labels = SessionLabels(layout.broker / "sessions")
        self.audit = AuditLog(layout.broker / "audit")
        self.approvals = Approvals(config.approval_timeout_s)
        self.runtime = runtime or default_runtime(config, now)
        self.now = now
        #: What the owner's commands read (`admin`, `erase`): these same objects, as a record.
        self.state = Broker(layout, self.grants, self.labels, self.audit, self.approvals)
        self._checked = False

    def open(self) -> None:
        """Create ``broker/``, ``broker/sessions/`` and ``broker/audit/`` (0700), then run the start-up
        check (`startcheck`): the first damage is logged in one sentence and kept for ``status``; with
        none, a checkpoint is taken.

        Raises:
            OSError: when they cannot be created.
        """
        for folder in (self.config.layout.broker, self.labels.folder, self.audit.folder):
            fsio.ensure_dir(folder)
        self.state.damage[:] = startcheck.check(self.config.layout.broker)
        report(log, "brokerd", self.state.damage)
        self._checked = True
        self.checkpoint()

    def checkpoint(self) -> None:
        """Take broker/'s checkpoint (after a clean start-up check, and at a clean stop), unless
        damage stands; a failure is logged."""
        if not self._checked or self.state.damage:
            return
        try:
            startcheck.take(self.config.layout.broker)
        except OSError as exc:
            log.error("cannot write broker/%s (the next start checks more): %s", startcheck.CHECKPOINT, exc)

    def handle(self, kind: str, body: Body) -> Body:
        """Answer one validated request from either socket."""
        if isinstance(body, ToolRequest):
            return self.tool_call(body)
        if isinstance(body, Status):
            return admin.status(self.state)
        if isinstance(body, BrokerAdmin):
            return admin.handle(self.state, body)
        raise ProtocolError(f"brokerd does not answer {kind}")

    def tool_call(self, request: ToolRequest) -> ToolResponse:
        """Decide, maybe ask the owner, run, label, record the session's label, and audit."""
        session = self.labels.get(request.session)
        decision = policy.decide(self.grants.current(), request, session)
        approval: str | None = None
        response: ToolResponse
        if decision.verdict == "deny" or decision.grant is None:
            assert decision.refusal is not None
            response = _refused(request, decision.refusal)
        else:
            grant = decision.grant
            if decision.verdict == "ask":
                pending = self.approvals.open(request, grant.id, utc(self.now()))
                log.info("call %s of %s waits for the owner (%s)", request.call_id, request.tool, pending.id)
                approval = self.approvals.wait(pending)
            if approval == "denied":
                response = _refused(request, sentences.owner_denied(request.tool))
            elif approval == "timeout":
                response = _refused(request, sentences.owner_silent(self.approvals.timeout_s))
            else:
                if approval == "approved":  # the grants may have changed while the owner was asked
                    decision = policy.decide(self.grants.current(), request, session)
                    grant = decision.grant if decision.grant is not None else grant
                if decision.verdict == "deny":
                    assert decision.refusal is not None
                    response = _refused(request, decision.refusal)
                else:
                    response = self._run(request, grant, session)
        response = msgspec.structs.replace(response, output=fit(response.output))
        self._audit(request, decision, approval, response)
        return response

    def _run(self, request: ToolRequest, grant: Grant, session: Label) -> ToolResponse:
        grants = self.grants.current()
        if not grants.valid:  # the folder broke while the owner was being asked
            refusal = policy.decide(grants, request, session).refusal
            assert refusal is not None
            return _refused(request, refusal)
        response = run_decided(self.runtime, RunSpec(request, grant, session, grants))
        self._taint(request.session, response.label)
        return response

    def _taint(self, session: str, label: Label | None) -> None:
        if label is None:
            return
        try:
            self.labels.raise_to(session, label, self.now())
        except OSError as exc:
            log.error("cannot write the label of session %s: %s", session, exc)

    def _audit(
        self, request: ToolRequest, decision: policy.Decision, approval: str | None, response: ToolResponse
    ) -> None:
        grant = decision.grant
        record = {
            "session": request.session,
            "call_id": request.call_id,
            "tool": request.tool,
            "grant": grant.id if grant else None,
            "grant_sha256": grant.sha256 if grant else None,
            "decision": decision.verdict,
            "approval": approval,
            "code": response.code,
            "label": label_json(response.label),
        }
        try:
            self.audit.append(record, self.now())
        except OSError as exc:
            log.error("cannot append to the audit log: %s", exc)


def _refused(request: ToolRequest, refusal: Refusal) -> ToolResponse:
    return ToolResponse(call_id=request.call_id, output=refusal.sentence, code=refusal.code, label=None)
