"""The scheduler: heartbeat and cron runs inside ``loopd serve`` (M5d section 4).

A thread that wakes every second, shares the loop (its sessions, locks and slots) and never posts
anywhere: answers stay in the session logs. Scheduled sessions run on the background slot, where a
compaction summary goes first, then a due cron run, then the heartbeat, then tool-output summaries
(`slots.Priority`).

- Heartbeat (4.1): with ``[heartbeat] every_s`` > 0, one turn on the standing session ``heartbeat``
  whenever that many seconds have passed since the last beat (or since start); its text is a time line
  and ``heartbeat.md``. An unreadable prompt skips the beat and is logged once until it reads again
  (runbook heartbeat-prompt-unreadable). A beat is skipped while the previous one still runs.
- Cron (4.2): each job of ``{home}/jobs/<name>.toml`` fires once in each due minute, in a new session
  ``job-<name>-t<unix seconds of the minute>``, its text a time line and the job's prompt. A minute
  already in the ledger (``jobs/runs.jsonl``) never fires again, across restarts too; a tick while
  the previous run of that job is busy is skipped; after a stall, missed minutes are skipped, not
  replayed. The folder is read again when it changes; a broken file then keeps the jobs as they were
  and is logged (runbook jobs-invalid); at start it stops loopd.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boxmaker.loopd.cron import next_run
from boxmaker.loopd.jobs import Job, JobsInvalid, Ledger, due_minutes, load_jobs, session_for
from boxmaker.loopd.loop import Loop, utc_now
from boxmaker.loopd.slots import Priority, priority
from boxmaker.loopd.turn import TurnFailed
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.records import format_time

log = logging.getLogger("boxmaker.loopd")

HEARTBEAT_SESSION = "heartbeat"
#: Seconds between the scheduler's looks at the clock.
TICK_S = 1.0


def time_line(moment: dt.datetime) -> str:
    """The line that opens every scheduled turn: ``It is 2026-11-29 16:05 UTC (Sunday).``"""
    moment = moment.astimezone(dt.UTC)
    return f"It is {moment:%Y-%m-%d %H:%M} UTC ({moment:%A})."


class JobNotRun(BoxmakerError):
    """Raised when ``bxctl jobs run NAME`` cannot start a run; the sentence says why."""


class Scheduler:
    """Heartbeat and cron for one loop.

    Args:
        loop: the loop whose sessions the runs are.
        jobs_folder: ``{home}/jobs``.
        heartbeat_every_s: seconds between beats; 0 disables the heartbeat.
        heartbeat_prompt: ``heartbeat.md``.
        now: the clock.

    Raises:
        JobsInvalid: a job file is broken (at construction: loopd does not start).
    """

    def __init__(
        self,
        loop: Loop,
        jobs_folder: Path,
        heartbeat_every_s: int,
        heartbeat_prompt: Path,
        now: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        self.loop = loop
        self.folder = jobs_folder
        self.every_s = heartbeat_every_s
        self.prompt_path = heartbeat_prompt
        self.now = now
        self.jobs: list[Job] = load_jobs(jobs_folder)
        self._seen = self._folder_state()
        self.ledger = Ledger(jobs_folder / "runs.jsonl")
        # loopd holds the home's lock: every run still open in the ledger belonged to a process that ended
        closed = self.ledger.close_leftovers(os.getpid()) + self.ledger.close_others(os.getpid())
        for session in closed:
            log.warning("job run %s was cut short by a dead process: recorded as failed", session)
        self.started = now()
        self.last_beat: dt.datetime | None = None
        self._beating = threading.Event()
        self._running: dict[str, str] = {}  # job name -> session running now
        self._guard = threading.Lock()
        self._prompt_problem = ""
        self.problem = ""  # a job file that broke while loopd runs (shown by bxctl jobs)
        self._skipped: set[tuple[str, dt.datetime]] = set()  # minutes skipped because a run was busy
        self._last_tick: dt.datetime | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        loop.maintenance = self.is_maintenance

    # Life ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler's thread."""
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop ticking (runs under way finish on their own threads)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.tick(self.now())
            except Exception:
                log.exception("scheduler tick failed")

    # Ticks -------------------------------------------------------------------------------------------

    def tick(self, now: dt.datetime) -> None:
        """Look at the clock once: reload changed job files, fire due jobs, beat when it is time."""
        self._reload()
        for job in self.jobs:
            for minute in due_minutes(job.schedule, self._last_tick, now):
                self._fire(job, minute, now)
        self._last_tick = now
        if self.every_s > 0:
            since = self.last_beat or self.started
            if (now - since).total_seconds() >= self.every_s and not self._beating.is_set():
                self._beat(now)

    def _folder_state(self) -> tuple[tuple[str, int, int], ...]:
        try:
            entries = sorted(p for p in self.folder.glob("*.toml"))
            return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in entries)
        except OSError:
            return ()

    def _reload(self) -> None:
        state = self._folder_state()
        if state == self._seen:
            return
        self._seen = state
        try:
            self.jobs = load_jobs(self.folder)
            self.problem = ""
            log.info("jobs: %s", ", ".join(j.name for j in self.jobs) or "(none)")
        except JobsInvalid as exc:
            self.problem = (
                f"{exc}; the jobs run as they were until it is fixed, and loopd will not start with it"
            )
            log.error("%s (runbook: jobs-invalid)", self.problem)

    def _fire(self, job: Job, minute: dt.datetime, now: dt.datetime) -> None:
        if self.ledger.fired(job.name, minute) or (job.name, minute) in self._skipped:
            return
        session = session_for(job.name, minute)
        with self._guard:
            busy = self._running.get(job.name)
            if busy:  # this tick is skipped, not queued: the minute is not tried again
                self._skipped.add((job.name, minute))
                self._skipped = {s for s in self._skipped if now - s[1] < dt.timedelta(hours=1)}
                log.info("job %s: skipping %s, the run %s is still busy", job.name, format_time(minute), busy)
                return
            self._running[job.name] = session
        self.ledger.started(job, minute, session, os.getpid())
        text = f"{time_line(now)}\n\n{job.prompt}"
        thread = threading.Thread(target=self._run_job, args=(job, minute, session, text), daemon=True)
        thread.start()

    def run_now(self, name: str) -> str:
        """Start a run of job `name` now, in the background (``bxctl jobs run``); its session id.

        Raises:
            JobNotRun: no such job, a run of it is still busy, or it already ran this minute.
        """
        job = next((j for j in self.jobs if j.name == name), None)
        if job is None:
            known = ", ".join(j.name for j in self.jobs) or "none"
            raise JobNotRun(f"there is no job {name[:64]!r} in {self.folder} (jobs: {known})")
        now = self.now()
        minute = now.replace(second=0, microsecond=0)
        with self._guard:
            busy = self._running.get(name)
        if busy:
            raise JobNotRun(f"job {name} is still running as {busy}; try again when it ends")
        if self.ledger.fired(name, minute):
            raise JobNotRun(f"job {name} already ran this minute; try again in a minute")
        self._fire(job, minute, now)
        return session_for(name, minute)

    def _run_job(self, job: Job, minute: dt.datetime, session: str, text: str) -> None:
        try:
            with priority(Priority.CRON):
                self.loop.turn(session, text, background=True, speaker=f"job:{job.name}")
        except TurnFailed as exc:
            self.ledger.failed(job.name, session, minute, f"{exc.code}: {exc.message}")
            log.warning("job %s (%s) failed: %s", job.name, session, exc.message)
        except Exception as exc:
            self.ledger.failed(job.name, session, minute, f"internal: {exc}")
            log.exception("job %s (%s) failed", job.name, session)
        else:
            self.ledger.finished(job.name, session, minute)
            log.info("job %s ran as %s", job.name, session)
        finally:
            with self._guard:
                self._running.pop(job.name, None)

    def _beat(self, now: dt.datetime) -> None:
        try:
            prompt = self.prompt_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"{self.prompt_path}: {exc}"
            if problem != self._prompt_problem:
                log.error("heartbeat skipped: cannot read %s (runbook: heartbeat-prompt-unreadable)", problem)
                self._prompt_problem = problem
            self.last_beat = now
            return
        if self._prompt_problem:
            log.info("heartbeat prompt %s reads again", self.prompt_path)
            self._prompt_problem = ""
        self.last_beat = now
        self._beating.set()
        text = f"{time_line(now)}\n\n{prompt.strip()}"
        threading.Thread(target=self._run_beat, args=(text,), daemon=True).start()

    def _run_beat(self, text: str) -> None:
        try:
            with priority(Priority.HEARTBEAT):
                self.loop.turn(HEARTBEAT_SESSION, text, background=True, speaker="scheduler")
        except TurnFailed as exc:
            log.warning("heartbeat failed: %s (runbook: %s)", exc.message, exc.runbook or "-")
        except Exception:
            log.exception("heartbeat failed")
        finally:
            self._beating.clear()

    def is_maintenance(self, session_id: str) -> bool:
        """True when `session_id` is ``job-<name>-t<unix seconds>`` of a loaded job whose file says
        ``maintenance = true`` (its runs get the memory tool's maintenance actions; memoryd checks
        each call again against the job file and the ledger)."""
        for job in self.jobs:
            prefix = f"job-{job.name}-t"
            if job.maintenance and session_id.startswith(prefix) and session_id[len(prefix) :].isdigit():
                return True
        return False

    # What bxctl jobs shows ---------------------------------------------------------------------------

    def listing(self, now: dt.datetime | None = None) -> list[dict[str, Any]]:
        """Each job: name, schedule, its next run, whether it runs now, and its last result."""
        now = now or self.now()
        rows = []
        for job in self.jobs:
            upcoming = next_run(job.schedule, now)
            with self._guard:
                running = self._running.get(job.name)
            rows.append(
                {
                    "name": job.name,
                    "schedule": job.schedule.text,
                    "next": format_time(upcoming) if upcoming else None,
                    "running": running,
                    "last": self.ledger.last(job.name),
                }
            )
        return rows
