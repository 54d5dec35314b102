"""The shared erasure helpers (seed 003 section 12.3): the scrubber's forms and file kinds."""

from __future__ import annotations

import json
import os
from pathlib import Path

from boxmaker.proto.erasure import Scrubber, holder, is_authority, is_erasure_id, rewrite, scrub_file

TEXT = "Schließfach code is ZEBRA-7741"


def test_authority_and_ids() -> None:
    assert is_authority("ticket-42")
    assert is_authority("JIRA:SEC/1.2_3")
    assert not is_authority("the owner asked")
    assert not is_authority("x" * 81)
    assert not is_authority("")
    assert is_erasure_id("memerase-2026-11-29-001")
    assert not is_erasure_id("memerase-2026-11-29-1")


def test_jsonl_lines_are_scrubbed_in_every_string_and_reencoded_as_ascii() -> None:
    args = json.dumps({"action": "note", "text": TEXT})  # a tool call's arguments: JSON inside JSON
    lines = [
        {"type": "user", "content": f"my {TEXT}!"},
        {"type": "assistant", "tool_calls": [{"id": "c1", "name": "memory", "arguments": args}]},
        {"type": "usage", "prompt_n": 1},
    ]
    data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in lines)
    data += b'{"torn": "' + TEXT.encode() + b'"'
    scrubber = Scrubber([TEXT], "memerase-2026-11-29-001")
    out = scrubber.jsonl(data)
    assert not scrubber.remains(out)
    assert b"ZEBRA" not in out
    rows = out.split(b"\n")
    assert json.loads(rows[0])["content"] == "my [erased memerase-2026-11-29-001]!"
    assert rows[2] == data.split(b"\n")[2]  # an unchanged line keeps its bytes
    assert rows[3] == b'{"torn": "[erased memerase-2026-11-29-001]"'
    assert out.isascii()
    assert scrubber.count == 3


def test_short_texts_only_match_whole_values_and_anchors_become_source_erased() -> None:
    scrubber = Scrubber(["Blue."], "memerase-2026-11-29-002", anchors=("sessions/chat-a/",))
    assert scrubber.value({"a": "Blue.", "b": "Blue. is my colour", "s": "sessions/chat-a/0.jsonl#3"}) == {
        "a": "[erased memerase-2026-11-29-002]",
        "b": "Blue. is my colour",
        "s": "source-erased:memerase-2026-11-29-002",
    }
    assert scrubber.short == 1


def test_rewrite_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "x.md"
    path.write_text(f"# a\n{TEXT}\n", encoding="utf-8")
    os.chmod(path, 0o640)
    assert scrub_file(path, Scrubber([TEXT], "memerase-2026-11-29-003")) == 1
    assert path.read_text(encoding="utf-8") == "# a\n[erased memerase-2026-11-29-003]\n"
    assert os.stat(path).st_mode & 0o777 == 0o640
    rewrite(path, b"x")
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_holder_shape() -> None:
    assert holder("memory/notes.md", "completed") == {
        "holder_ref": "memory/notes.md",
        "result": "completed",
        "limitation_ref": None,
        "sanitized_replacement_refs": [],
    }
