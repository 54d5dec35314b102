"""Authorised erasure in loopd's files and the model server's cache (seed 003 section 12.3,
checklist 21; docs/session-log.md, "Erasure").

The owner's ``bxctl memory erase`` asks loopd over its owner socket (``loop_admin``):

- ``erase-plan`` ``{"sessions", "texts"}``: the texts of the sessions named (the owner's messages, the
  model's replies and the ``text`` of its memory calls, which bxctl hands to memoryd and brokerd),
  and what loopd holds: each session's folder, the other sessions' logs and baselines that quote an
  erased text, the sessions with a turn running now, and the model server's slots. Changes nothing.
- ``erase`` ``{"sessions", "texts", "erasure_id"}``: deletes ``sessions/<id>/`` of each session named
  (every epoch log and baseline), replaces every erased text in every other session's logs and
  baselines by ``[erased memerase-…]`` (logs re-encoded as ASCII JSON, baselines as UTF-8 JSON; a
  rewritten baseline's new sha256 goes into its epoch's ``session_start``, so the session still
  opens), then erases each slot's prompt cache (``POST /slots/<n>?action=erase``). Answers each
  holder's result in the tombstone's shape.

This is the one exception to "a session log is append-only": the rewrite is atomic, keeps the
file's mode, and holds the session's append lock, so no record is lost to a concurrent append.

A session whose turn is running (or that is being compacted) is live: its files are erased, but
its context, in loopd and in its slot, still holds the text until the turn ends, so its holder is
``partially-completed`` with that limitation, and its slot is not erased (``unevaluated``). The
running turn goes on logging records (a recall result, the model's reply) that may quote an erased
text, so loopd keeps the erased texts of each live session IN MEMORY ONLY (`keep_live`, in
``Loop.open_sessions``; never on disk) and scrubs that session's files again after each of its turns,
failed ones included, before it sends ``session_updated`` (`rescrub`, which ``Loop`` is given and
calls from ``Loop.updated``): the
index only ever reads scrubbed records. This lasts while the session stays open in this loopd
process; a restart of loopd while the turn runs loses it (the receipt already says
``partially-completed``).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boxmaker.loopd.model import ModelClient, ModelError, ServerInfo
from boxmaker.loopd.open_sessions import Erased
from boxmaker.loopd.session import Session, digest
from boxmaker.proto import erasure
from boxmaker.proto.erasure import COMPLETED, PARTIAL, UNEVALUATED, Scrubber
from boxmaker.proto.ids import OWNER_SESSION, is_session_id
from boxmaker.proto.records import RecordError, read_log

if TYPE_CHECKING:
    from boxmaker.loopd.loop import Loop

log = logging.getLogger("boxmaker.loopd.erase")

SESSIONS_HOLDER = "sessions/"
MODEL_HOLDER = "model-server:slot-cache"


class BadRequest(ValueError):
    """Raised for arguments that are not an erasure's (the sentence names the field)."""


@dataclass(frozen=True, slots=True)
class Request:
    """An erasure as loopd gets it."""

    sessions: tuple[str, ...]
    texts: tuple[str, ...]
    erasure_id: str = ""


def parse(args: dict[str, Any], execute: bool) -> Request:
    """The request in ``loop_admin``'s args.

    Raises:
        BadRequest: naming the field.
    """
    sessions, texts = args.get("sessions", []), args.get("texts", [])
    if not isinstance(sessions, list) or not all(
        isinstance(s, str) and is_session_id(s) and s != OWNER_SESSION for s in sessions
    ):
        raise BadRequest("sessions must be a list of session ids")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise BadRequest("texts must be a list of strings")
    erasure_id = args.get("erasure_id", "")
    if not isinstance(erasure_id, str) or (erasure_id and not erasure.is_erasure_id(erasure_id)):
        raise BadRequest("erasure_id must be memerase-YYYY-MM-DD-NNN")
    if execute and not erasure_id:
        raise BadRequest('erase needs the erasure_id memoryd handed out (or "" only without memoryd)')
    unknown = set(args) - {"sessions", "texts", "erasure_id"}
    if unknown:
        raise BadRequest(f"erase takes no argument {sorted(unknown)[0]!r}")
    return Request(tuple(dict.fromkeys(sessions)), tuple(texts), erasure_id)


