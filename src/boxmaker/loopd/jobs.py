"""Cron jobs: the owner's job files, their session ids, the run ledger, and which minutes to fire
(M5d section 4.2; DESIGN 10.2 and 10.4).

Job files are ``{home}/jobs/<name>.toml``, written by the owner and only read here::

    schedule = "0 7 * * *"    # five-field UTC crontab (see `boxmaker.loopd.cron`)
    prompt = "Check overnight mail and write a note of anything that needs the owner."

Two optional keys (issue 7, autodream): ``maintenance = true`` (default false) marks a maintenance job,
whose runs get the `memory` tool's maintenance actions (memoryd checks this file and the ledger for each
call: `boxmaker.memoryd.dream`), and ``prompt_file = "dream.md"`` instead of ``prompt``: a file read at
load, an absolute path, else one in the jobs folder, else the packaged starter of that name (exactly one
of ``prompt`` and ``prompt_file``). No other key; a file with a problem makes `load_jobs` raise
`JobsInvalid` (loopd refuses to start; runbook ``jobs-invalid``). A run's session is
``job-<name>-t<unix seconds of the minute>``.

The ledger ``{home}/jobs/runs.jsonl`` holds one JSON object a line::

    {"time", "scheduled", "name", "session", "status", "pid"}   (+ "why" on some failed lines)

``time`` is when the line was written and ``scheduled`` the job's minute, both RFC 3339 ``...Z``;
``status`` is ``started``, ``finished`` or ``failed``; ``pid`` is the process that ran the session.
A minute fires once per job, across restarts (`Ledger.fired`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from boxmaker.loopd.cron import CronError, Schedule, due, next_run, parse
from boxmaker.proto.errors import BoxmakerError, ConfigError, InvalidId
from boxmaker.proto.fsio import append_line, complete_lines, ensure_dir
from boxmaker.proto.ids import session_id
from boxmaker.proto.records import format_time, parse_time
from boxmaker.proto.settings import convert_config, load_toml, packaged_starter

JOB_NAME = r"^[a-z0-9][a-z0-9-]{0,47}\Z"
#: The longest prompt a job file may hold, in characters.
PROMPT_MAX = 20_000
#: The ledger's file name inside the jobs folder.
RUNS = "runs.jsonl"
#: How long a gap between ticks may be before missed minutes are dropped (`due_minutes`).
GRACE = dt.timedelta(minutes=2)
#: The ``why`` of a run closed by `Ledger.close_leftovers`.
LEFTOVER = "the process running it ended"

_JOB_NAME = re.compile(JOB_NAME)
_MINUTE = dt.timedelta(minutes=1)
_ENDS = ("finished", "failed")


class JobsInvalid(BoxmakerError):
    """Raised by `load_jobs` when a job file cannot be used; the sentence names the file and problem."""

    code = "jobs-invalid"
    runbook = "jobs-invalid"

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


@dataclass(frozen=True)
class Job:
    """One job file: its name (the file name without ``.toml``), schedule, prompt, path, and whether it
    is a maintenance job (autodream)."""

    name: str
    schedule: Schedule
    prompt: str
    path: Path
    maintenance: bool = False


class _JobFile(msgspec.Struct, forbid_unknown_fields=True):
    schedule: str
    prompt: str | None = None
    prompt_file: str | None = None
    maintenance: bool = False


def load_jobs(folder: Path) -> list[Job]:
    """Read every ``*.toml`` in `folder` (``{home}/jobs``), sorted by name.

    A missing folder holds no jobs; other files (``runs.jsonl``, ``*.toml.example``) are ignored.

    Raises:
        JobsInvalid: naming the first file (by name) that is unreadable, not UTF-8, not TOML, has an
            unknown or missing key or a value of the wrong type, a prompt that is empty or over
            20,000 characters, a bad schedule, or a name that is not a job name.
    """
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise JobsInvalid(folder, "is not a folder")
    return [_load_job(path) for path in sorted(folder.glob("*.toml"))]


def _load_job(path: Path) -> Job:
    name = path.name.removesuffix(".toml")
    if not _JOB_NAME.match(name):
        raise JobsInvalid(
            path, f"{name!r} is not a job name: 1 to 48 characters of a-z, 0-9 and '-', not starting with '-'"
        )
    if not path.is_file():
        raise JobsInvalid(path, "is not a file")
    try:
        data = _load_toml(path)
    except ConfigError as exc:
        raise JobsInvalid(path, exc.why) from None
    prompt = _prompt(path, data)
    if not prompt.strip():
        raise JobsInvalid(path, "prompt is empty")
    if len(prompt) > PROMPT_MAX:
        raise JobsInvalid(path, f"prompt has {len(prompt):,} characters; at most {PROMPT_MAX:,}")
    try:
        schedule = parse(data.schedule)
    except CronError as exc:
        problem = exc.why if exc.field == "schedule" else str(exc)
        raise JobsInvalid(path, f"schedule {data.schedule!r}: {problem}") from None
    if next_run(schedule, dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) is None:
        raise JobsInvalid(path, f"schedule {data.schedule!r} never runs (no such day, e.g. 31 February)")
    return Job(name=name, schedule=schedule, prompt=prompt, path=path, maintenance=data.maintenance)


def _prompt(path: Path, data: _JobFile) -> str:
    """The job's prompt: `prompt`, or the text of `prompt_file` (see the module docstring)."""
    if (data.prompt is None) == (data.prompt_file is None):
        raise JobsInvalid(path, "exactly one of prompt and prompt_file is needed")
    if data.prompt is not None:
        return data.prompt
    wanted = Path(str(data.prompt_file)).expanduser()
    candidates = [wanted] if wanted.is_absolute() else [path.parent / wanted]
    if not wanted.is_absolute() and len(wanted.parts) == 1:
        candidates.append(packaged_starter(wanted.name))
    for candidate in candidates:
        if candidate.is_file():
            try:
                return candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise JobsInvalid(path, f"prompt_file {candidate}: {exc}") from None
    raise JobsInvalid(path, f"prompt_file {data.prompt_file!r}: no such file in {path.parent} or the package")


