"""Autodream's staging (`dream` docstring; ``[dream] stage = true``): a maintenance pass's changing
actions recorded for the owner in ``memory/dream/<session>.jsonl`` instead of applied, and the owner's
``bxctl memory dream show``, ``apply`` and ``discard``.

A staged file holds ``{"event": "staged", "time", "session", "call", "taint", "untrusted",
"arguments"}`` lines, then at most one ``applied`` (with each action's result) or ``discarded`` line;
apply and discard are journalled (``dream-apply``, ``dream-discard``).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boxmaker.memoryd import sentences
from boxmaker.memoryd.dream.actions import Action, DreamInput, is_run_session, parse
from boxmaker.memoryd.dream.inputs import entry_of, stamp
from boxmaker.memoryd.files.journal import Change, encode_line, read_jsonl
from boxmaker.memoryd.files.names import DREAM_DIR
from boxmaker.memoryd.sentences import Refusal, dream, identity
from boxmaker.memoryd.write.answer import OWNER, Answer, Caller, guarded
from boxmaker.memoryd.write.writer import Writer
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass, Label

#: How the owner's apply runs one staged action (`actions.apply_one` over the writer and the
#: withdrawal predicate as they are then).
Apply = Callable[[Caller, Action], Answer]


class Staging:
    """The staged passes of one home.

    Args:
        writer: the write path (its lock, journal and the memory folder the passes live under).
        now: the clock (aware UTC datetimes).
        enabled: ``[dream] stage`` (only `show` says whether it is on).
    """

    def __init__(self, writer: Writer, now: Callable[[], dt.datetime], enabled: bool) -> None:
        self.writer = writer
        self.now = now
        self.enabled = enabled
        self.folder = writer.store.dir / DREAM_DIR
        self._lock = threading.Lock()

    def _path(self, session: str) -> Path:
        return self.folder / f"{session}.jsonl"

    def stage(self, caller: Caller, arguments: dict[str, Any]) -> Answer:
        """Record a changing action for the owner instead of applying it."""
        line = {
            "event": "staged",
            "time": stamp(self.now()),
            "session": caller.session,
            "call": caller.call,
            "taint": caller.label.data_class.value,
            "untrusted": caller.label.untrusted,
            "arguments": arguments,
        }
        with self._lock:
            fsio.ensure_dir(self.folder)
            fsio.append_line(self._path(caller.session), encode_line(line))
        return Answer(dream.dream_staged(str(arguments.get("action")), caller.session), sentences.STAGED)

    def passes(self) -> list[dict[str, Any]]:
        """Every staged pass: ``{"session", "staged", "state", "time"}`` (state pending, applied or
        discarded), oldest first."""
        found = []
        for path in sorted(self.folder.glob("job-*.jsonl")) if self.folder.is_dir() else []:
            lines = read_jsonl(path, ("event", "time"))
            staged = [x for x in lines if x["event"] == "staged"]
            ends = [x["event"] for x in lines if x["event"] in ("applied", "discarded")]
            state = ends[-1] if ends else "pending"
            first = staged[0]["time"] if staged else ""
            found.append({"session": path.stem, "staged": len(staged), "state": state, "time": first})
        return sorted(found, key=lambda x: (x["time"], x["session"]))

    def show(self, session: str | None) -> tuple[str, Any] | Refusal:
        """The staged passes (no `session`), or one pass's actions: the text and the ``--json`` data."""
        if session is None:
            rows = self.passes()
            if not rows:
                return "(no staged pass; [dream] stage is " + ("on)" if self.enabled else "off)"), []
            text = "\n".join(
                f"{r['session']}  {r['time']}  {r['staged']:,} staged  {r['state']}" for r in rows
            )
            return text, rows
        lines = self._lines(session)
        if isinstance(lines, Refusal):
            return lines
        staged = [x for x in lines if x["event"] == "staged"]
        ends = [x for x in lines if x["event"] in ("applied", "discarded")]
        rows = [
            {
                "n": n,
                "time": x["time"],
                "untrusted": bool(x.get("untrusted")),
                "arguments": x.get("arguments"),
            }
            for n, x in enumerate(staged, start=1)
        ]
        state = ends[-1]["event"] if ends else "pending"
        out = [f"{session}: {len(rows):,} staged, {state}"]
        for row in rows:
            flag = " (untrusted)" if row["untrusted"] else ""
            out.append(f"{row['n']}. {json.dumps(row['arguments'], ensure_ascii=True, sort_keys=True)}{flag}")
        return "\n".join(out), {"session": session, "state": state, "actions": rows}

    def _lines(self, session: str) -> list[dict[str, Any]] | Refusal:
        if not is_run_session(session):
            return dream.dream_unknown(session)
        lines = read_jsonl(self._path(session), ("event", "time"))
        if not any(x["event"] == "staged" for x in lines):
            return dream.dream_unknown(session)
        return lines

    def apply(self, session: str, apply: Apply) -> tuple[str, dict[str, Any]] | Refusal:
        """Apply each staged action of `session` with the same checks, against the store as it is now;
        `apply` runs each (with the writer and the withdrawal predicate as they are then); the text says per
        action what happened. Refused when nothing is staged or it was closed."""
        with self._lock:
            lines = self._lines(session)
            if isinstance(lines, Refusal):
                return lines
            closed = [x["event"] for x in lines if x["event"] in ("applied", "discarded")]
            if closed:
                return dream.dream_closed(session, closed[-1])
            results = []
            for n, line in enumerate((x for x in lines if x["event"] == "staged"), start=1):
                answer = _apply_staged(line, apply)
                action = (
                    line.get("arguments", {}).get("action")
                    if isinstance(line.get("arguments"), dict)
                    else None
                )
                results.append(
                    {
                        "n": n,
                        "action": action,
                        "code": answer.code,
                        "output": answer.output,
                        "edit": answer.edit or None,
                    }
                )
            fsio.append_line(
                self._path(session),
                encode_line({"event": "applied", "time": stamp(self.now()), "results": results}),
            )
            entry = entry_of(OWNER, "dream-apply", None)
            entry.update(
                {
                    "pass": session,
                    "results": [{"n": r["n"], "code": r["code"], "edit": r["edit"]} for r in results],
                }
            )
            with self.writer.lock:
                line = self.writer.journal.commit(Change(entry))
        text = "\n".join(f"{r['n']}. {r['action']}: {r['output']}" for r in results)
        return f"{text}\napplied the staged pass {session} ({line['id']})", {
            "session": session,
            "edit": line["id"],
            "results": results,
        }

    def discard(self, session: str) -> tuple[str, dict[str, Any]] | Refusal:
        """Close a staged pass without applying anything (journal action ``dream-discard``)."""
        with self._lock:
            lines = self._lines(session)
            if isinstance(lines, Refusal):
                return lines
            closed = [x["event"] for x in lines if x["event"] in ("applied", "discarded")]
            if closed:
                return dream.dream_closed(session, closed[-1])
            count = sum(1 for x in lines if x["event"] == "staged")
            fsio.append_line(
                self._path(session), encode_line({"event": "discarded", "time": stamp(self.now())})
            )
            entry = entry_of(OWNER, "dream-discard", None)
            entry["pass"] = session
            with self.writer.lock:
                line = self.writer.journal.commit(Change(entry))
        return (
            f"discarded the staged pass {session} ({count:,} action{'' if count == 1 else 's'}; "
            f"nothing was applied; {line['id']})",
            {"session": session, "edit": line["id"], "discarded": count},
        )


def _apply_staged(line: dict[str, Any], apply: Apply) -> Answer:
    arguments = line.get("arguments")
    try:
        caller = Caller(
            str(line["session"]),
            str(line["call"]),
            Label(DataClass(line["taint"]), bool(line["untrusted"])),
        )
    except (KeyError, ValueError):
        return Answer.refused(dream.STAGED_LINE_DAMAGED)
    parsed = parse(arguments) if isinstance(arguments, dict) else identity.arguments("no arguments")
    if isinstance(parsed, Refusal):
        return Answer.refused(parsed)
    if isinstance(parsed, DreamInput):
        return Answer.refused(dream.INPUT_NEVER_STAGED)
    return guarded(lambda: apply(caller, parsed))