def session_texts(folder: Path) -> set[str]:
    """The texts of a session: the owner's messages, the model's replies, and the `text` of its
    memory calls, from every epoch log (unreadable lines are skipped)."""
    found: set[str] = set()
    for path in sorted(folder.glob("*.jsonl")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for raw in data.split(b"\n"):
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") in ("user", "assistant") and isinstance(record.get("content"), str):
                found.add(record["content"])
            for call in record.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("name") == "memory":
                    found.update(_memory_texts(call.get("arguments")))
    return {t.strip() for t in found if t.strip()}


def _memory_texts(arguments: object) -> list[str]:
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        return []
    if not isinstance(value, dict):
        return []
    return [v for k, v in value.items() if k in ("text", "old") and isinstance(v, str)]


@dataclass
class _Rewrite:
    """New bytes for the files of one session folder."""

    files: dict[Path, bytes] = field(default_factory=dict)


def _session_rewrite(folder: Path, scrubber: Scrubber) -> _Rewrite:
    """The scrubbed bytes of every file in `folder` that changes (baselines first, with their logs'
    `session_start` carrying the new hashes)."""
    rewrite = _Rewrite()
    hashes: dict[int, str] = {}
    for path in sorted(folder.glob("*.baseline.json")):
        stem = path.name.removesuffix(".baseline.json")
        data = path.read_bytes()
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            new = scrubber.raw(data)
        else:
            before = scrubber.count
            scrubbed = scrubber.value(value)
            new = data if scrubber.count == before else _baseline_bytes(scrubbed)
        if new != data:
            rewrite.files[path] = new
            if stem.isdigit():
                hashes[int(stem)] = digest(new)

    for path in sorted(folder.iterdir()):
        if path in rewrite.files or not path.is_file() or path.name.endswith(".baseline.json"):
            continue
        data = path.read_bytes()
        stem = path.name.removesuffix(".jsonl")
        if path.name.endswith(".jsonl"):
            epoch = int(stem) if stem.isdigit() else None

            def start(record: Any, epoch: int | None = epoch) -> bool:
                if (
                    isinstance(record, dict)
                    and record.get("type") == "session_start"
                    and record.get("epoch") == epoch
                    and epoch in hashes
                    and record.get("baseline") != hashes[epoch]
                ):
                    record["baseline"] = hashes[epoch]
                    return True
                return False

            new = scrubber.jsonl(data, ascii_only=True, line=start)
        else:
            new = scrubber.raw(data)
        if new != data:
            rewrite.files[path] = new
    return rewrite


def _baseline_bytes(value: Any) -> bytes:
    """A baseline file's bytes as `Session` writes them (`Baseline.to_bytes`)."""
    return (json.dumps(value, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def _folders(sessions: Path) -> list[Path]:
    if not sessions.is_dir():
        return []
    return sorted(p for p in sessions.iterdir() if p.is_dir() and is_session_id(p.name))


def plan(loop: Loop, request: Request, info: ServerInfo | None) -> dict[str, Any]:
    """What an erasure would change in loopd's files (nothing is changed): ``{"texts", "holders"}``."""
    texts: set[str] = set()
    holders: list[dict[str, Any]] = []
    live = loop.open_sessions.live()
    for name in request.sessions:
        folder = loop.sessions / name
        exists = folder.is_dir()
        if exists:
            texts |= session_texts(folder)
        holders.append(
            {
                "holder_ref": f"sessions/{name}/",
                "holds": len(list(folder.iterdir())) if exists else 0,
                "result": PARTIAL if name in live else COMPLETED,
                "limitation_ref": "live-session-context" if name in live else None,
            }
        )
    scrubber = Scrubber(texts | set(request.texts), request.erasure_id)
    touched, live_touched = 0, []
    for folder in _folders(loop.sessions):
        if folder.name in request.sessions:
            continue
        try:
            changes = _session_rewrite(folder, scrubber)
        except OSError:
            continue
        touched += len(changes.files)
        if changes.files and folder.name in live:
            live_touched.append(folder.name)
    holders.append(
        {
            "holder_ref": SESSIONS_HOLDER,
            "holds": touched,
            "result": PARTIAL if live_touched else COMPLETED,
            "limitation_ref": "live-session-context" if live_touched else None,
        }
    )
    holders.append(_model_plan(info))
    return {"texts": sorted(texts), "holders": holders, "live": sorted(live)}


def _model_plan(info: ServerInfo | None) -> dict[str, Any]:
    if info is None:
        return {
            "holder_ref": MODEL_HOLDER,
            "holds": None,
            "result": UNEVALUATED,
            "limitation_ref": "model-unreachable",
        }
    if not info.llama:
        return {
            "holder_ref": MODEL_HOLDER,
            "holds": None,
            "result": UNEVALUATED,
            "limitation_ref": "no-slot-erase",
        }
    return {"holder_ref": MODEL_HOLDER, "holds": info.slots, "result": COMPLETED, "limitation_ref": None}


def execute(loop: Loop, request: Request, model: ModelClient, info: ServerInfo | None) -> dict[str, Any]:
    """Erase in loopd's files, then the model server's slots: ``{"holders": [...], "reasons": {...}}``
    (`reasons`: what each limitation was, in words, for the owner's screen; never in the tombstone)."""
    live = loop.open_sessions.live()
    holders: list[dict[str, Any]] = []
    reasons: dict[str, str] = {}
    texts: set[str] = set(request.texts)
    for name in request.sessions:
        folder = loop.sessions / name
        if folder.is_dir():
            texts |= session_texts(folder)
    for name in request.sessions:
        holders.append(_delete_session(loop, name, live))
    scrubber = Scrubber(texts, request.erasure_id)
    keep_live(loop, [name for name in live if name not in request.sessions], request.erasure_id, texts)
    result, limitation = COMPLETED, None
    for folder in _folders(loop.sessions):
        if folder.name in request.sessions:
            continue
        outcome = _scrub_session(loop, folder, scrubber, live)
        if outcome is not None and result == COMPLETED:
            result, limitation = PARTIAL, outcome
    for path in loop.sessions.rglob("*") if loop.sessions.is_dir() else []:
        try:
            if path.is_file() and scrubber.remains(path.read_bytes()):
                log.error("erasure: %s still holds an erased text", path)
                result, limitation = PARTIAL, "remains"
        except OSError:
            continue
    holders.append(erasure.holder(SESSIONS_HOLDER, result, limitation))
    model_holder, why = _erase_slots(model, info, {s.slot for s in live.values() if s is not None})
    holders.append(model_holder)
    if why:
        reasons[MODEL_HOLDER] = why
    count = len(request.sessions)
    log.info("erasure %s: %d session%s deleted", request.erasure_id, count, "" if count == 1 else "s")
    return {"holders": holders, "reasons": reasons}


def keep_live(loop: Loop, names: list[str], erasure_id: str, texts: set[str]) -> None:
    """Remember, in loopd's memory only, the erased texts for each live session in `names`: its
    running turn may still log records that quote them, so `rescrub` runs after each of its turns
    (`Loop.updated`) for as long as the session stays open in this loopd."""
    kept = tuple(sorted(t for t in texts if t.strip()))
    if not kept:
        return
    loop.open_sessions.keep_erased(names, (erasure_id, kept))


def rescrub(session: Session, pending: list[Erased]) -> None:
    """Scrub `session`'s files again of the erasures in `pending` (under its append lock); when a
    file changed, the session is read again from disk before its next turn."""
    folder = session.folder
    if not folder.is_dir():
        return
    for erasure_id, texts in pending:
        scrubber = Scrubber(texts, erasure_id)
        try:
            with session.append_lock:
                changes = _session_rewrite(folder, scrubber)
                for path, data in changes.files.items():  # baselines first: their hashes are in the logs
                    erasure.rewrite(path, data)
        except OSError as exc:
            log.error("erasure %s: cannot scrub %s again: %s", erasure_id, folder, exc)
            continue
        if changes.files:
            session.reread = True
            log.info("erasure %s: scrubbed %s again after its turn", erasure_id, folder.name)
            _check_opens(folder)


def _delete_session(loop: Loop, name: str, live: dict[str, Session | None]) -> dict[str, Any]:
    folder = loop.sessions / name
    session = live.get(name)
    lock = session.append_lock if session is not None else None
    if lock is not None:
        lock.acquire()
    try:
        if folder.is_dir():
            shutil.rmtree(folder)
    except OSError as exc:
        log.error("erasure: cannot delete %s: %s", folder, exc)
        return erasure.holder(f"sessions/{name}/", PARTIAL, "write-failed")
    finally:
        if lock is not None:
            lock.release()
    loop.open_sessions.rewritten(name, session, name in live)
    if name in live:
        return erasure.holder(f"sessions/{name}/", PARTIAL, "live-session-context")
    return erasure.holder(f"sessions/{name}/", COMPLETED)


def _scrub_session(
    loop: Loop, folder: Path, scrubber: Scrubber, live: dict[str, Session | None]
) -> str | None:
    """Rewrite one session's changed files under its append lock; returns a limitation or None."""
    session = loop.open_sessions.get(folder.name)
    lock = session.append_lock if session is not None else None
    if lock is not None:
        lock.acquire()
    try:
        changes = _session_rewrite(folder, scrubber)
        for path, data in changes.files.items():  # baselines first: their hashes are in the logs
            erasure.rewrite(path, data)
    except OSError as exc:
        log.error("erasure: cannot rewrite %s: %s", folder, exc)
        return "write-failed"
    finally:
        if lock is not None:
            lock.release()
    if not changes.files:
        return None
    loop.open_sessions.rewritten(folder.name, session, folder.name in live)
    _check_opens(folder)
    return "live-session-context" if folder.name in live else None


def _check_opens(folder: Path) -> None:
    """Log when a rewritten session would not open again (it should: the hashes were updated)."""
    for path in folder.glob("*.jsonl"):
        try:
            read_log(path)
        except (OSError, RecordError) as exc:
            log.error("erasure: %s does not read back: %s", path, exc)


def _erase_slots(
    model: ModelClient, info: ServerInfo | None, busy: set[int | None]
) -> tuple[dict[str, Any], str]:
    """Erase every slot's prompt cache; (the holder, why it is not completed)."""
    if info is None:
        return erasure.holder(
            MODEL_HOLDER, UNEVALUATED, "model-unreachable"
        ), "the model server has not answered loopd"
    if not info.llama:
        return (
            erasure.holder(MODEL_HOLDER, UNEVALUATED, "no-slot-erase"),
            "the model server is not llama-server: it has no slot erase",
        )
    problems: list[str] = []
    limitation = None
    for slot in range(info.slots or 1):
        if slot in busy:
            problems.append(f"slot {slot} is serving a live turn")
            limitation = "slot-busy"
            continue
        try:
            why = model.erase_slot(slot)
        except ModelError as exc:
            return erasure.holder(MODEL_HOLDER, UNEVALUATED, "model-unreachable"), str(exc)
        if why:
            problems.append(why)
            limitation = limitation or "no-slot-erase"
    if problems:
        return erasure.holder(MODEL_HOLDER, UNEVALUATED, limitation), "; ".join(problems)
    return erasure.holder(MODEL_HOLDER, COMPLETED), ""