def _load_toml(path: Path) -> _JobFile:
    return convert_config(load_toml(path), _JobFile, str(path))


def session_for(name: str, minute: dt.datetime) -> str:
    """The session of job `name`'s run for `minute` (aware; seconds ignored):
    ``job-<name>-t<unix seconds of the minute>`` (DESIGN 10.2).

    Raises:
        InvalidId: when `name` is not a job name or the result is not a SessionId.
        ValueError: when `minute` is naive.
    """
    if not _JOB_NAME.match(name):
        raise InvalidId("job name", name, "1 to 48 characters of a-z, 0-9 and '-', not starting with '-'")
    return session_id(f"job-{name}-t{int(_floor(minute).timestamp())}")


def due_minutes(schedule: Schedule, last_tick: dt.datetime | None, now: dt.datetime) -> list[dt.datetime]:
    """The minutes (aware UTC, ascending) a tick at `now` should fire for `schedule`.

    Normally only the current minute (`now` floored), if it is due. When the previous tick
    (`last_tick`) fell in an earlier minute at most `GRACE` (2 minutes) before, the due minutes in
    between are included too, so a late tick does not lose a minute: at most two minutes are returned.
    After a stall (no tick, or the last one more than 2 minutes earlier) the missed minutes are
    skipped, never replayed in a burst. Firing each minute once is the ledger's job (`Ledger.fired`).

    Raises:
        ValueError: when `now` or `last_tick` is naive.
    """
    current = _floor(now)
    first = current
    if last_tick is not None:
        previous = _floor(last_tick)
        if dt.timedelta(0) < current - previous <= GRACE:
            first = previous + _MINUTE
    minutes = []
    while first <= current:
        if due(schedule, first):
            minutes.append(first)
        first += _MINUTE
    return minutes


