"""Autodream's maintenance actions: their argument shapes, who may call them (`maintenance_job`), and
applying one through `itemops` (`apply_one`) or checking it without writing (`dry_run`); the package
docstring gives the rules.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypeAlias

import msgspec

from boxmaker.memoryd.files.journal import Change, Journal, Reserved, read_jsonl
from boxmaker.memoryd.items.projections import Excluded
from boxmaker.memoryd.sentences import OK, Refusal, capture, dream, identity
from boxmaker.memoryd.write import itemops
from boxmaker.memoryd.write.actions import surrogates
from boxmaker.memoryd.write.answer import Answer, Caller, guarded
from boxmaker.memoryd.write.writer import Writer

#: The maintenance actions, offered only to a run of a maintenance job.
MAINTENANCE_ACTIONS = ("dream-input", "supersede", "mark", "cool", "merge", "assign")


#: The actions a maintenance run is refused (identity writes and withdrawal).
NOT_FOR_MAINTENANCE = ("add", "replace", "remove", "consolidate", "forget")


RUNS = "runs.jsonl"


_RUN = re.compile(r"^job-([a-z0-9][a-z0-9-]{0,47})-t([0-9]{1,12})\Z")


_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")


_LINE_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]| \u00b7 ")


_Id = Annotated[str, msgspec.Meta(min_length=1, max_length=40)]


_Trigger = Annotated[str, msgspec.Meta(min_length=1, max_length=120)]


def is_run_session(value: str) -> bool:
    """True for a cron run's session id, ``job-<name>-t<unix seconds>`` (DESIGN 10.2)."""
    return _RUN.match(value) is not None


def maintenance_job(jobs: Path, session: str) -> str | None:
    """The name of the maintenance job `session` is a running run of, or None (module docstring).

    Never raises: an unreadable job file or ledger is no maintenance job.
    """
    match = _RUN.match(session)
    if match is None:
        return None
    status = None
    name = ""
    for line in read_jsonl(jobs / RUNS, ("name", "session", "status")):
        if line["session"] == session:
            name, status = str(line["name"]), line["status"]
    if status != "started" or session != f"job-{name}-t{match.group(2)}":
        return None
    try:
        data = tomllib.loads((jobs / f"{name}.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return name if data.get("maintenance") is True else None


class _Args(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="action"):
    """The maintenance actions, tagged by `action`."""


class DreamInput(_Args, frozen=True, tag="dream-input"):
    """``{"action": "dream-input", "date"?, "untrusted"?}``."""

    date: str | None = None
    untrusted: bool = False


class Supersede(_Args, frozen=True, tag="supersede"):
    """``{"action": "supersede", "old", "new"}``."""

    old: _Id
    new: _Id


class Mark(_Args, frozen=True, tag="mark"):
    """``{"action": "mark", "id", "status": "pending-cleanup"}``."""

    id: _Id
    status: Annotated[str, msgspec.Meta(max_length=40)]


class Cool(_Args, frozen=True, tag="cool"):
    """``{"action": "cool", "id"}``."""

    id: _Id


class Merge(_Args, frozen=True, tag="merge"):
    """``{"action": "merge", "ids": [2..20], "text"}``."""

    ids: Annotated[list[_Id], msgspec.Meta(max_length=20)]
    text: str


class Assign(_Args, frozen=True, tag="assign", omit_defaults=True):
    """``{"action": "assign", "id", "topic", "triggers"?}``."""

    id: _Id
    topic: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    triggers: Annotated[list[_Trigger], msgspec.Meta(max_length=8)] = msgspec.field(default_factory=list)


Action: TypeAlias = DreamInput | Supersede | Mark | Cool | Merge | Assign


def parse(arguments: dict[str, Any]) -> Action | Refusal:
    """A maintenance action's arguments, or ``refused:arguments`` naming the field."""
    try:
        parsed: Action = msgspec.convert(arguments, Action, strict=True)
    except msgspec.ValidationError as exc:
        return identity.arguments(str(exc).replace("`$.", "`"))
    except UnicodeEncodeError:
        return surrogates(arguments) or identity.arguments("the arguments are not valid Unicode")
    if isinstance(parsed, DreamInput) and parsed.date is not None and not is_day(parsed.date):
        return dream.DREAM_DATE
    if isinstance(parsed, Assign):
        for trigger in parsed.triggers:
            if _LINE_BAD.search(trigger):
                return identity.arguments(
                    "`triggers` items must be one line without control characters or ' \u00b7 '"
                )
    return parsed


def is_day(value: str) -> bool:
    if not _DAY.match(value):
        return False
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def apply_one(writer: Writer, excluded: Excluded, caller: Caller, action: Action) -> Answer:
    """Apply one changing maintenance action through `itemops`, with the withdrawal predicate
    `excluded` as it is now (`dream` docstring: what each action may change).

    Raises:
        OSError: when the item log cannot be read or written.
    """
    if isinstance(action, Supersede):
        return itemops.supersede(writer, action.old, action.new, caller, excluded)
    if isinstance(action, Mark):
        if action.status == "stale":
            return Answer.refused(capture.status_denied("stale"))
        if action.status != "pending-cleanup":
            return Answer.refused(dream.mark_status(action.status))
        return itemops.set_status(writer, action.id, "pending-cleanup", caller, excluded)
    if isinstance(action, Cool):
        return itemops.cool(writer, action.id, caller, excluded)
    if isinstance(action, Merge):
        return itemops.merge(writer, action.ids, action.text, caller, excluded)
    if isinstance(action, Assign):
        return itemops.assign(writer, action.id, action.topic, action.triggers, caller, excluded=excluded)
    raise TypeError(f"not a changing maintenance action: {action!r}")


def dry_run(writer: Writer, excluded: Excluded, caller: Caller, action: Action) -> Answer | None:
    """Staging's check: `action` run with every check of `apply_one` against the store as it is,
    stopped at its commit (nothing is written). Its refusal, or None when it would apply."""
    dry = Writer(
        writer.store,
        DryJournal(writer.journal),
        writer.now,
        writer.review,
        writer.on_notes,
        sessions=writer.sessions,
        items=writer.items,
        lock=writer.lock,
    )
    try:
        answer = guarded(lambda: apply_one(dry, excluded, caller, action))
    except DryRun:
        return None
    return answer if answer.code != OK else None


class DryRun(Exception):
    """A dry run reached its commit: every check passed."""


class DryJournal(Journal):
    """The journal of a dry run (`dry_run`): ids are reserved and lines read from the real journal, but
    a commit stops the run (`DryRun`) before anything is written."""

    def __init__(self, real: Journal) -> None:
        super().__init__(real.memory_dir, real.now)
        self._real = real

    def reserve(self) -> Reserved:
        """The real journal's next id and moment (a dry run uses one id, as a real run would)."""
        return self._real.reserve()

    def entries_newest_first(self, containing: bytes = b"") -> Iterator[dict[str, Any]]:
        """The real journal's lines."""
        return self._real.entries_newest_first(containing)

    def commit(self, change: Change) -> dict[str, Any]:
        """Never writes: every check passed, so the dry run ends here."""
        del change
        raise DryRun
