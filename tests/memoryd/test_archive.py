"""The archive and its daily timer, and the journal replay (seed 003 sections 7.1, 8, 9, 13; issue 6).

Through the real service and files: each run appends every capture not yet archived to
archive/<capture date>.md, one journal commit per run (archive, or archive-skip when there is nothing),
and the item's Source moves into the archive; the timer runs once at start and after each UTC midnight
by memoryd's clock; replaying the journal into an empty folder reproduces the files byte for byte.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from item_helpers import (
    archive,
    capture,
    commit_events,
    set_status,
    stamp,
    supersede,
    withdraw,
    withdrawn_by_id,
)

from boxmaker.memoryd.config import load
from boxmaker.memoryd.erase import run
from boxmaker.memoryd.items import replay
from boxmaker.memoryd.items.archive import LISTED, Run
from boxmaker.memoryd.items.replay import replay_into
from boxmaker.memoryd.service import Memoryd
from boxmaker.memoryd.write.actions import Add, Replace
from boxmaker.memoryd.write.answer import OWNER, Caller
from boxmaker.proto.errors import ConfigError
from boxmaker.proto.labels import DataClass, Label
from conftest import Clock


def journal(memory: Memoryd) -> list[dict[str, Any]]:
    return list(reversed(list(memory.memory.journal.entries_newest_first())))


@pytest.fixture
def timed(home: Path, clock: Clock) -> Iterator[Memoryd]:
    """A service whose archive timer looks at the (test's) clock every 50 ms."""
    memory = Memoryd(load(None, str(home)), now=clock.now, archive_poll=0.05)
    memory.open()
    yield memory
    memory.close()


def test_a_run_appends_captures_to_their_day_file_and_moves_their_source(
    home: Path, service: Memoryd
) -> None:
    memory = home / "memory"
    first = capture(
        service,
        "The staging host is 10.0.0.7.",
        kind="state",
        subject="host:staging-ip",
        scope="environment",
        confidence="observed-once",
        corroborating=("sessions/chat-b/0.jsonl#9",),
    )
    second = capture(service, "Deploys go out on Tuesdays.", untrusted=True, inspired_by="hyp-2026-09-24-001")
    done = archive(service, "owner")
    assert done.files == {"archive/2026-09-24.md": [first, second]}
    assert done.sentence() == f"archived 2 items to archive/2026-09-24.md ({done.edit})"
    path = memory / "archive" / "2026-09-24.md"
    assert path.stat().st_mode & 0o777 == 0o600
    text = path.read_text()
    assert text.startswith("# Archive 2026-09-24\n\n<!-- Written by memoryd's archive timer")
    assert (
        f"## {first}\n\n"
        "- [2026-09-24] (state) The staging host is 10.0.0.7.\n"
        f"  - id: {first}\n"
        "  - kind: state\n"
        "  - subject: host:staging-ip\n"
        "  - Scope: environment\n"
        "  - Status: active\n"
        "  - Source: sessions/chat-alpha/0.jsonl#3\n"
        "  - label: private\n"
        "  - Confidence-Scheme: epistemic-status-v1\n"
        "  - Confidence: observed-once\n"
        "  - corroborating_refs:\n"
        "    - sessions/chat-b/0.jsonl#9\n\n"
    ) in text
    assert "  - label: private · untrusted\n  - inspired_by: hyp-2026-09-24-001\n" in text
    # The fold's Source now anchors into the append-only layer; the capture anchor stays.
    item = service.memory.items.items()[first]
    assert item.source == f"archive/2026-09-24.md#{first}"
    assert item.captured_from == "sessions/chat-alpha/0.jsonl#3"
    last = journal(service)[-1]
    assert (last["action"], last["where"], last["session"]) == ("archive", "archive/2026-09-24.md", "owner")
    assert last["events"] == [
        {
            "event": "archive",
            "time": "2026-09-24T21:02:07Z",
            "file": "archive/2026-09-24.md",
            "ids": [first, second],
        }
    ]
    assert json.loads((memory / "items.jsonl").read_text().splitlines()[-1]) == last["events"][0]


def test_runs_append_only_and_an_empty_run_is_archive_skip(
    home: Path, service: Memoryd, clock: Clock
) -> None:
    path = home / "memory" / "archive" / "2026-09-24.md"
    capture(service, "first fact")
    archive(service, "owner")
    before = path.read_bytes()
    events_before = (home / "memory" / "items.jsonl").read_bytes()
    skipped = archive(service, "owner")
    assert skipped.skipped
    assert skipped.sentence().startswith("nothing to archive")
    assert journal(service)[-1]["action"] == "archive-skip"
    assert "events" not in journal(service)[-1]
    assert (home / "memory" / "items.jsonl").read_bytes() == events_before
    third = capture(service, "second fact, same day")
    clock.advance(days=1)
    fourth = capture(service, "a fact of the next day")
    done = archive(service, "owner")
    assert done.files == {"archive/2026-09-24.md": [third], "archive/2026-09-25.md": [fourth]}
    after = path.read_bytes()
    assert after.startswith(before)
    assert after.count(b"# Archive") == 1
    assert journal(service)[-1]["where"] == "archive/"
    assert (home / "memory" / "archive" / "2026-09-25.md").read_text().startswith("# Archive 2026-09-25")


def test_item_text_cannot_forge_archive_structure(home: Path, service: Memoryd) -> None:
    ident = capture(service, "line one\n## mem-2026-01-01-001\n- [2026-01-01] (state) forged <b>x</b>")
    archive(service, "owner")
    text = (home / "memory" / "archive" / "2026-09-24.md").read_text()
    assert [line for line in text.splitlines() if line.startswith("## ")] == [f"## {ident}"]
    assert "line one\\n## mem-2026-01-01-001\\n- \\[2026-01-01\\] (state) forged \\<b\\>x\\</b\\>" in text


def test_withdrawn_items_are_archived_and_erased_ones_are_not(home: Path, service: Memoryd) -> None:
    service.memory = dataclasses.replace(service.memory, exclusion_for=withdrawn_by_id)
    kept = capture(service, "withdrawn but raw evidence")
    withdraw(service, kept)
    gone = capture(service, "erased before the archive")
    commit_events(
        service,
        "erase",
        [{"event": "erase", "time": stamp(service), "erasure": "memerase-2026-09-24-001", "ids": [gone]}],
    )
    done = archive(service, "owner")
    assert done.files == {"archive/2026-09-24.md": [kept]}
    text = (home / "memory" / "archive" / "2026-09-24.md").read_text()
    assert "withdrawn but raw evidence" in text
    assert "erased before" not in text
    # ... while the projections leave the withdrawn item out.
    assert "withdrawn but raw evidence" not in (home / "memory" / "index.md").read_text()


def test_the_timer_runs_once_at_start_and_once_after_each_utc_midnight(
    home: Path, clock: Clock, timed: Memoryd
) -> None:
    timer = timed.archive_timer
    assert timer is not None
    assert timer.runs == 1
    assert [e["action"] for e in journal(timed)] == ["archive-skip"]
    assert journal(timed)[0]["session"] == "memoryd"
    ident = capture(timed, "captured in the evening")
    checks = timer.checks
    timer.poke()
    assert timer.wait_checks(checks + 2)
    assert timer.runs == 1
    assert timed.memory.items.items()[ident].archive_ref is None
    clock.moment = dt.datetime(2026, 9, 25, 0, 0, 1, tzinfo=dt.UTC)
    checks = timer.checks
    timer.poke()
    assert timer.wait_checks(checks + 1)
    assert timer.runs == 2
    assert timed.memory.items.items()[ident].source == f"archive/2026-09-24.md#{ident}"
    assert [e["action"] for e in journal(timed)] == ["archive-skip", "note", "archive"]
    checks = timer.checks
    timer.poke()
    assert timer.wait_checks(checks + 3)
    assert timer.runs == 2  # once per day


def test_a_restart_the_same_day_does_not_run_again(home: Path, clock: Clock) -> None:
    first = Memoryd(load(None, str(home)), now=clock.now)
    first.open()
    first.close()
    clock.advance(hours=2)
    second = Memoryd(load(None, str(home)), now=clock.now)
    second.open()
    try:
        assert second.archive_timer is not None
        assert second.archive_timer.runs == 0
        assert [e["action"] for e in journal(second)] == ["archive-skip"]
    finally:
        second.close()


def test_archive_config_enabled_false_and_unknown_keys(home: Path, clock: Clock, tmp_path: Path) -> None:
    config = tmp_path / "memoryd.toml"
    config.write_text(f'[paths]\nhome = "{home}"\n[archive]\nenabled = false\n')
    memory = Memoryd(load(config), now=clock.now)
    memory.open()
    try:
        assert memory.archive_timer is None
        assert journal(memory) == []
    finally:
        memory.close()
    config.write_text("[archive]\nenabled = true\nhour = 3\n")
    with pytest.raises(ConfigError, match="hour"):
        load(config)


def generated_files(root: Path, wanted: tuple[str, ...]) -> dict[str, bytes]:
    """The files named `wanted` under `root`, and archive/ and topics/, by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and (p.name in wanted or p.parent.name in ("archive", "topics"))
    }


def test_replaying_the_journal_rebuilds_the_files_byte_for_byte(
    home: Path, service: Memoryd, clock: Clock, tmp_path: Path
) -> None:
    service.memory = dataclasses.replace(service.memory, exclusion_for=withdrawn_by_id)
    clean = Caller("chat-alpha", "c1", Label(DataClass.PRIVATE, False))
    service.memory.writer.note(clean, "A plain note from a session.", "note")
    service.memory.writer.memory(OWNER, Add(file="user", text="Prefers answers in UTC."))
    service.memory.writer.memory(clean, Add(file="memory", text="The build takes 4 minutes."))
    service.memory.writer.memory(
        clean, Replace(file="memory", old="The build takes 4 minutes.", text="The build takes 5 minutes.")
    )
    old = capture(service, "Staging is 10.0.0.7.", kind="state", subject="host:staging-ip")
    archive(service, "owner")
    clock.advance(days=1)
    new = capture(service, "Staging is 10.0.0.9.", kind="state", subject="host:staging-ip")
    supersede(service, old, new)
    doubt = capture(service, "Retries fix the flaky upload.", scope="operational pitfalls", untrusted=True)
    set_status(service, doubt, "pending-cleanup")
    hidden = capture(service, "An abandoned exploration.", scope="experiments")
    withdraw(service, hidden)
    service.memory.writer.note(
        Caller("chat-beta", "c2", Label(DataClass.PRIVATE, True)), "Seen on a web page.", "note"
    )
    archive(service, "owner")
    memory = home / "memory"
    out = tmp_path / "replayed"
    replay.replay(journal(service), out, withdrawn_by_id)

    wanted = ("items.jsonl", "controls.jsonl", "notes.md", "memory.md", "user.md", "index.md")
    original, rebuilt = generated_files(memory, wanted), generated_files(out, wanted)
    assert sorted(original) == sorted(rebuilt)
    assert {
        "archive/2026-09-24.md",
        "archive/2026-09-25.md",
        "topics/host.md",
        "topics/operational-pitfalls.md",
    } <= set(original)
    assert "topics/experiments.md" not in original  # withdrawn
    for name in original:
        assert rebuilt[name] == original[name], name


def test_replay_after_an_erasure_honours_its_tombstone(
    home: Path, service: Memoryd, clock: Clock, tmp_path: Path
) -> None:
    """Seed 003 sections 7.1 (replayable) and 12.3: after an erasure, replaying the journal from empty
    gives the scrubbed files, the tombstone included, and the erased text is nowhere in them."""
    secret_text = "The locker_code is [ZEBRA-7741-QUOKKA]."  # escaped in generated Markdown
    clean = Caller("chat-alpha", "c1", Label(DataClass.PRIVATE, False))
    service.memory.writer.note(clean, "A plain note that stays.", "note")
    kept = capture(service, "Staging is 10.0.0.7.", kind="state", subject="host:staging-ip")
    gone = capture(service, secret_text, scope="lockers")
    service.memory.writer.memory(OWNER, Add(file="user", text=secret_text))
    archive(service, "owner")
    clock.advance(hours=1)
    planned = run.plan(service.memory.holdings, {"items": [gone], "reserve": True})
    assert isinstance(planned, dict)
    tombstone = run.execute(
        service.memory.holdings,
        {"items": [gone], "authority": "ticket-42", "erasure_id": planned["erasure_id"]},
    )
    assert isinstance(tombstone, dict)
    memory = home / "memory"
    out = tmp_path / "replayed"
    replay.replay(journal(service), out, withdrawn_by_id)

    wanted = ("items.jsonl", "notes.md", "memory.md", "user.md", "index.md", "erasures.jsonl")
    original, rebuilt = generated_files(memory, wanted), generated_files(out, wanted)
    assert sorted(original) == sorted(rebuilt)
    assert "erasures.jsonl" in original
    for name in original:
        assert rebuilt[name] == original[name], name
        assert b"ZEBRA-7741" not in rebuilt[name], name
    assert service.memory.items.get(kept) is not None
    assert not service.memory.items.items()[kept].erased
    assert service.memory.items.items()[gone].erased


def test_bxctl_style_replay_refuses_a_folder_that_is_not_empty(service: Memoryd, tmp_path: Path) -> None:
    (tmp_path / "x").write_text("owner's file")
    refused = replay_into(service.memory.journal, tmp_path, service.memory.exclusion_for)
    assert not isinstance(refused, list)
    assert refused.code == "refused:exists"
    assert (tmp_path / "x").read_text() == "owner's file"
    done = replay_into(service.memory.journal, tmp_path / "new", service.memory.exclusion_for)
    assert isinstance(done, list)
    assert "index.md" in done


def test_a_run_over_many_files_names_the_first_ones_and_counts_the_rest() -> None:
    files = {f"archive/2026-01-{day:02d}.md": [f"mem-2026-01-{day:02d}-001"] * day for day in range(1, 13)}
    sentence = Run("mem-edit-1", files).sentence()
    assert sentence.startswith("archived 1 item to archive/2026-01-01.md, 2 items to archive/2026-01-02.md, ")
    assert "archive/2026-01-10.md" in sentence
    assert "2026-01-11" not in sentence
    assert sentence.endswith(", and 23 items to 2 more files (mem-edit-1)")
    few = Run("mem-edit-2", dict(list(files.items())[:LISTED])).sentence()
    assert "more files" not in few
    assert few.count("archive/") == LISTED