def _floor(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no time zone")
    return moment.astimezone(dt.UTC).replace(second=0, microsecond=0)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def pid_alive(pid: int) -> bool:
    """True when a process with id `pid` exists now (a pid below 1 never does)."""
    if pid < 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


class Ledger:
    """The run ledger ``{home}/jobs/runs.jsonl``: append-only, written only by this process.

    The file is read once and its state kept in memory; it is read again only when its size is not
    the one this object last wrote (someone else touched it). A torn last line is not a line yet; the
    next append sets it aside into ``runs.jsonl.torn`` (`boxmaker.proto.fsio.append_line`). Lines that
    are not ledger lines are skipped. Every line is fsynced.

    Args:
        path: the ledger file (a name ending in ``.jsonl``), or else the jobs folder that holds it
            (``runs.jsonl`` in it is then used). A missing folder is made (0700) at the first append.
        now: the clock for each line's ``time`` (default: the system clock, UTC).
    """

    def __init__(self, path: Path, now: Callable[[], dt.datetime] = _utcnow) -> None:
        self.path = path if path.name.endswith(".jsonl") else path / RUNS
        self._now = now
        self._size = -1
        self._last: dict[str, dict[str, Any]] = {}
        self._fired: set[tuple[str, str]] = set()
        self._open: dict[str, dict[str, dict[str, Any]]] = {}

    # Writing ---------------------------------------------------------------------------------------

    def started(self, job: Job, minute: dt.datetime, session: str, pid: int) -> None:
        """Record that `job`'s run for `minute` began as `session` in process `pid`.

        Check `fired` and `busy` first: this does not refuse a second start.
        """
        self._append(job.name, session, minute, "started", pid)

    def finished(self, name: str, session: str, minute: dt.datetime) -> None:
        """Record that job `name`'s run `session` for `minute` ended well."""
        self._append(name, session, minute, "finished", self._pid_of(name, session))

    def failed(self, name: str, session: str, minute: dt.datetime, why: str = "") -> None:
        """Record that job `name`'s run `session` for `minute` failed; `why` (if any) is kept."""
        self._append(name, session, minute, "failed", self._pid_of(name, session), why=why)

    def close_others(self, pid: int) -> list[str]:
        """Close every open run that is not this process's (`pid`) as failed; return their sessions.

        For loopd, which holds the home's lock: any run another process started has ended with it,
        even when that process is not yet reaped (a zombie still answers `kill(pid, 0)`).
        """
        self._refresh()
        closed = []
        for name, runs in list(self._open.items()):
            for session, line in list(runs.items()):
                if line["pid"] != pid:
                    self.failed(name, session, parse_time(line["scheduled"]), LEFTOVER)
                    closed.append(session)
        return closed

    def close_leftovers(self, pid: int) -> list[str]:
        """At start, close every run left ``started`` by a process that ended; return their sessions.

        `pid` is this process's id. A run is a leftover when its process is not alive, or when it
        carries `pid` itself: this process has started nothing yet, so that line is from an earlier
        process that had the same id (ids are reused; in a container loopd may always be pid 1).
        Each gets a ``failed`` line with why `LEFTOVER`. A run of another live process stays open.
        """
        self._refresh()
        closed = []
        for name, runs in list(self._open.items()):
            for session, line in list(runs.items()):
                owner = line["pid"]
                if owner == pid or not pid_alive(owner):
                    self.failed(name, session, parse_time(line["scheduled"]), LEFTOVER)
                    closed.append(session)
        return closed

    # Reading ---------------------------------------------------------------------------------------

    def last(self, name: str) -> dict[str, Any] | None:
        """The newest line for job `name` (a copy), or None when it never ran."""
        self._refresh()
        line = self._last.get(name)
        return None if line is None else dict(line)

    def fired(self, name: str, minute: dt.datetime) -> bool:
        """True when job `name` already has a line for `minute` (a minute fires once per job)."""
        self._refresh()
        return (name, format_time(_floor(minute))) in self._fired

    def busy(self, name: str) -> str | None:
        """The session of job `name`'s newest run that started and has not ended, or None."""
        self._refresh()
        runs = self._open.get(name)
        return next(reversed(runs)) if runs else None

    # State -----------------------------------------------------------------------------------------

    def _pid_of(self, name: str, session: str) -> int:
        self._refresh()
        line = self._open.get(name, {}).get(session)
        return int(line["pid"]) if line is not None else os.getpid()

    def _append(
        self, name: str, session: str, minute: dt.datetime, status: str, pid: int, *, why: str = ""
    ) -> None:
        self._refresh()
        line: dict[str, Any] = {
            "time": format_time(self._now()),
            "scheduled": format_time(_floor(minute)),
            "name": name,
            "session": session,
            "status": status,
            "pid": pid,
        }
        if why:
            line["why"] = why
        data = json.dumps(line, separators=(",", ":")).encode("ascii")
        if not self.path.parent.exists():
            ensure_dir(self.path.parent)
        before = append_line(self.path, data)
        self._size = before + len(data) + 1
        self._apply(line)

    def _refresh(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size == self._size:
            return
        self._last, self._fired, self._open = {}, set(), {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        lines, _ = complete_lines(data)
        for raw in lines:
            line = _decode(raw)
            if line is not None:
                self._apply(line)
        self._size = len(data)

    def _apply(self, line: dict[str, Any]) -> None:
        name, session = line["name"], line["session"]
        self._last[name] = line
        self._fired.add((name, line["scheduled"]))
        runs = self._open.setdefault(name, {})
        if line["status"] == "started":
            runs[session] = line
        else:
            runs.pop(session, None)


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        line = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(line, dict):
        return None
    strings = ("time", "scheduled", "name", "session", "status")
    if not all(isinstance(line.get(key), str) for key in strings) or type(line.get("pid")) is not int:
        return None
    if line["status"] not in ("started", *_ENDS):
        return None
    try:
        parse_time(line["scheduled"])
    except ValueError:
        return None
    return line
