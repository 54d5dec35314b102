"""bxctl sessions: the sessions on disk, their epochs, summaries, transcripts and damage (issue 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from boxmaker.bxctl.cli import cli
from boxmaker.loopd.session import Baseline, digest


def write(home: Path, session: str, epochs: list[list[dict[str, Any]]]) -> Path:
    folder = home / "sessions" / session
    folder.mkdir(parents=True)
    for number, records in enumerate(epochs):
        data = Baseline(f"system {number}", []).to_bytes()
        (folder / f"{number}.baseline.json").write_bytes(data)
        start = {
            "type": "session_start",
            "time": "2026-11-29T10:00:00Z",
            "epoch": number,
            "slot": 0,
            "baseline": digest(data),
        }
        lines = [start, *records]
        if number < len(epochs) - 1:
            lines.append(
                {
                    "type": "epoch_end",
                    "time": "2026-11-29T10:30:00Z",
                    "next": number + 1,
                    "summary": f"summary of epoch {number}",
                }
            )
        (folder / f"{number}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "time": "2026-11-29T10:01:00Z", "content": text}


def test_list_show_and_transcript(home: Path) -> None:
    write(home, "chat-a", [[user("hello"), user("again")], [user("third \x1b[31m")]])
    listing = CliRunner().invoke(cli, ["sessions"])
    assert listing.exit_code == 0
    assert "chat-a  3 turns  epoch 1  started 2026-11-29T10:00:00Z" in listing.output
    shown = CliRunner().invoke(cli, ["sessions", "show", "chat-a"])
    assert shown.exit_code == 0
    assert "session chat-a: 3 turns, 2 epochs" in shown.output
    assert "summary carried into epoch 1 (18 characters):\nsummary of epoch 0" in shown.output
    data = json.loads(CliRunner().invoke(cli, ["sessions", "show", "chat-a", "--json"]).output)
    assert [e["turns"] for e in data["epochs"]] == [2, 1]
    text = CliRunner().invoke(cli, ["sessions", "show", "chat-a", "--transcript"]).output
    assert "owner: third \\x1b[31m" in text
    assert "compacted; summary: summary of epoch 0" in text


def test_damage_is_named_and_exits_1(home: Path) -> None:
    folder = write(home, "chat-d", [[user("a")], [user("b")]])
    (folder / "1.baseline.json").write_text('{"system": "edited", "tools": []}')
    listing = CliRunner().invoke(cli, ["sessions"])
    assert "DAMAGED" in listing.output
    shown = CliRunner().invoke(cli, ["sessions", "show", "chat-d"])
    assert shown.exit_code == 1
    assert "epoch 1: DAMAGED: 1.baseline.json changed since the epoch started" in shown.output


def test_a_missing_carry_and_a_pending_compaction(home: Path) -> None:
    folder = write(home, "chat-c", [[user("a")], [user("b")]])
    lines = (folder / "0.jsonl").read_text().splitlines()
    (folder / "0.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # epoch_end removed
    shown = CliRunner().invoke(cli, ["sessions", "show", "chat-c"])
    assert "epoch 1 has no carry" in shown.output
    pending = write(home, "chat-p", [[user("a")], []])
    (pending / "1.jsonl").unlink()
    (pending / "1.baseline.json").unlink()
    assert "compaction pending" in CliRunner().invoke(cli, ["sessions"]).output


def test_bad_ids_are_usage_errors(home: Path) -> None:
    for bad in ("owner", "Bad", "a/b"):
        result = CliRunner().invoke(cli, ["sessions", "show", bad])
        assert result.exit_code == 2
        assert "not a session id" in result.output
    assert CliRunner().invoke(cli, ["sessions", "show", "chat-none"]).exit_code == 1
    home.mkdir(parents=True, exist_ok=True)  # a home that does not exist is said (issue 18)
    assert CliRunner().invoke(cli, ["sessions"]).output == "(no sessions)\n"


def test_each_epochs_memory_flush_is_shown(home: Path) -> None:
    flush_user = {**user("Save what you should keep."), "speaker": "loopd"}
    done = {"type": "flush", "time": "2026-11-29T10:02:00Z", "outcome": "done"}
    failed = {"type": "flush", "time": "2026-11-29T11:02:00Z", "outcome": "failed", "why": "no room \x1b[31m"}
    write(home, "chat-f", [[user("hello"), flush_user, done], [user("more"), failed], [user("last")]])
    shown = CliRunner().invoke(cli, ["sessions", "show", "chat-f"]).output
    assert "memory flush before compaction: done" in shown
    assert "memory flush before compaction: failed: no room \\x1b[31m" in shown
    data = json.loads(CliRunner().invoke(cli, ["sessions", "show", "chat-f", "--json"]).output)
    assert [e["flush"] for e in data["epochs"]] == [
        {"outcome": "done", "why": ""},
        {"outcome": "failed", "why": "no room \x1b[31m"},
        None,
    ]
    text = CliRunner().invoke(cli, ["sessions", "show", "chat-f", "--transcript"]).output
    assert "loopd: Save what you should keep." in text
    assert "2026-11-29T10:02:00Z memory flush before compaction: done" in text
