"""Each source's shape as bxctl import reads it (issue 17), from exports written by hand: what becomes
a conversation (its records, labels and UTC times), an entry, or a suggestion; a malformed export is
one sentence naming the file and the place."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import import_exports as exports
import pytest

from boxmaker.bxctl.imports import chatgpt, claude, claude_code, gemini, hermes
from boxmaker.bxctl.imports.parsed import Malformed


def _types(records: list[dict[str, object]]) -> list[str]:
    return [str(r["type"]) for r in records]


def test_hermes_home_gives_entries_and_sessions(tmp_path: Path) -> None:
    home = exports.hermes_home(tmp_path)
    parsed = hermes.parse(home)
    assert [(e.file, e.text) for e in parsed.entries] == [
        ("memory", "Project Atlas deploys from the main branch."),
        ("memory", "The build server is ci.example.org."),
        ("memory", exports.POISON),
        ("user", "Owner prefers answers in UTC."),
        ("user", "Owner's cat is called Miso."),
    ]
    assert parsed.entries[1].place == "memories/MEMORY.md entry 2"
    (session,) = parsed.conversations
    assert session.conversation == "20260301_101500_ab12cd"
    assert session.title == "Kayak trip"
    assert _types(session.records) == ["user", "assistant", "tool_result", "assistant"]
    call = session.records[1]["tool_calls"][0]  # type: ignore[index]
    assert call == {"id": "call_1", "name": "web_search", "arguments": '{"q": "tides"}'}
    result = session.records[2]
    assert (result["untrusted"], result["class"], result["call"]) == (True, "private", "web_search")
    assert result["time"] == "2026-03-01T10:15:03.5Z"
    assert hermes.parse(home / "memories").conversations == []  # its memories/ folder alone


def test_hermes_unknown_schema_version_is_refused_in_one_sentence(tmp_path: Path) -> None:
    home = exports.hermes_home(tmp_path, version=31)
    with pytest.raises(Malformed) as refused:
        hermes.parse(home)
    assert str(refused.value) == (
        f"{home / 'state.db'}, table schema_version: Hermes schema version 31 is not the one bxctl"
        " reads (30); nothing was imported"
    )


def test_chatgpt_takes_the_active_branch_and_marks_browsing_untrusted(tmp_path: Path) -> None:
    parsed = chatgpt.parse(exports.chatgpt_export(tmp_path, custom=True).parent)
    (conversation,) = parsed.conversations
    assert conversation.title == "Harbour weather"
    records = conversation.records
    assert _types(records) == ["user", "assistant", "tool_result", "assistant"]
    assert "zeppelins" not in json.dumps(records)  # the other branch is left out
    assert records[1]["tool_calls"][0]["name"] == "browser"  # type: ignore[index]
    assert records[2]["untrusted"] is True
    assert records[2]["tool_call_id"] == "call-b1"
    assert records[0]["time"] == "2026-01-01T00:00:00Z"
    assert [(s.target, s.text) for s in parsed.suggestions] == [
        ("user.md", "I sail a small boat."),
        ("soul.md or conventions.md", "Answer briefly."),
    ]


def test_claude_ai_tool_results_are_untrusted_and_attachments_the_owners(tmp_path: Path) -> None:
    (conversation,) = claude.parse(exports.claude_export(tmp_path)).conversations
    records = conversation.records
    assert _types(records) == ["user", "assistant", "tool_result", "assistant"]
    assert "[attachment plot.txt]\nPlot is 12 by 30 metres." in str(records[0]["content"])
    assert records[2]["untrusted"] is True
    assert "Council page" in str(records[2]["content"])
    assert records[3]["time"] == "2026-02-10T09:01:00Z"  # +02:00 in the export, UTC in the archive


def test_claude_ai_jsonl_layout_reads_the_same(tmp_path: Path) -> None:
    path = exports.claude_export(tmp_path)
    lines = tmp_path / "conversations.jsonl"
    lines.write_text("".join(json.dumps(c) + "\n" for c in json.loads(path.read_text())))
    assert claude.parse(lines).conversations[0].records == claude.parse(path).conversations[0].records


def test_claude_code_transcripts_auto_memory_and_claude_md(tmp_path: Path) -> None:
    parsed = claude_code.parse(exports.claude_code_projects(tmp_path).parent)
    (conversation,) = parsed.conversations
    assert conversation.conversation == "0a1b2c3d-0000-4000-8000-00000000cc01"
    assert conversation.title == "Atlas build fix"
    assert _types(conversation.records) == ["user", "assistant", "tool_result", "assistant"]
    assert conversation.records[1]["reasoning_content"] == "Check the logs."
    assert conversation.records[2]["call"] == "Bash"
    assert conversation.records[2]["untrusted"] is True
    assert "subagent prompt" not in json.dumps(conversation.records)  # sidechains are left out
    assert [e.text for e in parsed.entries] == [
        "Run `make check` before saying a change works.",
        "CI lives in .forgejo/workflows.",
    ]
    assert [s.text for s in parsed.suggestions] == ["# Style\nUse British spelling."]


def test_gemini_added_memories_are_entries_and_the_rest_a_suggestion(tmp_path: Path) -> None:
    parsed = gemini.parse(exports.gemini_md(tmp_path).parent)
    assert [(e.file, e.text) for e in parsed.entries] == [
        ("user", "My preferred programming language is Python."),
        ("user", "The staging host is stage.example.org."),
    ]
    assert parsed.suggestions[0].text == "# Global context\n\nAlways answer in English."
    assert parsed.conversations == []


@pytest.mark.parametrize(
    ("content", "place"),
    [
        ('[{"id": "x", "mapping": {}, "current_node": "nope"}]', "conversation 1 (x)"),
        ('{"not": "a list"}', "the top level"),
        (
            '[{"id": "x", "mapping": {"a": {"message": null, "parent": "a"}}, "current_node": "a"}]',
            "conversation 1 (x)",
        ),
        ("[{]", "line 1 column 3"),
        (
            '[{"id": "x", "mapping": {"a": {"message": null, "parent": ["b"]}}, "current_node": "a"}]',
            "conversation 1 (x)",
        ),
        (
            '[{"id": "x", "mapping": {"a": {"message": null, "parent": {"b": 1}}}, "current_node": "a"}]',
            "conversation 1 (x)",
        ),
    ],
)
def test_a_malformed_chatgpt_export_names_the_file_and_place(
    tmp_path: Path, content: str, place: str
) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(content)
    with pytest.raises(Malformed) as refused:
        chatgpt.parse(path)
    assert str(refused.value).startswith(f"{path}, {place}: ")
    assert str(refused.value).endswith("; nothing was imported")


def test_a_hermes_db_that_is_not_one_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    sqlite3.connect(home / "state.db").close()
    with pytest.raises(Malformed, match=r"has no schema_version table: not a Hermes state\.db"):
        hermes.parse(home)


def test_json_nested_too_deeply_is_refused_naming_the_file_and_place(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "conversations.json"
    path.write_text(deep)
    with pytest.raises(Malformed, match=r"holds JSON nested too deeply to read; nothing was imported$"):
        chatgpt.parse(path)
    lines = tmp_path / "conversations.jsonl"
    lines.write_text(json.dumps({"uuid": "u1", "chat_messages": []}) + "\n" + deep + "\n")
    with pytest.raises(Malformed, match=r"conversations\.jsonl, line 2: holds JSON nested too deeply"):
        claude.parse(lines)
    home = exports.hermes_home(tmp_path)
    conn = sqlite3.connect(home / "state.db")
    conn.execute("UPDATE messages SET tool_calls = ? WHERE tool_calls IS NOT NULL", (deep,))
    conn.commit()
    conn.close()
    with pytest.raises(Malformed, match=r"state\.db, session 20260301_101500_ab12cd message 3: holds JSON"):
        hermes.parse(home)


@pytest.mark.parametrize(
    ("column", "value", "kind", "message"),
    [
        ("reasoning_content", b"\xff", "bytes", 3),
        ("content", b"\xff\xfe", "bytes", 3),
        ("tool_name", b"\xff", "bytes", 4),
        ("tool_call_id", b"call", "bytes", 4),
    ],
)
def test_a_hermes_column_of_the_wrong_type_is_refused_naming_the_message(
    tmp_path: Path, column: str, value: object, kind: str, message: int
) -> None:
    home = exports.hermes_home(tmp_path)
    conn = sqlite3.connect(home / "state.db")
    conn.execute(f"UPDATE messages SET {column} = ? WHERE id = ?", (value, message))
    conn.commit()
    conn.close()
    with pytest.raises(Malformed) as refused:
        hermes.parse(home)
    assert str(refused.value) == (
        f"{home / 'state.db'}, session 20260301_101500_ab12cd message {message}: has a {column} that is"
        f" {kind}, not text; nothing was imported"
    )


def test_a_time_past_the_years_python_holds_in_utc_is_no_time(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    message = {"sender": "human", "created_at": "9999-12-31T23:59:59-05:00", "text": "far future"}
    conversation = {"uuid": "u1", "created_at": "0001-01-01T00:30:00+01:00", "chat_messages": [message]}
    path.write_text(json.dumps([conversation]))
    with pytest.raises(Malformed, match=r"message 1: has no created_at time, nor has its conversation"):
        claude.parse(path)
    conversation["created_at"] = "2026-01-02T03:04:05+02:00"
    path.write_text(json.dumps([conversation]))
    assert claude.parse(path).conversations[0].records[0]["time"] == "2026-01-02T01:04:05Z"


def test_a_device_or_a_pipe_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    zero = tmp_path / "conversations.json"
    zero.symlink_to("/dev/zero")  # endless: reading it whole would never end
    with pytest.raises(Malformed, match=r"conversations\.json: is not a regular file; nothing was imported$"):
        chatgpt.parse(zero)
    pipe = tmp_path / "GEMINI.md"
    os.mkfifo(pipe)  # opening it would wait for a writer forever
    with pytest.raises(Malformed, match=r"GEMINI\.md: is not a regular file"):
        gemini.parse(tmp_path)


def test_a_hermes_home_whose_path_holds_uri_characters_is_read_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    root = tmp_path / "a?b#c%20d"
    root.mkdir()
    home = exports.hermes_home(root)
    before = sorted(tmp_path.rglob("*"))
    parsed = hermes.parse(home)
    assert [c.conversation for c in parsed.conversations] == ["20260301_101500_ab12cd"]
    assert sorted(tmp_path.rglob("*")) == before  # no file opened read-write beside it


def test_a_hidden_browsing_result_still_taints_what_follows(tmp_path: Path) -> None:
    conversation = exports.chatgpt_conversation()
    conversation["mapping"]["t1"]["message"]["metadata"]["is_visually_hidden_from_conversation"] = True
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([conversation]))
    records = chatgpt.parse(path).conversations[0].records
    assert _types(records) == ["user", "assistant", "tool_result", "assistant"]
    assert records[2]["untrusted"] is True


def test_a_server_tools_result_in_a_claude_message_taints_what_follows(tmp_path: Path) -> None:
    search = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "tides"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"text": "Page text"}]},
        {"type": "text", "text": "High water is at 06:12."},
    ]
    messages = [
        {"sender": "human", "created_at": "2026-01-01T00:00:00Z", "text": "When is high water?"},
        {"sender": "assistant", "created_at": "2026-01-01T00:00:05Z", "content": search},
        {
            "sender": "human",
            "created_at": "2026-01-01T00:00:09Z",
            "content": [
                {"type": "tool_result", "tool_use_id": "x", "content": "an integration's output"},
                {"type": "text", "text": "Thanks."},
            ],
        },
    ]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"uuid": "c1", "chat_messages": messages}]))
    records = claude.parse(path).conversations[0].records
    assert _types(records) == ["user", "assistant", "tool_result", "assistant", "tool_result", "user"]
    assert records[1]["tool_calls"][0]["name"] == "web_search"  # type: ignore[index]
    assert records[2]["content"] == "Page text"
    assert records[4]["content"] == "an integration's output"
    transcript = tmp_path / "projects" / "-home-owner" / "s1.jsonl"
    transcript.parent.mkdir(parents=True)
    base = {"sessionId": "s1", "timestamp": "2026-01-01T00:00:05Z"}
    lines = [
        {**base, "type": "user", "message": {"role": "user", "content": "When is high water?"}},
        {**base, "type": "assistant", "message": {"role": "assistant", "content": search}},
    ]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    records = claude_code.parse(tmp_path / "projects").conversations[0].records
    assert _types(records) == ["user", "assistant", "tool_result", "assistant"]
    assert records[2]["untrusted"] is True
    assert records[3]["content"] == "High water is at 06:12."
