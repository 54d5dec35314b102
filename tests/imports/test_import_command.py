"""``bxctl import`` end to end against a real memoryd (issue 17): a small Hermes home and a ChatGPT
export made by hand come in and are found by recall with the right tags; a second import changes
nothing; a broken export is refused whole, naming the file and the place; each import command's help
names the other."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import import_exports as exports
import pytest
from click.testing import CliRunner

from boxmaker.bxctl import imports as command
from boxmaker.bxctl.cli import cli


def _files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


def test_hermes_and_chatgpt_come_in_and_recall_finds_them_tagged(
    home: Path, daemon: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    hermes_home = exports.hermes_home(tmp_path)
    dry = CliRunner().invoke(cli, ["import", "hermes", str(hermes_home), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("dry run: nothing changed; import from hermes")
    assert not (home / "imports").exists()
    done = CliRunner().invoke(cli, ["import", "hermes", str(hermes_home)])
    assert done.exit_code == 0, done.output
    assert "memories/MEMORY.md entry 1: noted (untrusted), pending for memory.md" in done.output
    assert "memories/MEMORY.md entry 3: refused by the check: refused (phrase)" in done.output
    assert "conversations: 1 archived; entries: 4 noted and pending, 1 refused by the check" in done.output
    chatgpt = exports.chatgpt_export(tmp_path, custom=True)
    first = CliRunner().invoke(cli, ["import", "chatgpt", str(chatgpt), "--json"])
    assert first.exit_code == 0, first.output
    data = json.loads(first.output)
    assert [(a["state"], a["title"]) for a in data["archives"]] == [("new", "Harbour weather")]
    assert data["suggestions"][1] == {
        "place": "custom instructions (user_instructions, conversation 1"
        " (6790a1b2-0000-4000-8000-00000000c0de) node sys)",
        "target": "soul.md or conventions.md",
        "text": "Answer briefly.",
    }
    found = CliRunner().invoke(cli, ["memory", "search", "Stormglass marine endpoint", "--json"])
    hits = [h for h in json.loads(found.output)["hits"] if "Stormglass" in h["text"]]
    assert hits
    assert {h["tag"] for h in hits} == {"memory-tainted"}
    asked = CliRunner().invoke(cli, ["memory", "search", "weather API Harbour", "--json"])
    owner = [h for h in json.loads(asked.output)["hits"] if h["text"].startswith("Which weather API")]
    assert [h["tag"] for h in owner] == ["memory"]
    files = _files(home / "imports")
    again = CliRunner().invoke(cli, ["import", "chatgpt", str(chatgpt), "--json"])
    assert [a["state"] for a in json.loads(again.output)["archives"]] == ["unchanged"]
    again = CliRunner().invoke(cli, ["import", "hermes", str(hermes_home)])
    assert (
        "conversations: 1 unchanged, skipped; entries: 4 brought before, 1 refused by the check"
        in again.output
    )
    assert _files(home / "imports") == files
    pending = CliRunner().invoke(cli, ["memory", "pending", "--json"])
    assert len(json.loads(pending.output)) == 4  # staged once, not again
    verified = CliRunner().invoke(cli, ["memory", "verify"])
    assert verified.exit_code == 0, verified.output  # the journal's chain holds every import line


def test_a_broken_export_is_refused_whole(home: Path, tmp_path: Path) -> None:
    good = exports.chatgpt_conversation()
    path = tmp_path / "conversations.json"
    path.write_text(
        json.dumps(
            [good, {"id": "c2", "mapping": {"n1": {"message": None, "parent": "gone"}}, "current_node": "n1"}]
        )
    )
    refused = CliRunner().invoke(cli, ["import", "chatgpt", str(path), "--json"])
    assert refused.exit_code == 1
    sentence = (
        f"{path}, conversation 2 (c2): names a parent node gone that is not in its mapping;"
        " nothing was imported\nrunbook: import-refused (docs/runbook.md)"
    )
    assert json.loads(refused.output.split("\nError")[0]) == {
        "code": "malformed",
        "text": sentence,
        "exit_code": 1,
    }
    assert not (home / "imports").exists()
    typo = CliRunner().invoke(cli, ["import", "chatgtp", str(path)])
    assert typo.exit_code == 2
    assert "Traceback" not in typo.output


def test_each_import_command_names_the_other() -> None:
    assert "bxctl memory import" in CliRunner().invoke(cli, ["import", "--help"]).output
    assert "bxctl import" in CliRunner().invoke(cli, ["memory", "import", "--help"]).output


def test_a_large_export_goes_in_several_requests(
    home: Path, daemon: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "BATCH_BYTES", 3000)
    conversations = []
    for number in range(12):
        conversation = exports.chatgpt_conversation()
        conversation["id"] = conversation["conversation_id"] = f"conv-{number}"
        conversations.append(conversation)
    huge = exports.chatgpt_conversation()
    huge["id"] = huge["conversation_id"] = "conv-huge"
    huge["mapping"]["u1"]["message"]["content"]["parts"] = ["x" * 5000]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([*conversations, huge]))
    done = CliRunner().invoke(cli, ["import", "chatgpt", str(path), "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert [a["state"] for a in data["archives"]] == ["new"] * 12
    assert [t["conversation"] for t in data["too_large"]] == ["conv-huge"]  # named, not sent
    assert len(data["edits"]) > 2  # one journal line per request
    assert len(list((home / "imports" / "chatgpt").iterdir())) == 12


def test_a_conversation_id_that_comes_twice_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([exports.chatgpt_conversation(), exports.chatgpt_conversation()]))
    refused = CliRunner().invoke(cli, ["import", "chatgpt", str(path)])
    assert refused.exit_code == 1
    assert (
        "conversation 6790a1b2-0000-4000-8000-00000000c0de: comes twice; nothing was imported"
        in refused.output
    )


def test_a_conversation_id_empty_or_too_long_for_a_request_is_refused_before_anything_is_sent(
    home: Path, daemon: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "BATCH_BYTES", 3000)  # the first conversation would go alone, first
    first = exports.chatgpt_conversation()
    second = exports.chatgpt_conversation()
    second["id"] = second["conversation_id"] = "c" * 513
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([first, second]))
    refused = CliRunner().invoke(cli, ["import", "chatgpt", str(path)])
    assert refused.exit_code == 1
    assert f"{path}, conversation {'c' * 513}: has an id of 513 characters (1 to 512)" in refused.output
    assert "nothing was imported" in refused.output
    assert not (home / "imports").exists()
    home_dir = exports.hermes_home(tmp_path)
    conn = sqlite3.connect(home_dir / "state.db")
    conn.execute("UPDATE sessions SET id = ''")
    conn.execute("UPDATE messages SET session_id = ''")
    conn.commit()
    conn.close()
    empty = CliRunner().invoke(cli, ["import", "hermes", str(home_dir)])
    assert empty.exit_code == 1
    assert f"{home_dir / 'state.db'}, conversation : has an id of 0 characters (1 to 512)" in empty.output
    assert not (home / "imports").exists()


def test_a_huge_memory_file_is_named_not_sent_and_many_entries_go_in_several_requests(
    home: Path, daemon: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "ENTRIES_PER_REQUEST", 2)
    memories = tmp_path / "hermes" / "memories"
    memories.mkdir(parents=True)
    facts = [f"Fact {n}: the lighthouse keeper's boat is number {n}." for n in range(5)]
    (memories / "MEMORY.md").write_text("\n§\n".join(["x" * 5_000_000, *facts]))
    done = CliRunner().invoke(cli, ["import", "hermes", str(tmp_path / "hermes"), "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["too_large"] == [
        {"entry": "memories/MEMORY.md entry 1", "file": "memory.md", "bytes": 5_000_414}
    ]
    assert [e["state"] for e in data["entries"]] == ["noted"] * 5
    assert len(data["edits"]) == 3  # one journal line per request
    pending = CliRunner().invoke(cli, ["memory", "pending", "--json"])
    assert len(json.loads(pending.output)) == 5
    said = CliRunner().invoke(cli, ["import", "hermes", str(tmp_path / "hermes")])
    assert said.exit_code == 0, said.output
    assert (
        "memories/MEMORY.md entry 1 (for memory.md): not imported, too large for one request" in said.output
    )
    assert "entries: 5 brought before" in said.output


def test_a_refusal_shows_the_exports_control_characters_escaped(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"id": "evil\x1b[2J\x1b]8;;https://x.example\x07\u202e", "mapping": 5}]))
    refused = CliRunner().invoke(cli, ["import", "chatgpt", str(path)], color=True)
    assert refused.exit_code == 1
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in refused.output
    assert (
        f"{path}, conversation 1 (evil\\x1b[2J\\x1b]8;;https://x.example\\x07\\u202e): has no mapping;"
        " nothing was imported" in refused.output
    )
