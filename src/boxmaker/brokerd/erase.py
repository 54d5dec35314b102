"""Authorised erasure in brokerd's files (seed 003 section 12.3, checklist 21).

The owner's ``bxctl memory erase`` asks brokerd over its admin socket (``broker_admin``):

- ``erase-plan`` ``{"sessions", "texts"}``: what brokerd holds of the scope: each session's label file
  ``broker/sessions/<id>.json``, and the files under ``broker/`` (the audit log first) that quote an
  erased text, and ``sessions_held`` (the sessions named that have a label file or an audit line:
  bxctl tells memoryd, which refuses a session nothing holds). Changes nothing.
- ``erase`` ``{"sessions", "texts", "erasure_id"}``: removes each session's label file and replaces
  every erased text in every other file under ``broker/`` by ``[erased memerase-…]`` (JSON lines
  parsed and re-encoded as ASCII JSON, as brokerd writes them; the rewrite is atomic and keeps the
  file's mode). Audit lines carry no content (time, session, call id, tool, grant, decision, code,
  label), so they stay as the record of what was decided; any string in them that quotes an erased
  text is replaced.

The label brokerd keeps in memory for a session is left as it is: a session that has read untrusted
content stays tainted while brokerd runs, even after its file is gone (fail closed).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from boxmaker.brokerd.broker import Broker
from boxmaker.brokerd.sentences import Code
from boxmaker.proto import erasure
from boxmaker.proto.erasure import COMPLETED, PARTIAL, Scrubber
from boxmaker.proto.ids import OWNER_SESSION, is_session_id
from boxmaker.proto.messages import BrokerAdmin, BrokerAdminReply

log = logging.getLogger("boxmaker.brokerd.erase")

AUDIT_HOLDER = "broker/audit/"


class BadRequest(ValueError):
    """Raised for arguments that are not an erasure's (the sentence names the field)."""


def _parse(args: dict[str, Any]) -> tuple[list[str], list[str], str]:
    sessions, texts, erasure_id = args.get("sessions", []), args.get("texts", []), args.get("erasure_id", "")
    if not isinstance(sessions, list) or not all(
        isinstance(s, str) and is_session_id(s) and s != OWNER_SESSION for s in sessions
    ):
        raise BadRequest("sessions must be a list of session ids")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise BadRequest("texts must be a list of strings")
    if not isinstance(erasure_id, str) or (erasure_id and not erasure.is_erasure_id(erasure_id)):
        raise BadRequest("erasure_id must be memerase-YYYY-MM-DD-NNN")
    unknown = set(args) - {"sessions", "texts", "erasure_id"}
    if unknown:
        raise BadRequest(f"erase takes no argument {sorted(unknown)[0]!r}")
    return list(dict.fromkeys(sessions)), texts, erasure_id


def _files(broker_dir: Path, label_files: set[Path]) -> list[Path]:
    if not broker_dir.is_dir():
        return []
    return sorted(
        p
        for p in broker_dir.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != ".lock" and p not in label_files
    )


def _holder_of(broker_dir: Path, path: Path) -> str:
    rel = str(path.relative_to(broker_dir))
    return AUDIT_HOLDER if rel.startswith("audit/") else f"broker/{rel}"


def _sessions_held(broker_dir: Path, labels: dict[Path, str]) -> list[str]:
    """The sessions named that brokerd holds anything of: a label file or an audit line."""
    held = {s for p, s in labels.items() if p.exists()}
    wanted = set(labels.values()) - held
    audit = broker_dir / "audit"
    for path in sorted(audit.glob("*.jsonl")) if wanted and audit.is_dir() else []:
        try:
            lines = path.read_bytes().split(b"\n")
        except OSError:
            continue
        for raw in lines:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("session") in wanted:
                held.add(str(line["session"]))
    return sorted(held)


def handle(broker: Broker, request: BrokerAdmin) -> BrokerAdminReply:
    """``erase-plan`` or ``erase``; a malformed request answers ``refused:arguments``."""
    try:
        sessions, texts, erasure_id = _parse(request.args)
    except BadRequest as exc:
        return BrokerAdminReply(text=f"refused (arguments): {exc}", data={"code": Code.ARGUMENTS})
    labels = {broker.labels.folder / f"{s}.json": s for s in sessions}
    scrubber = Scrubber(texts, erasure_id)
    if request.command == "erase-plan":
        return _plan(broker.layout.broker, labels, scrubber)
    return _erase(broker, labels, scrubber)


def _plan(broker_dir: Path, labels: dict[Path, str], scrubber: Scrubber) -> BrokerAdminReply:
    """What brokerd holds of the scope, by holder; changes nothing."""
    holders = [
        {"holder_ref": f"broker/sessions/{s}.json", "holds": int(p.exists()), "result": COMPLETED}
        for p, s in labels.items()
    ]
    holds: dict[str, int] = {AUDIT_HOLDER: 0}
    for path in _files(broker_dir, set(labels)):
        before = scrubber.count
        data = path.read_bytes()
        scrubber.jsonl(data) if path.name.endswith(".jsonl") else scrubber.raw(data)
        ref = _holder_of(broker_dir, path)
        holds[ref] = holds.get(ref, 0) + scrubber.count - before
    holders += [{"holder_ref": ref, "holds": n, "result": COMPLETED} for ref, n in holds.items()]
    lines = ["brokerd:"] + [f"  {h['holder_ref']}: {h['holds']}" for h in holders]
    held = _sessions_held(broker_dir, labels)
    return BrokerAdminReply(
        text="\n".join(lines), data={"code": "ok", "holders": holders, "sessions_held": held}
    )


def _erase(broker: Broker, labels: dict[Path, str], scrubber: Scrubber) -> BrokerAdminReply:
    """Remove the label files, then scrub every other file under ``broker/``; each holder's result."""
    broker_dir = broker.layout.broker
    done: list[dict[str, Any]] = []
    for path, session in labels.items():
        try:
            path.unlink(missing_ok=True)
            done.append(erasure.holder(f"broker/sessions/{session}.json", COMPLETED))
        except OSError as exc:
            log.error("erasure: cannot remove %s: %s", path, exc)
            done.append(erasure.holder(f"broker/sessions/{session}.json", PARTIAL, "write-failed"))
    results: dict[str, tuple[str, str | None]] = {AUDIT_HOLDER: (COMPLETED, None)}
    with broker.audit.paused():  # no audit line is appended while a month's file is rewritten
        for path in _files(broker_dir, set(labels)):
            ref = _holder_of(broker_dir, path)
            results.setdefault(ref, (COMPLETED, None))
            try:
                erasure.scrub_file(path, scrubber)
                if scrubber.remains(path.read_bytes()):
                    results[ref] = (PARTIAL, "remains")
            except OSError as exc:
                log.error("erasure: cannot rewrite %s: %s", path, exc)
                results[ref] = (PARTIAL, "write-failed")
    done += [erasure.holder(ref, result, why) for ref, (result, why) in results.items()]
    lines = [f"brokerd: {h['holder_ref']} {h['result']}" for h in done]
    return BrokerAdminReply(text="\n".join(lines), data={"code": "ok", "holders": done})
