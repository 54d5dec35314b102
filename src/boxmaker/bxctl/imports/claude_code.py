"""Claude Code's transcripts and auto memory (issue 17).

PATH is a ``~/.claude/projects/`` folder (or ``~/.claude``, which holds it). Each project is a folder
named after its path (``/`` as ``-``) holding:

- ``<session id>.jsonl`` transcripts (the name is the conversation's id): one JSON record a line,
  ``{"type": "user" | "assistant" | "summary" | "system" | ..., "sessionId", "timestamp" (ISO 8601),
  "isSidechain", "isMeta", "message": {"role", "content": string | blocks}}``. A ``user`` record's
  text is the owner's turn, its ``tool_result`` blocks are untrusted tool results (so what follows is
  tainted); an ``assistant`` record's text is the reply, ``tool_use`` blocks its tool calls,
  ``thinking`` its reasoning, and a server tool's result in it (any block type ending in
  ``tool_result``, such as ``web_search_tool_result``) an untrusted tool result too. Sidechains
  (subagents), meta records, summaries and the other types are left out. A last line without its
  newline (a session being written) is not read yet.
- ``memory/MEMORY.md``, the auto memory: each bullet (``- `` or ``* ``) is an entry for memory.md.

``CLAUDE.md``, ``AGENTS.md`` and ``rules/*.md`` beside ``projects/``, the user's instructions, are shown
to the owner as suggestions for soul.md or conventions.md, never stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from boxmaker.bxctl.imports.parsed import (
    Conversation,
    Entry,
    Malformed,
    Parsed,
    Suggestion,
    from_iso,
    loads,
    read_text,
    text_of,
)


def parse(path: Path) -> Parsed:
    """Read a projects/ folder (module docstring).

    Raises:
        Malformed: a transcript line that is not a JSON object, or a file that cannot be read.
    """
    projects = path / "projects" if (path / "projects").is_dir() else path
    if not projects.is_dir():
        raise Malformed(path, "", "is not a folder (a ~/.claude/projects/ folder was expected)")
    parsed = Parsed()
    for project in sorted(p for p in projects.iterdir() if p.is_dir() and not p.is_symlink()):
        for transcript in sorted(project.glob("*.jsonl")):
            conversation = _transcript(transcript)
            if conversation.records:
                parsed.conversations.append(conversation)
        memory = project / "memory" / "MEMORY.md"
        if memory.is_file():
            parsed.entries.extend(_bullets(memory, f"projects/{project.name}/memory/MEMORY.md"))
    rules = sorted((projects.parent / "rules").glob("*.md"))
    for instructions in [projects.parent / "CLAUDE.md", projects.parent / "AGENTS.md", *rules]:
        if instructions.is_file() and read_text(instructions).strip():
            parsed.suggestions.append(
                Suggestion(str(instructions), read_text(instructions).strip(), "soul.md or conventions.md")
            )
    return parsed


def _bullets(path: Path, place: str) -> list[Entry]:
    found = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        stripped = line.strip()
        if stripped[:2] in ("- ", "* ") and stripped[2:].strip():
            found.append(Entry("memory", stripped[2:].strip(), f"{place} line {number}"))
    return found


def _transcript(path: Path) -> Conversation:
    data = read_text(path)
    lines = data.split("\n")
    if not data.endswith("\n"):
        lines = lines[:-1]  # a torn last line: the session is still being written
    conversation = Conversation(path.stem, "", file=path)
    names: dict[str, str] = {}
    last: str | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        place = f"line {number}"
        record = loads(line, path, place)
        if not isinstance(record, dict):
            raise Malformed(path, place, "is not a JSON object")
        kind = record.get("type")
        if kind == "summary" and not conversation.title:
            conversation.title = str(record.get("summary") or "")
        if kind not in ("user", "assistant") or record.get("isSidechain") or record.get("isMeta"):
            continue
        when = from_iso(record.get("timestamp")) or last
        if when is None:
            raise Malformed(path, place, "has no timestamp")
        last = when
        message = record.get("message")
        if not isinstance(message, dict):
            raise Malformed(path, place, "has no message object")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise Malformed(path, place, "has a message content that is neither text nor a list")
        if kind == "user":
            _user(conversation, when, blocks, names)
        else:
            _assistant(conversation, when, blocks, names)
    return conversation


def _user(conversation: Conversation, when: str, blocks: list[Any], names: dict[str, str]) -> None:
    text = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif str(block.get("type")).endswith("tool_result"):
            _result(conversation, when, block, names)
    joined = "\n\n".join(t for t in text if t.strip())
    if joined:
        conversation.user(when, joined)


def _result(conversation: Conversation, when: str, block: dict[str, Any], names: dict[str, str]) -> None:
    """A ``*tool_result`` block as an untrusted ``tool_result`` record, named after its call."""
    body = block.get("content")
    if isinstance(body, list):
        output = "\n".join(
            str(b["text"]) if isinstance(b, dict) and isinstance(b.get("text"), str) else text_of(b)
            for b in body
        )
    else:
        output = text_of(body) if body is not None else ""
    ident = str(block.get("tool_use_id") or "")
    conversation.tool_result(when, names.get(ident, "tool"), ident, output)


def _assistant(conversation: Conversation, when: str, blocks: list[Any], names: dict[str, str]) -> None:
    """The blocks in order; a server tool's result (``web_search_tool_result``) inside the message ends
    the record before it, so what follows it is tainted."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[str, str, str]] = []

    def flush() -> None:
        content = "\n\n".join(t for t in text if t.strip()) or None
        if content or calls or reasoning:
            conversation.assistant(when, content, list(calls), "\n\n".join(reasoning) or None)
        text.clear()
        reasoning.clear()
        calls.clear()

    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = str(block.get("type"))
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            reasoning.append(block["thinking"])
        elif kind.endswith("tool_use"):  # tool_use, server_tool_use, mcp_tool_use
            ident = str(block.get("id") or f"call-{len(conversation.records)}")
            name = str(block.get("name") or "tool")
            names[ident] = name
            calls.append((ident, name, json.dumps(block.get("input", {}), ensure_ascii=False)))
        elif kind.endswith("tool_result"):  # web_search_tool_result, mcp_tool_result
            flush()
            _result(conversation, when, block, names)
    flush()
