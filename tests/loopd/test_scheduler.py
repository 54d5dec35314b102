"""The scheduler (M5d-2): every test of M5d section 7 on heartbeat, cron and slots, by name, against the
fake llama-server and a fake memoryd."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from pathlib import Path

import pytest
from test_loop import Rig

from boxmaker.loopd.jobs import JobsInvalid, Ledger
from boxmaker.loopd.loop import LoopSettings
from boxmaker.loopd.scheduler import HEARTBEAT_SESSION, Scheduler, time_line
from boxmaker.proto.records import SessionStart, Usage, User
from fakes.llama_server import FakeLlamaServer

START = dt.datetime(2026, 11, 29, 12, 0, 5, tzinfo=dt.UTC)


class Clock:
    def __init__(self) -> None:
        self.moment = START

    def __call__(self) -> dt.datetime:
        return self.moment


def rig_with(home: Path, server: FakeLlamaServer | None = None) -> Rig:
    rig = Rig(home, server=server)
    rig.loop.settings = LoopSettings(main_slot=0, tool_calls_per_turn=16, max_tokens=256, background_slot=1)
    return rig


def scheduler(rig: Rig, home: Path, every_s: int = 0, prompt: str | None = "Check on things.") -> Scheduler:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "heartbeat.md"
    if prompt is not None:
        path.write_text(prompt, encoding="utf-8")
    return Scheduler(rig.loop, home / "jobs", every_s, path, now=Clock())


def job(home: Path, name: str, schedule: str, prompt: str = "Do the job.") -> None:
    folder = home / "jobs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(f'schedule = "{schedule}"\nprompt = "{prompt}"\n', encoding="utf-8")


def wait_idle(sched: Scheduler, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sched._beating.is_set() and not sched._running:
            return
        time.sleep(0.01)
    raise AssertionError("scheduled runs did not finish")


def test_time_line() -> None:
    assert time_line(START) == "It is 2026-11-29 12:00 UTC (Sunday)."


# Heartbeat -------------------------------------------------------------------------------------------


def test_heartbeat_every_s_1_fires_on_the_background_slot(home: Path) -> None:
    rig = rig_with(home)
    sched = scheduler(rig, home, every_s=1)
    sched.tick(START)  # not yet: less than every_s since start
    assert not (rig.sessions / HEARTBEAT_SESSION).exists()
    sched.tick(START + dt.timedelta(seconds=1))
    wait_idle(sched)
    records = rig.records(HEARTBEAT_SESSION)
    start = records[0]
    assert isinstance(start, SessionStart)
    assert start.slot == 1
    user = next(r for r in records if isinstance(r, User))
    assert user.content == "It is 2026-11-29 12:00 UTC (Sunday).\n\nCheck on things."
    assert user.speaker == "scheduler"  # the scheduler's words, never the owner's (issue 18)
    assert rig.chat_requests()[-1]["id_slot"] == 1
    sched.tick(START + dt.timedelta(seconds=1.5))  # not again until every_s has passed
    wait_idle(sched)
    assert len([r for r in rig.records(HEARTBEAT_SESSION) if isinstance(r, User)]) == 1
    sched.tick(START + dt.timedelta(seconds=2))
    wait_idle(sched)
    assert len([r for r in rig.records(HEARTBEAT_SESSION) if isinstance(r, User)]) == 2


def test_heartbeat_off_by_default(home: Path) -> None:
    rig = rig_with(home)
    sched = scheduler(rig, home, every_s=0)
    sched.tick(START + dt.timedelta(days=1))
    wait_idle(sched)
    assert not (rig.sessions / HEARTBEAT_SESSION).exists()


def test_an_unreadable_heartbeat_prompt_skips_the_beat_and_is_logged_once(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = rig_with(home)
    sched = scheduler(rig, home, every_s=1, prompt=None)
    (home / "heartbeat.md").write_bytes(b"\xff\xfe not utf-8")
    with caplog.at_level(logging.ERROR, logger="boxmaker.loopd"):
        for n in range(1, 4):
            sched.tick(START + dt.timedelta(seconds=n))
    assert not (rig.sessions / HEARTBEAT_SESSION).exists()
    said = [r for r in caplog.records if "heartbeat-prompt-unreadable" in r.getMessage()]
    assert len(said) == 1
    (home / "heartbeat.md").write_text("Readable again.", encoding="utf-8")
    sched.tick(START + dt.timedelta(seconds=5))
    wait_idle(sched)
    assert (rig.sessions / HEARTBEAT_SESSION).exists()


# Cron ------------------------------------------------------------------------------------------------


def test_a_job_every_minute_fires_once_in_its_minute(home: Path) -> None:
    rig = rig_with(home)
    job(home, "tidy", "* * * * *")
    sched = scheduler(rig, home)
    sched.tick(START)
    sched.tick(START + dt.timedelta(seconds=20))
    wait_idle(sched)
    minute = int(START.replace(second=0).timestamp())
    session = f"job-tidy-t{minute}"
    records = rig.records(session)
    assert records[0].slot == 1
    assert next(r for r in records if isinstance(r, User)).content.endswith("\n\nDo the job.")
    assert next(r for r in records if isinstance(r, User)).speaker == "job:tidy"
    lines = [json.loads(x) for x in (home / "jobs" / "runs.jsonl").read_text().splitlines()]
    assert [(x["status"], x["session"]) for x in lines] == [("started", session), ("finished", session)]
    assert lines[0]["pid"] == os.getpid()
    assert sorted(p.name for p in rig.sessions.iterdir() if p.name.startswith("job-")) == [session]


def test_each_due_minute_fires_exactly_once_across_a_restart(home: Path) -> None:
    rig = rig_with(home)
    job(home, "tidy", "* * * * *")
    first = scheduler(rig, home)
    first.tick(START)
    wait_idle(first)
    again = scheduler(rig, home)  # a new loopd process, same minute
    again.tick(START + dt.timedelta(seconds=30))
    wait_idle(again)
    assert len([p for p in rig.sessions.iterdir() if p.name.startswith("job-tidy-")]) == 1
    again.tick(START + dt.timedelta(minutes=1))
    wait_idle(again)
    assert len([p for p in rig.sessions.iterdir() if p.name.startswith("job-tidy-")]) == 2


def test_a_still_busy_run_of_the_same_name_is_skipped(home: Path) -> None:
    server = FakeLlamaServer(delay=1.5)
    rig = rig_with(home, server=server)
    job(home, "slow", "* * * * *")
    sched = scheduler(rig, home)
    sched.tick(START)
    time.sleep(0.2)
    sched.tick(START + dt.timedelta(minutes=1))  # the first run is still in the model
    wait_idle(sched)
    runs = [p.name for p in rig.sessions.iterdir() if p.name.startswith("job-slow-")]
    assert len(runs) == 1


def test_after_a_stall_missed_minutes_are_skipped_not_replayed(home: Path) -> None:
    rig = rig_with(home)
    job(home, "tidy", "* * * * *")
    sched = scheduler(rig, home)
    sched.tick(START)
    wait_idle(sched)
    sched.tick(START + dt.timedelta(minutes=30))  # nothing ticked for half an hour
    wait_idle(sched)
    assert len([p for p in rig.sessions.iterdir() if p.name.startswith("job-tidy-")]) == 2


def test_a_leftover_started_after_a_restart_is_failed(home: Path) -> None:
    folder = home / "jobs"
    folder.mkdir(parents=True)
    dead = {
        "time": "2026-11-29T11:00:00Z",
        "scheduled": "2026-11-29T11:00:00Z",
        "name": "tidy",
        "session": "job-tidy-t1795950000",
        "status": "started",
        "pid": 999_999_999,
    }
    (folder / "runs.jsonl").write_text(json.dumps(dead) + "\n")
    rig = rig_with(home)
    scheduler(rig, home)
    lines = [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines()]
    assert [x["status"] for x in lines] == ["started", "failed"]
    assert Ledger(folder / "runs.jsonl").busy("tidy") is None


def test_unknown_keys_in_a_job_file_refuse_start(home: Path) -> None:
    folder = home / "jobs"
    folder.mkdir(parents=True)
    (folder / "bad.toml").write_text('schedule = "* * * * *"\nprompt = "x"\nspeaker = "me"\n')
    rig = rig_with(home)
    with pytest.raises(JobsInvalid, match="speaker"):
        scheduler(rig, home)


def test_a_job_file_added_while_running_is_picked_up_and_a_broken_one_keeps_the_jobs(home: Path) -> None:
    rig = rig_with(home)
    sched = scheduler(rig, home)
    assert sched.jobs == []
    job(home, "later", "* * * * *")
    sched.tick(START)
    wait_idle(sched)
    assert [j.name for j in sched.jobs] == ["later"]
    (home / "jobs" / "broken.toml").write_text("schedule = 'every day'\nprompt = 'x'\n")
    sched.tick(START + dt.timedelta(minutes=1))
    wait_idle(sched)
    assert [j.name for j in sched.jobs] == ["later"]


def test_the_listing_shows_next_run_and_last_result(home: Path) -> None:
    rig = rig_with(home)
    job(home, "weekly", "0 6 * * 1")
    job(home, "tidy", "* * * * *")
    sched = scheduler(rig, home)
    sched.tick(START)
    wait_idle(sched)
    rows = {row["name"]: row for row in sched.listing(START)}
    assert rows["weekly"]["next"] == "2026-11-30T06:00:00Z"
    assert rows["weekly"]["last"] is None
    assert rows["tidy"]["last"]["status"] == "finished"


# Slot -------------------------------------------------------------------------------------------------


def test_slot_a_heartbeat_between_two_main_turns_leaves_the_main_cache(home: Path) -> None:
    rig = rig_with(home)
    rig.loop.turn("chat-main", "first message on the main slot")
    sched = scheduler(rig, home, every_s=1)
    sched.tick(START + dt.timedelta(seconds=1))
    wait_idle(sched)
    assert rig.chat_requests()[-1]["id_slot"] == 1
    rig.loop.turn("chat-main", "second")
    usages = [r for r in rig.records("chat-main") if isinstance(r, Usage)]
    first, second = usages
    assert second.cache_n == first.cache_n + first.prompt_n + first.predicted_n - 1
    assert rig.chat_requests()[-1]["id_slot"] == 0


def test_a_skipped_minute_is_not_run_later_in_that_minute(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeLlamaServer(delay=1.0)
    rig = rig_with(home, server=server)
    job(home, "slow", "* * * * *")
    sched = scheduler(rig, home)
    sched.tick(START)
    time.sleep(0.1)
    with caplog.at_level(logging.INFO, logger="boxmaker.loopd"):
        for second in range(0, 50, 5):  # the next minute: busy at first, free later in it
            sched.tick(START + dt.timedelta(minutes=1, seconds=second))
            time.sleep(0.15)
    wait_idle(sched)
    sched.tick(START + dt.timedelta(minutes=1, seconds=50))
    wait_idle(sched)
    assert len([p for p in rig.sessions.iterdir() if p.name.startswith("job-slow-")]) == 1
    skips = [r for r in caplog.records if "skipping" in r.getMessage()]
    assert len(skips) == 1


def test_a_run_left_open_by_a_process_still_not_reaped_is_closed_at_start(home: Path) -> None:
    folder = home / "jobs"
    folder.mkdir(parents=True)
    parent = os.getppid()  # alive, and not this process: stands for a zombie loopd
    line = {
        "time": "2026-11-29T11:00:00Z",
        "scheduled": "2026-11-29T11:00:00Z",
        "name": "tidy",
        "session": "job-tidy-t1795950000",
        "status": "started",
        "pid": parent,
    }
    (folder / "runs.jsonl").write_text(json.dumps(line) + "\n")
    rig = rig_with(home)
    sched = scheduler(rig, home)
    assert sched.ledger.busy("tidy") is None


def test_a_job_file_broken_while_running_is_a_problem_bxctl_shows(home: Path) -> None:
    rig = rig_with(home)
    job(home, "good", "* * * * *")
    sched = scheduler(rig, home)
    (home / "jobs" / "Bad.toml").write_text('schedule = "* * * * *"\nprompt = "x"\n')
    sched.tick(START)
    wait_idle(sched)
    assert "Bad.toml" in sched.problem
    (home / "jobs" / "Bad.toml").unlink()
    sched.tick(START + dt.timedelta(seconds=30))
    assert sched.problem == ""


def test_jobs_run_starts_a_run_now_and_refuses_what_it_cannot(home: Path) -> None:
    from boxmaker.loopd.scheduler import JobNotRun

    rig = rig_with(home)
    job(home, "tidy", "0 7 * * *")
    sched = scheduler(rig, home)
    sched.tick(START)
    session = sched.run_now("tidy")
    wait_idle(sched)
    assert session == f"job-tidy-t{int(START.replace(second=0).timestamp())}"
    assert next(r for r in rig.records(session) if isinstance(r, User)).speaker == "job:tidy"
    with pytest.raises(JobNotRun, match="already ran this minute"):
        sched.run_now("tidy")
    with pytest.raises(JobNotRun, match="there is no job 'nope'"):
        sched.run_now("nope")
