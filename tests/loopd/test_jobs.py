"""Cron jobs: job files, session ids, the run ledger and the minutes a tick fires (M5d section 4.2;
DESIGN 10.2 and 10.4)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from boxmaker.loopd.cron import parse
from boxmaker.loopd.jobs import (
    LEFTOVER,
    Job,
    JobsInvalid,
    Ledger,
    due_minutes,
    load_jobs,
    pid_alive,
    session_for,
)
from boxmaker.proto.errors import InvalidId
from boxmaker.proto.home import Layout
from boxmaker.proto.ids import is_session_id
from boxmaker.proto.settings import packaged_starter
from conftest import Clock

UTC = dt.UTC
MINUTE = dt.datetime(2026, 9, 24, 7, 0, tzinfo=UTC)
GOOD = 'schedule = "0 7 * * *"\nprompt = "Check the mail."\n'


@pytest.fixture
def jobs(home: Path) -> Path:
    folder = Layout(home).jobs
    folder.mkdir(parents=True)
    return folder


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# Job files ---------------------------------------------------------------------------------------------


def test_a_missing_folder_holds_no_jobs(home: Path) -> None:
    assert load_jobs(Layout(home).jobs) == []


def test_jobs_load_sorted_and_other_files_are_ignored(jobs: Path) -> None:
    write(jobs, "weekly.toml", 'schedule = "0 6 * * 1"\nprompt = """\nReview memory.\n"""\n')
    write(jobs, "mail.toml", GOOD)
    write(jobs, "runs.jsonl", "")
    write(jobs, "tier.toml.example", "not = toml = at all")
    write(jobs, "notes.txt", "x")
    loaded = load_jobs(jobs)
    assert [job.name for job in loaded] == ["mail", "weekly"]
    mail = loaded[0]
    assert mail == Job("mail", parse("0 7 * * *"), "Check the mail.", jobs / "mail.toml")
    assert loaded[1].prompt == "Review memory.\n"


def test_the_name_may_have_48_characters_not_49(jobs: Path) -> None:
    write(jobs, "a" * 48 + ".toml", GOOD)
    assert [job.name for job in load_jobs(jobs)] == ["a" * 48]
    path = write(jobs, "b" * 49 + ".toml", GOOD)
    with pytest.raises(JobsInvalid) as caught:
        load_jobs(jobs)
    assert str(caught.value) == (
        f"{path}: {'b' * 49!r} is not a job name: "
        "1 to 48 characters of a-z, 0-9 and '-', not starting with '-'"
    )


BAD_FILES = [
    ("Mail.toml", GOOD, "'Mail' is not a job name"),
    ("-mail.toml", GOOD, "'-mail' is not a job name"),
    ("mail_box.toml", GOOD, "'mail_box' is not a job name"),
    (
        "mail.toml",
        GOOD + 'model = "x"\n',
        "unknown key 'model' at the top level; remove it or fix its spelling",
    ),
    ("mail.toml", 'schedule = "0 7 * * *"\n', "exactly one of prompt and prompt_file is needed"),
    (
        "mail.toml",
        GOOD + 'prompt_file = "dream.md"\n',
        "exactly one of prompt and prompt_file is needed",
    ),
    (
        "mail.toml",
        'schedule = "0 7 * * *"\nprompt_file = "no-such-prompt.md"\n',
        "prompt_file 'no-such-prompt.md': no such file",
    ),
    ("mail.toml", GOOD + 'maintenance = "yes"\n', "maintenance: must be true or false, not text in quotes"),
    ("mail.toml", 'prompt = "x"\n', "Object missing required field `schedule`"),
    ("mail.toml", 'schedule = 7\nprompt = "x"\n', "schedule: must be text in quotes, not a whole number"),
    (
        "mail.toml",
        'schedule = "0 7 * * *"\nprompt = ["x"]\n',
        "prompt: must be text in quotes or nothing, not a list [...]",
    ),
    ("mail.toml", 'schedule = "0 7 * * *"\nprompt = ""\n', "prompt is empty"),
    ("mail.toml", 'schedule = "0 7 * * *"\nprompt = "  \\n "\n', "prompt is empty"),
    (
        "mail.toml",
        f'schedule = "0 7 * * *"\nprompt = "{"x" * 20_001}"\n',
        "prompt has 20,001 characters; at most 20,000",
    ),
    (
        "mail.toml",
        'schedule = "0 7 * * 8"\nprompt = "x"\n',
        "schedule '0 7 * * 8': day-of-week: 8 is out of range 0-7",
    ),
    (
        "mail.toml",
        'schedule = "@daily"\nprompt = "x"\n',
        "schedule '@daily': nicknames such as '@daily' are not supported",
    ),
    ("mail.toml", "schedule = 0 7\n", "not valid TOML"),
    ("mail.toml", b'schedule = "0 7 * * *"\nprompt = "\xff"\n', "not UTF-8"),
]


@pytest.mark.parametrize(("name", "text", "problem"), BAD_FILES)
def test_a_bad_file_is_named_with_its_problem(jobs: Path, name: str, text: str | bytes, problem: str) -> None:
    write(jobs, "fine.toml", GOOD)
    path = write(jobs, name, text)
    with pytest.raises(JobsInvalid) as caught:
        load_jobs(jobs)
    assert str(caught.value).startswith(f"{path}: {problem}")
    assert caught.value.path == path
    assert caught.value.runbook == "jobs-invalid"


def test_a_prompt_of_20000_characters_is_fine(jobs: Path) -> None:
    write(jobs, "long.toml", f'schedule = "0 7 * * *"\nprompt = "{"x" * 20_000}"\n')
    assert len(load_jobs(jobs)[0].prompt) == 20_000


def test_a_folder_named_like_a_job_is_refused(jobs: Path) -> None:
    (jobs / "odd.toml").mkdir()
    with pytest.raises(JobsInvalid, match="is not a file"):
        load_jobs(jobs)


def test_the_starter_tier_job_loads(jobs: Path) -> None:
    starter = packaged_starter("jobs/tier.toml.example")
    shutil.copy(starter, jobs / "tier.toml")
    (tier,) = load_jobs(jobs)
    assert tier.schedule.text == "0 6 * * 1"
    for words in ("untrusted", "consolidate", "`add`", "`remove`", "`note`", "Do not fetch", "time line"):
        assert words in tier.prompt or words in starter.read_text(encoding="utf-8"), words


def test_the_starter_dream_job_loads_as_a_maintenance_job_with_the_packaged_prompt(jobs: Path) -> None:
    shutil.copy(packaged_starter("jobs/dream.toml.example"), jobs / "dream.toml")
    (dream,) = load_jobs(jobs)
    assert (dream.name, dream.schedule.text, dream.maintenance) == ("dream", "30 3 * * *", True)
    assert dream.prompt == packaged_starter("dream.md").read_text(encoding="utf-8")
    for words in ("dream-input", "supersede", "pending-cleanup", "merge", "cool", "assign", "never deleted"):
        assert words in dream.prompt, words


def test_maintenance_defaults_to_false_and_a_prompt_file_in_the_jobs_folder_wins(jobs: Path) -> None:
    write(jobs, "mail.toml", GOOD)
    write(jobs, "dream.md", "My own dream prompt.")
    write(jobs, "tidy.toml", 'schedule = "0 7 * * *"\nprompt_file = "dream.md"\nmaintenance = false\n')
    mail, dream = load_jobs(jobs)
    assert not mail.maintenance
    assert (dream.name, dream.prompt, dream.maintenance) == ("tidy", "My own dream prompt.", False)


# Session ids -------------------------------------------------------------------------------------------


def test_session_for_is_the_unix_seconds_of_the_minute() -> None:
    assert session_for("mail", MINUTE) == "job-mail-t1790233200"
    assert session_for("mail", MINUTE + dt.timedelta(seconds=59)) == "job-mail-t1790233200"
    assert int(MINUTE.timestamp()) == 1790233200


def test_session_for_the_longest_name_is_a_session_id() -> None:
    session = session_for("z" * 48, dt.datetime(2286, 11, 20, 17, 46, tzinfo=UTC))
    assert len(session) == 64
    assert is_session_id(session)


@pytest.mark.parametrize("name", ["z" * 49, "Mail", "-x", ""])
def test_session_for_refuses_a_bad_name(name: str) -> None:
    with pytest.raises(InvalidId):
        session_for(name, MINUTE)


def test_session_for_refuses_a_naive_minute() -> None:
    with pytest.raises(ValueError, match="naive"):
        session_for("mail", dt.datetime(2026, 1, 1))


# The ledger --------------------------------------------------------------------------------------------


def job(name: str = "mail") -> Job:
    return Job(name, parse("0 7 * * *"), "Check the mail.", Path(f"/jobs/{name}.toml"))


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()]


def test_a_run_round_trips(jobs: Path, clock: Clock) -> None:
    ledger = Ledger(jobs / "runs.jsonl", now=clock.now)
    assert ledger.last("mail") is None
    assert ledger.busy("mail") is None
    assert not ledger.fired("mail", MINUTE)
    session = session_for("mail", MINUTE)
    ledger.started(job(), MINUTE + dt.timedelta(seconds=3), session, 4242)
    assert ledger.busy("mail") == session
    assert ledger.fired("mail", MINUTE)
    assert not ledger.fired("mail", MINUTE + dt.timedelta(minutes=1))
    assert not ledger.fired("other", MINUTE)
    clock.advance(seconds=30)
    ledger.finished("mail", session, MINUTE)
    assert ledger.busy("mail") is None
    assert lines(ledger.path) == [
        {
            "time": "2026-09-24T21:02:07Z",
            "scheduled": "2026-09-24T07:00:00Z",
            "name": "mail",
            "session": session,
            "status": "started",
            "pid": 4242,
        },
        {
            "time": "2026-09-24T21:02:37Z",
            "scheduled": "2026-09-24T07:00:00Z",
            "name": "mail",
            "session": session,
            "status": "finished",
            "pid": 4242,
        },
    ]
    assert ledger.last("mail") == lines(ledger.path)[1]
    assert oct(ledger.path.stat().st_mode & 0o777) == "0o600"


def test_a_failed_run_keeps_why_and_ends_busy(jobs: Path) -> None:
    ledger = Ledger(jobs)  # the folder: runs.jsonl in it
    assert ledger.path == jobs / "runs.jsonl"
    ledger.started(job(), MINUTE, "job-mail-t1", 7)
    ledger.failed("mail", "job-mail-t1", MINUTE, "model-unreachable")
    last = ledger.last("mail")
    assert last is not None
    assert (last["status"], last["why"], last["pid"]) == ("failed", "model-unreachable", 7)
    assert ledger.busy("mail") is None
    ledger.failed("mail", "job-mail-t2", MINUTE + dt.timedelta(minutes=1))
    assert "why" not in lines(ledger.path)[-1]


def test_the_ledger_makes_a_missing_jobs_folder(home: Path) -> None:
    ledger = Ledger(Layout(home).jobs / "runs.jsonl")
    ledger.started(job(), MINUTE, "job-mail-t1", 7)
    assert ledger.busy("mail") == "job-mail-t1"
    assert oct(Layout(home).jobs.stat().st_mode & 0o777) == "0o700"


def test_fired_survives_a_restart(jobs: Path) -> None:
    first = Ledger(jobs / "runs.jsonl")
    first.started(job(), MINUTE, "job-mail-t1", 7)
    first.finished("mail", "job-mail-t1", MINUTE)
    again = Ledger(jobs / "runs.jsonl")
    assert again.fired("mail", MINUTE)
    assert again.fired("mail", MINUTE + dt.timedelta(seconds=59))
    assert not again.fired("mail", MINUTE + dt.timedelta(minutes=1))
    assert again.busy("mail") is None


def test_busy_is_per_job_and_names_the_newest_open_run(jobs: Path) -> None:
    ledger = Ledger(jobs / "runs.jsonl")
    ledger.started(job("mail"), MINUTE, "job-mail-t1", 7)
    ledger.started(job("news"), MINUTE, "job-news-t1", 7)
    ledger.started(job("mail"), MINUTE + dt.timedelta(minutes=1), "job-mail-t2", 7)
    assert ledger.busy("mail") == "job-mail-t2"
    ledger.finished("mail", "job-mail-t2", MINUTE + dt.timedelta(minutes=1))
    assert ledger.busy("mail") == "job-mail-t1"
    assert ledger.busy("news") == "job-news-t1"
    assert Ledger(jobs / "runs.jsonl").busy("mail") == "job-mail-t1"


def test_close_leftovers_closes_runs_of_dead_processes_and_of_this_pid(jobs: Path, clock: Clock) -> None:
    ledger = Ledger(jobs / "runs.jsonl")
    dead = dead_pid()
    me = os.getpid()
    parent = os.getppid()
    ledger.started(job("dead"), MINUTE, "job-dead-t1", dead)
    ledger.started(job("mine"), MINUTE, "job-mine-t1", me)
    ledger.started(job("live"), MINUTE, "job-live-t1", parent)
    ledger.started(job("done"), MINUTE, "job-done-t1", dead)
    ledger.finished("done", "job-done-t1", MINUTE)

    restarted = Ledger(jobs / "runs.jsonl", now=clock.now)
    assert restarted.close_leftovers(me) == ["job-dead-t1", "job-mine-t1"]
    assert restarted.busy("dead") is None
    assert restarted.busy("mine") is None
    assert restarted.busy("live") == "job-live-t1"
    closed = lines(restarted.path)[-2:]
    assert [(line["session"], line["status"], line["why"], line["pid"]) for line in closed] == [
        ("job-dead-t1", "failed", LEFTOVER, dead),
        ("job-mine-t1", "failed", LEFTOVER, me),
    ]
    assert closed[0]["scheduled"] == "2026-09-24T07:00:00Z"
    assert closed[0]["time"] == "2026-09-24T21:02:07Z"
    assert restarted.close_leftovers(me) == []
    assert Ledger(jobs / "runs.jsonl").busy("dead") is None


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(dead_pid())
    assert not pid_alive(0)
    assert not pid_alive(-1)


def test_a_torn_last_line_is_not_a_line(jobs: Path) -> None:
    path = jobs / "runs.jsonl"
    ledger = Ledger(path)
    ledger.started(job(), MINUTE, "job-mail-t1", 7)
    with path.open("ab") as handle:
        handle.write(b'{"time":"2026-09-24T07:01:00Z","scheduled":"2026-09-24T07:01:00Z","name":"mail","ses')
    reopened = Ledger(path)
    assert reopened.busy("mail") == "job-mail-t1"
    assert not reopened.fired("mail", MINUTE + dt.timedelta(minutes=1))
    reopened.finished("mail", "job-mail-t1", MINUTE)
    assert [line["status"] for line in lines(path)] == ["started", "finished"]
    assert (jobs / "runs.jsonl.torn").read_bytes().endswith(b'"name":"mail","ses\n')


def test_lines_that_are_not_ledger_lines_are_skipped(jobs: Path) -> None:
    path = write(
        jobs,
        "runs.jsonl",
        "not json\n[1]\n"
        '{"time":"x","scheduled":"2026-09-24T07:00:00Z","name":"mail","session":"s","status":"odd","pid":1}\n'
        '{"time":"x","scheduled":"later","name":"mail","session":"s","status":"started","pid":1}\n'
        '{"time":"x","scheduled":"2026-09-24T07:00:00Z","name":"mail","session":"s","status":"started","pid":"1"}\n'
        '{"time":"x","scheduled":"2026-09-24T07:00:00Z","name":"mail","session":"s","status":"started","pid":1}\n',
    )
    ledger = Ledger(path)
    assert ledger.busy("mail") == "s"
    assert ledger.fired("mail", MINUTE)


def test_the_ledger_reads_again_when_the_file_changed_under_it(jobs: Path) -> None:
    path = jobs / "runs.jsonl"
    ours = Ledger(path)
    ours.started(job(), MINUTE, "job-mail-t1", 7)
    Ledger(path).finished("mail", "job-mail-t1", MINUTE)  # another writer (a test only)
    assert ours.busy("mail") is None
    path.write_text("", encoding="ascii")
    assert not ours.fired("mail", MINUTE)


# Which minutes a tick fires ----------------------------------------------------------------------------

EVERY_MINUTE = parse("* * * * *")
AT_SEVEN = parse("0 7 * * *")


def test_a_tick_fires_the_current_minute_when_due() -> None:
    now = MINUTE + dt.timedelta(seconds=12)
    assert due_minutes(AT_SEVEN, None, now) == [MINUTE]
    assert due_minutes(AT_SEVEN, now - dt.timedelta(seconds=40), now) == [MINUTE]
    assert due_minutes(AT_SEVEN, None, now + dt.timedelta(minutes=1)) == []


def test_a_late_tick_catches_up_the_minute_it_skipped() -> None:
    last = MINUTE - dt.timedelta(seconds=1)  # 06:59:59
    now = MINUTE + dt.timedelta(minutes=1, seconds=1)  # 07:01:01: 07:00 had no tick
    assert due_minutes(AT_SEVEN, last, now) == [MINUTE]
    assert due_minutes(EVERY_MINUTE, last, now) == [MINUTE, MINUTE + dt.timedelta(minutes=1)]


def test_after_a_stall_missed_minutes_are_not_replayed() -> None:
    last = MINUTE - dt.timedelta(minutes=1, seconds=1)  # 06:58:59
    now = MINUTE + dt.timedelta(minutes=1, seconds=5)  # 07:01:05, three minutes on
    assert due_minutes(AT_SEVEN, last, now) == []
    assert due_minutes(EVERY_MINUTE, last, now) == [MINUTE + dt.timedelta(minutes=1)]
    assert due_minutes(EVERY_MINUTE, now - dt.timedelta(days=2), now) == [MINUTE + dt.timedelta(minutes=1)]


def test_a_clock_that_went_back_fires_only_the_current_minute() -> None:
    now = MINUTE + dt.timedelta(seconds=5)
    assert due_minutes(EVERY_MINUTE, now + dt.timedelta(minutes=10), now) == [MINUTE]


def test_due_minutes_refuses_naive_times() -> None:
    with pytest.raises(ValueError, match="naive"):
        due_minutes(EVERY_MINUTE, None, dt.datetime(2026, 1, 1))


def test_a_schedule_that_never_runs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "never.toml").write_text('schedule = "0 0 31 2 *"\nprompt = "x"\n')
    with pytest.raises(JobsInvalid, match="never runs"):
        load_jobs(tmp_path)
    (tmp_path / "never.toml").write_text('schedule = "0 0 29 2 *"\nprompt = "leap days"\n')
    assert [j.name for j in load_jobs(tmp_path)] == ["never"]


def test_a_negative_value_is_named_plainly(tmp_path: Path) -> None:
    (tmp_path / "neg.toml").write_text('schedule = "-1 * * * *"\nprompt = "x"\n')
    with pytest.raises(
        JobsInvalid, match=r"minute: '-1' is not a value or a range \(values are 0-59; no negatives\)"
    ):
        load_jobs(tmp_path)
